"""The VRAM, time and memory-fraction plans on the paths the other tests leave out: impossible layouts and
their Spanish messages (library and CLI), the multi-card summary and comparison tables, the Unsloth path
without Standby, the full fine-tune's time and disk plan, and the vLLM memory fraction without vLLM, with
the override and with Standby off. Everything here is arithmetic: no GPU, no model loaded."""

from __future__ import annotations

import sys

import pytest

from labs.core.profiles import get_profile
from labs.l72.memory import MemoryFraction, expected_gpu_fraction, unsloth_memory_fraction
from labs.l72.standby import STANDBY_ENV, UTIL_OVERRIDE_ENV
from labs.vram import cli, multi, planner, spec, timeplan

# --- impossible layouts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "layout", "zero", "expected"),
    [
        (2, "ring", 0, "layout='ring': los esquemas son colocate, server."),
        (0, "colocate", 0, "--gpus 0: hace falta al menos una tarjeta."),
        (-1, "colocate", 0, "--gpus -1: hace falta al menos una tarjeta."),
        (2, "colocate", 4, "--zero 4: las etapas de DeepSpeed ZeRO son 1, 2 y 3 (0 = sin DeepSpeed, DDP)."),
    ],
)
def test_impossible_layouts_say_what_is_wrong_in_spanish(gpus, layout, zero, expected):
    """plan_gpus refuses an unknown layout, no card or a ZeRO stage that does not exist, naming the value."""
    with pytest.raises(multi.LayoutError) as caught:
        multi.plan_gpus(get_profile("rtx5090"), gpus, layout, zero, card_gib=32.0)
    assert str(caught.value) == expected


def test_valid_layouts_pass_the_check():
    """The stages 0-3 on colocate and server with two cards are all accepted (the check is not over-eager)."""
    for zero in (0, 1, 2, 3):
        for layout in multi.LAYOUTS:
            multi.check_layout(2, layout, zero)  # raises on a false alarm


def test_cli_reports_an_impossible_layout_and_exits_with_2(capsys):
    """`python -m labs vram --gpus 1 --layout server` prints the Spanish reason and exits 2 (not a traceback)."""
    status = cli.main(["--profile", "rtx5090", "--gpus", "1", "--layout", "server", "--card-gib", "32"])
    out = capsys.readouterr().out
    assert status == 2
    assert out.strip() == ("ERROR: El modo servidor necesita al menos 2 tarjetas: una para vLLM y otra para "
                           "entrenar.")


def test_cli_reports_a_zero_stage_that_does_not_exist(capsys):
    """--zero 5 goes to the multi-card planner, which names the stages that exist."""
    status = cli.main(["--profile", "ci", "--gpus", "2", "--zero", "5", "--card-gib", "32"])
    out = capsys.readouterr().out
    assert status == 2
    assert out.startswith("ERROR: --zero 5: las etapas de DeepSpeed ZeRO son 1, 2 y 3")
    assert "Plan de VRAM" not in out


# --- the multi-card summary and tables ---------------------------------------------------------------


@pytest.mark.parametrize(("gpus", "layout", "lora"), [(2, "colocate", False), (4, "server", True)])
def test_summary_has_one_line_per_card_kind_with_a_verdict_matching_the_plan(gpus, layout, lora):
    """summary_es: one line per kind of card, its route, total against the card, margin and cabe / NO cabe."""
    plans = multi.plan_gpus(get_profile("rtx5090"), gpus, layout, 0, 32.0, lora=lora)
    lines = multi.summary_es(plans).splitlines()
    assert len(lines) == len(plans) == (2 if layout == "server" else 1)
    for line, plan in zip(lines, plans):
        assert line.startswith(plan.route_es + ": ")
        assert f"{planner._es(plan.total_gib)} de 32,00 GiB, margen {planner._es(plan.margin_gib)} GiB" in line
        assert line.endswith(": cabe" if plan.fits else ": NO cabe")


def test_summary_says_no_cabe_for_a_full_fine_tune_on_two_32_gib_cards():
    """A full fine-tune of the 4B model with plain DDP replicates everything: it does not fit in 32 GiB."""
    plans = multi.plan_gpus(get_profile("rtx5090"), 2, "colocate", 0, 32.0, lora=False)
    assert not plans[0].fits
    assert multi.summary_es(plans).endswith("NO cabe")


def test_compare_gives_one_row_per_layout_matching_plan_gpus():
    """compare: each row names its layout and carries the most loaded card, the verdict and the prompts."""
    profile = get_profile("rtx5090")
    rows = multi.compare(profile, 32.0)
    assert len(rows) == len(multi.COMPARED)
    for row, (gpus, layout, zero, lora) in zip(rows, multi.COMPARED):
        plans = multi.plan_gpus(profile, gpus, layout, zero, 32.0, lora=lora, suggest=False)
        trainers = gpus - 1 if layout == "server" else gpus
        assert row == {
            "GPUs": gpus, "esquema": layout, "ZeRO": zero or "-", "ajuste": "LoRA" if lora else "completo",
            "GiB en la tarjeta más cargada": round(max(p.total_gib for p in plans), 1),
            "cabe": "sí" if all(p.fits for p in plans) else "no",
            "prompts por paso": profile.per_device_train_batch_size * trainers
            * profile.gradient_accumulation_steps // profile.num_generations,
        }
    # The course's point: LoRA on one card fits a 5090, a full fine-tune with DDP on two does not.
    assert rows[0]["cabe"] == "sí" and rows[3]["cabe"] == "no"
    assert rows[1]["prompts por paso"] == 2 * rows[0]["prompts por paso"]


def test_compare_cards_puts_each_cards_figures_side_by_side():
    """compare_cards: one row per layout, with a (GiB, cabe) column pair per card equal to compare()'s."""
    profile = get_profile("rtx5090")
    cards = (32.0, 80.0)
    rows = multi.compare_cards(profile, cards)
    per_card = {card: multi.compare(profile, card) for card in cards}
    assert len(rows) == len(multi.COMPARED)
    for i, row in enumerate(rows):
        assert list(row) == ["GPUs", "esquema", "ZeRO", "ajuste", "prompts por paso",
                             "GiB (32 GiB)", "cabe en 32 GiB", "GiB (80 GiB)", "cabe en 80 GiB"]
        for key in ("GPUs", "esquema", "ZeRO", "ajuste", "prompts por paso"):
            assert row[key] == per_card[32.0][i][key]
        for card in cards:
            assert row[f"GiB ({card:g} GiB)"] == per_card[card][i]["GiB en la tarjeta más cargada"]
            assert row[f"cabe en {card:g} GiB"] == per_card[card][i]["cabe"]
    # The full fine-tune with DDP on two cards: no on a 32 GiB card, yes on an 80 GiB one.
    assert (rows[3]["cabe en 32 GiB"], rows[3]["cabe en 80 GiB"]) == ("no", "sí")


def test_compare_cards_takes_other_layouts_and_card_sizes():
    """Custom layouts and a single card size give a single column pair named after that card."""
    rows = multi.compare_cards(get_profile("rtx5090"), cards=(24.0,), layouts=((1, "colocate", 0, True),))
    expected = multi.compare(get_profile("rtx5090"), 24.0, ((1, "colocate", 0, True),))[0]
    assert rows == [{"GPUs": 1, "esquema": "colocate", "ZeRO": "-", "ajuste": "LoRA",
                     "prompts por paso": expected["prompts por paso"],
                     "GiB (24 GiB)": expected["GiB en la tarjeta más cargada"],
                     "cabe en 24 GiB": expected["cabe"]}]


# --- the single-card planner ---------------------------------------------------------------------


def test_asking_a_plan_for_a_line_it_does_not_have_raises_keyerror():
    """VramPlan.line finds a line by its name and raises KeyError with the name otherwise."""
    plan = planner.plan(get_profile("rtx5090"), "trl", 32.0)
    assert plan.line("Contexto CUDA y fragmentación").gib == pytest.approx(planner.CUDA_CONTEXT_GIB)
    with pytest.raises(KeyError, match="no existe"):
        plan.line("no existe")


def test_unsloth_without_standby_adds_every_phase_and_offers_4bit_and_standby():
    """Without Standby everything lives at once (common + generation + training), and when it does not fit
    the knobs offer load_in_4bit=True and Standby, each with the total that plan would have."""
    profile = get_profile("rtx5090-base")  # 16-bit LoRA: load_in_4bit=False
    plan = planner.plan(profile, "unsloth", 8.0, standby=False)
    assert not plan.fits
    common, gen, train = (plan.phase_gib(p) for p in ("común", "generación", "entrenamiento"))
    assert plan.total_gib == pytest.approx(common + gen + train)
    text = plan.render_es()
    assert ("Sin Standby todo convive: común + generación + entrenamiento = "
            f"{planner._es(common)} + {planner._es(gen)} + {planner._es(train)}") in text
    assert "ruta Unsloth\n" in text  # no " con Standby" in the title

    four_bit = planner.plan(profile.replace(load_in_4bit=True), "unsloth", 8.0, standby=False, suggest=False)
    standby = planner.plan(profile, "unsloth", 8.0, standby=True, suggest=False)
    verdict = {True: "cabe", False: "sigue sin caber"}
    assert (f"load_in_4bit=True: {planner._es(four_bit.total_gib)} GiB, {verdict[four_bit.fits]}"
            in plan.knobs)
    assert ("Standby (UNSLOTH_VLLM_STANDBY=1 antes de importar unsloth): "
            f"{planner._es(standby.total_gib)} GiB, {verdict[standby.fits]}") in plan.knobs
    assert four_bit.total_gib < plan.total_gib and standby.total_gib < plan.total_gib


def test_unsloth_in_4bit_with_standby_offers_neither_knob():
    """With 4-bit weights and Standby on, neither of those two knobs is offered again."""
    plan = planner.plan(get_profile("rtx5090"), "unsloth", 6.0, standby=True)
    assert not plan.fits and plan.knobs
    assert not any(k.startswith(("load_in_4bit=True", "Standby (")) for k in plan.knobs)


# --- spec --------------------------------------------------------------------------------------------


def test_model_spec_returns_a_spec_it_is_given_unchanged():
    """A ModelSpec passed in comes back as is (the planner accepts a spec as well as a name or a config)."""
    assert spec.model_spec(spec.QWEN3_4B) is spec.QWEN3_4B
    assert planner.plan(get_profile("ci"), "trl", 32.0, model=spec.SMOLLM2_135M).params == spec.SMOLLM2_135M.params


def test_card_memory_falls_back_to_the_default_card_without_torch(monkeypatch):
    """Where torch cannot be imported the planner assumes the default 32 GiB card instead of failing."""
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    assert spec.card_memory_gib() == spec.DEFAULT_CARD_GIB == 32.0
    assert planner.plan(get_profile("ci"), "trl").card_gib == spec.DEFAULT_CARD_GIB


# --- time plan ---------------------------------------------------------------------------------------


def test_time_plan_renders_hours_steps_and_disk_with_decimal_commas():
    """render_es: the planned hours labelled "planificado, no medido", the step breakdown and the disk."""
    plan = timeplan.time_plan(get_profile("rtx5090"))
    text = plan.render_es()
    hours = f"{plan.hours:.1f}".replace(".", ",")
    assert text.startswith(f"{hours} h (planificado, no medido): {plan.steps} pasos de unos {plan.step_s:.0f} s")
    assert f"disco: hasta {plan.checkpoint_gb:.1f} GB".replace(".", ",") in text
    assert text.endswith(f"{plan.final_gb:.1f} GB al terminar".replace(".", ","))
    assert plan.breakdown_es() in text.replace(f"{hours} h (planificado, no medido): ", "")


def test_full_fine_tune_time_plan_keeps_the_bf16_weights_and_two_adamw_states_on_disk():
    """Without LoRA a checkpoint holds the bf16 weights and two bf16 AdamW states (3 x 2 B per parameter),
    and the finished run keeps the bf16 weights: far more disk than the LoRA adapters."""
    full = get_profile("cpu")
    assert not full.use_lora
    params = spec.model_spec(full.model).params
    plan = timeplan.time_plan(full)
    logs = full.max_steps * full.generation_batch_size * full.max_completion_length * timeplan.MEAN_LENGTH_SHARE * 4
    assert plan.final_gb == pytest.approx((params * 2 + logs) / 1e9)
    assert plan.checkpoint_gb == pytest.approx((params * 2 * 3 * full.save_total_limit + params * 2 + logs) / 1e9)
    lora = timeplan.time_plan(full.replace(use_lora=True))
    assert lora.final_gb < plan.final_gb / 10


# --- vLLM memory fraction (L7.2) ---------------------------------------------------------------------


def test_memory_fraction_without_vllm_says_nothing_is_reserved():
    """A run with use_vllm=False reserves no fraction, and says so (even with an engine value around)."""
    fraction = MemoryFraction(0.3, None, "no-vllm")
    assert fraction.describe_es() == ("Sin vLLM en este run (use_vllm=False): no hay fracción de memoria "
                                      "reservada para generar.")
    assert fraction.with_engine_value(0.5).describe_es() == fraction.describe_es()


def test_memory_fraction_with_the_override_keeps_the_profiles_value():
    """Standby plus UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE=1: Unsloth keeps the profile's fraction, and the
    message names the variable and the value read back from the engine."""
    profile = get_profile("rtx5090")
    fraction = expected_gpu_fraction(profile, 31.4, "0.11.0", environ={STANDBY_ENV: "1", UTIL_OVERRIDE_ENV: "1"})
    assert (fraction.rule, fraction.in_force) == ("standby-override", profile.vllm_gpu_memory_utilization)
    text = fraction.describe_es()
    assert text == ("Fracción de memoria de vLLM en vigor: 0,4 de la memoria de la GPU: Standby activo, pero "
                    f"{UTIL_OVERRIDE_ENV}=1 hace que Unsloth respete la del perfil.")
    engine = fraction.with_engine_value(0.3712).describe_es()
    assert engine.endswith(" Leído del motor vLLM en marcha: 0,3712.")
    assert "activaciones del entrenamiento" not in engine  # the gap note is for Standby's own choice only


def test_memory_fraction_with_standby_off_uses_the_profiles_value():
    """Standby off: the profile's fraction is in force, on the GPU or on the host's RAM (vLLM's CPU back-end)."""
    fraction = unsloth_memory_fraction(0.35, 31.4, "0.11.0", standby=False, override=True)
    assert (fraction.rule, fraction.in_force) == ("no-standby", 0.35)
    assert fraction.describe_es() == ("Fracción de memoria de vLLM en vigor: 0,35 de la memoria de la GPU "
                                      "(Standby apagado: se usa la del perfil).")
    cpu = MemoryFraction(0.35, 0.35, "no-standby", device="cpu")
    assert "0,35 de la RAM del host (backend CPU de vLLM) (Standby apagado" in cpu.describe_es()
    from_env = expected_gpu_fraction(get_profile("rtx5090"), 31.4, "0.11.0", environ={STANDBY_ENV: "0"})
    assert from_env.rule == "no-standby" and "Standby apagado" in from_env.describe_es()
