"""The GPU path on a faked RTX 5090 (tests/fake_card.py): the course's own code runs, only the card is faked.

Under the GPU stack (``make test-gpu-stack``) the stand-ins bind every Unsloth call to the installed Unsloth's
signatures; under the CPU stack (no Unsloth) these skip.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from labs.core.profiles import get_profile
import fake_card

pytestmark = pytest.mark.skipif(fake_card.unsloth_source("models/loader.py") is None,
                                reason="Unsloth is not installed (the CPU stack): make test-gpu-stack runs these")


@pytest.fixture
def card(monkeypatch):
    return fake_card.install(monkeypatch)


def test_the_faked_card_answers_as_an_rtx_5090(card):
    import torch

    assert torch.cuda.is_available() and torch.cuda.device_count() == 1
    assert torch.cuda.get_device_capability(0) == (12, 0)
    props = torch.cuda.get_device_properties(0)
    assert props.name == "NVIDIA GeForce RTX 5090" and 31 < props.total_memory / 2**30 < 32
    card.cuda.allocate(2 * 2**30)
    free, total = torch.cuda.mem_get_info()
    assert total - free == 2 * 2**30 and torch.cuda.max_memory_allocated() == 2 * 2**30
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.cuda.mem_get_info(1)


def test_the_stand_in_refuses_a_keyword_unsloth_does_not_name(card):
    with pytest.raises(TypeError, match="load_in_4bits"):
        card.unsloth.FastLanguageModel.from_pretrained(model_name="m", load_in_4bits=True)
    model, _ = card.unsloth.FastLanguageModel.from_pretrained(model_name="m", load_in_4bit=True)
    with pytest.raises(TypeError, match="lora_rank"):
        card.unsloth.FastLanguageModel.get_peft_model(model, lora_rank=16)


def test_l72_loads_its_model_through_unsloth_on_a_faked_5090(card, monkeypatch):
    """``labs.l72.gpu.load_unsloth_model``, L7.2's and the rehearsal's load: the fraction Unsloth will hand vLLM
    under Standby (it read the installed vLLM's version through ``package_version``, whose import was missing:
    NameError here), the load with vLLM inside, the fraction read back from the engine, then the LoRA."""
    from labs.l72 import gpu

    _fresh_unsloth_process(monkeypatch)
    assert card.finder.imported_with == {"UNSLOTH_VLLM_STANDBY": "1"}
    profile = get_profile("rtx5090").replace(backend="unsloth")
    lines = []
    model, _tokenizer, fraction = gpu.load_unsloth_model(profile, show=lines.append)
    (loaded,), (peft,) = card.calls.named("from_pretrained"), card.calls.named("get_peft_model")
    assert loaded == gpu.from_pretrained_kwargs(profile) and loaded["fast_inference"] is True
    assert peft == gpu.get_peft_model_kwargs(profile)
    assert fraction.rule == "standby" and fraction.engine_value == model.vllm_engine.llm_engine.vllm_config.\
        cache_config.gpu_memory_utilization
    assert fraction.in_force != profile.vllm_gpu_memory_utilization
    assert len(lines) == 2 and "Leído del motor vLLM en marcha" in lines[1]


@pytest.fixture
def smi(tmp_path, monkeypatch):
    """``nvidia-smi`` answering as the driver of one RTX 5090 (the doctor, the rehearsal and make ask it)."""
    return fake_card.nvidia_smi_on_path(tmp_path / "driver", 'case "$*" in\n'
                                        '  *query-gpu*) echo "NVIDIA GeForce RTX 5090, 590.44.01";;\n'
                                        '  -L) echo "GPU 0: NVIDIA GeForce RTX 5090 (UUID: GPU-5090)";;\n'
                                        '  *) echo "NVIDIA-SMI 590.44.01";;\nesac', monkeypatch)


def test_the_doctor_passes_an_rtx_5090_with_the_gpu_stack(card, smi, capsys, monkeypatch):
    """`python -m labs doctor` on the card: the GPU, its driver, torch's kernels for sm_120 and the GPU stack's
    pins judged for real (only the hub is left unchecked: no network here)."""
    from labs.doctor import cli

    monkeypatch.setenv("COURSE_PROFILE", "rtx5090")
    assert cli.main(["--profile", "rtx5090", "--no-hub"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "OK GPU NVIDIA GeForce RTX 5090, capacidad 12.0 (sm_120), 31.4 GiB en total" in out
    assert "OK Controlador NVIDIA Controlador 590.44.01" in out
    assert "con kernels para sm_120." in out and "OK Versiones fijadas Coinciden con requirements-gpu.txt" in out
    assert "Listo para los labs con el perfil 'rtx5090', con 1 aviso(s)" in out


def test_vram_plans_both_paths_on_the_card_it_sees(card, capsys):
    from labs.vram import cli

    assert cli.main(["--profile", "rtx5090"]) == 0
    out = capsys.readouterr().out
    assert out.count("Memoria de la tarjeta") == 2 and out.count("31,36 GiB") >= 2
    assert out.count("Cabe según esta estimación") == 2


def test_the_rehearsal_reads_the_card_the_driver_and_the_profile_it_recommends_trying(card, smi, tmp_path):
    from labs.rehearsal import budget, cli

    cuda, name, total = cli._gpu()
    assert cuda and name == fake_card.CARD_NAME and abs(total - fake_card.CARD_TOTAL / 2**30) < 1e-9
    facts = cli.device_facts(get_profile("rtx5090"), name, total)
    assert facts["driver"] == "590.44.01" and facts["packages"]["unsloth"] == "2026.10.9"
    assert budget.default_profile(None, {}, cuda_visible=cuda, runs_root=tmp_path).name == "rtx5090-base"
    assert budget.device_tag(name) == "rtx-5090"


def test_the_resource_monitor_reads_the_cards_memory_through_torch(card):
    from labs.core.resources import ResourceMonitor

    with ResourceMonitor(gpu="torch", interval_s=0.01) as monitor:
        card.cuda.allocate(3 * 2**30)
        monitor.sample()
    gpu = monitor.summary()["gpu"]
    assert gpu["torch_max_allocated_gib"] == pytest.approx(3.0, abs=1e-3)
    assert gpu["device_used_by_run_gib"] == pytest.approx(3.0, abs=1e-2)
    assert gpu["total_gib"] == pytest.approx(fake_card.CARD_TOTAL / 2**30, abs=1e-3)


def test_l72s_demo_on_the_card_stops_only_for_the_models_download(card, smi, tmp_path, monkeypatch):
    """The L7.2 notebook's demo on rtx5090: its start (pre-flight, Unsloth path checks, run folder, then the doctor)
    passes every check of the card, the driver and the GPU stack, and stops at the one thing this machine lacks:
    the model's weights in the hub's cache (no network here). Past it, the load is
    test_l72_loads_its_model_through_unsloth_on_a_faked_5090's."""
    from labs.doctor.runnable import EnvironmentNotReady
    from labs.l72 import demo

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    with pytest.raises(EnvironmentNotReady) as refused:
        demo.Demo("rtx5090", show=lambda line: None)
    reasons = [line for line in str(refused.value).splitlines() if line.startswith("- ")]
    assert len(reasons) == 1 and reasons[0].startswith("- Hub de Hugging Face: No llego al hub (HF_HUB_OFFLINE=1) y "
                                                       "hay que descargar Qwen/Qwen3-4B-Instruct-2507"), reasons


def test_l72_evaluates_base_and_trained_through_unsloths_engine_and_the_saved_adapters_request(card, tmp_path):
    """What L7.2 (lab, demo, rehearsal) does with Unsloth's model after the GRPO steps, which need the card itself:
    the base evaluation without a LoRA request, the adapter saved into the run, ``load_lora`` on it, the trained
    evaluation only with that request (refused without it), the summary, and the rehearsal's probe of the
    adapter's effect. The tokenizer is a real one (the bundled model's); generation is the stand-in's engine."""
    from transformers import AutoTokenizer

    from labs.core.runfolder import RunFolder
    from labs.l72.lora import LoraNotLoaded, evaluate_unsloth, require_lora_request, save_adapter
    from labs.rehearsal import unsloth_part
    from labs.rehearsal.measure import adapter_effect
    from labs.training import data as course_data
    from labs.training import evaluation, models

    tokenizer = AutoTokenizer.from_pretrained(models.convert_bundled_model())
    model, _ = card.unsloth.FastLanguageModel.from_pretrained(model_name="unsloth/Qwen3-4B-Instruct-2507",
                                                              fast_inference=True)
    rows = course_data.course_splits(get_profile("ci"), tokenizer)["eval"]
    run = RunFolder(tmp_path / "run")
    with pytest.raises(ValueError, match="sin adaptador"):
        evaluate_unsloth(rows, model, tokenizer, run, "base", 16, lora_request=object())
    base = evaluate_unsloth(rows, model, tokenizer, run, "base", 16)
    with pytest.raises(LoraNotLoaded, match="sin lora_request"):
        evaluate_unsloth(rows, model, tokenizer, run, "trained", 16)
    adapter_dir = save_adapter(model, tokenizer, run)
    assert (adapter_dir / "adapter_config.json").exists() and (adapter_dir / "tokenizer_config.json").exists()
    request = require_lora_request(model.load_lora(str(adapter_dir)), adapter_dir)
    with pytest.raises(LoraNotLoaded, match="evaluarías otro adaptador"):
        require_lora_request(request, tmp_path)
    trained = evaluate_unsloth(rows, model, tokenizer, run, "trained", 16, lora_request=request,
                               adapter_dir=adapter_dir)
    generated = card.calls.named("fast_generate")
    assert [g["lora_request"] for g in generated] == [None, request]  # base without, trained with the adapter
    assert len(generated[0]["prompts"]) == len(rows) == len(base) == len(trained)
    summary = evaluation.summarize(run, base, trained, "Qwen3-4B-Instruct-2507 (4 bits)")
    assert summary["n"] == len(rows)
    effect = adapter_effect(unsloth_part._probe(model, tokenizer, rows[:2]),
                            unsloth_part._probe(model, tokenizer, rows[:2], request))
    assert effect == {"prompts": 2, "texts_differ": 2, "max_cumulative_logprob_diff": 1.0, "changes_output": True}
    assert card.calls.named("fast_generate")[-1]["sampling_params"].logprobs == unsloth_part.PROBE_LOGPROBS


def test_l72s_demo_on_the_card_refuses_unsloth_imported_without_standby_or_a_wrong_class(card, smi, tmp_path,
                                                                                        monkeypatch):
    """The demo's import cell on rtx5090 (the hub cache holding the models: fake_card.tiny_hub): the guard refuses
    a student's ``importar_unsloth`` that imports unsloth without Standby, then, in that same process, any import
    at all; and with Standby set, a function that returns something other than unsloth's FastLanguageModel."""
    from labs.l72 import demo
    from labs.l72.standby import ImportOrderError

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_CACHE", str(fake_card.tiny_hub(tmp_path / "hub")))
    monkeypatch.delenv("UNSLOTH_VLLM_STANDBY", raising=False)
    mi_demo = demo.Demo("rtx5090", show=lambda line: None)
    for key in [k for k in sys.modules if k.split(".")[0] in ("trl", "transformers", "peft")]:
        monkeypatch.delitem(sys.modules, key)  # the demo's fresh kernel (see the load test above)

    def sin_standby():
        from unsloth import FastLanguageModel

        return FastLanguageModel

    with pytest.raises(ImportOrderError, match="sin UNSLOTH_VLLM_STANDBY=1"):
        mi_demo.fast_language_model(sin_standby)
    with pytest.raises(ImportOrderError):  # unsloth is now imported without Standby: only a restart repairs it
        mi_demo.fast_language_model(sin_standby)
    monkeypatch.setenv("UNSLOTH_VLLM_STANDBY", "1")
    with pytest.raises(ImportOrderError, match="debe devolver FastLanguageModel"):
        mi_demo.fast_language_model(lambda: object())


def _fresh_unsloth_process(monkeypatch):
    """Unsloth imported under Standby as in the lab's fresh process. Other tests of this worker imported trl,
    transformers or peft, and the guard would rightly refuse this process: they are set aside for the test
    (nothing that follows imports them)."""
    from labs.l72.standby import enable_standby_and_import_unsloth

    monkeypatch.delenv("UNSLOTH_VLLM_STANDBY", raising=False)
    monkeypatch.delenv("UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE", raising=False)
    for key in [k for k in sys.modules if k.split(".")[0] in ("trl", "transformers", "peft")]:
        monkeypatch.delitem(sys.modules, key)
    enable_standby_and_import_unsloth()


def test_l72_stops_when_unsloth_loads_the_model_without_its_vllm_engine(card, monkeypatch):
    """Unsloth turns ``fast_inference`` off without raising when vLLM does not start (a broken vLLM, an old card):
    the model comes back without ``vllm_engine``. L7.2 stops right there, in Spanish, before the LoRA."""
    from labs.l72 import gpu
    from labs.l72.standby import UnslothLoadFailed

    _fresh_unsloth_process(monkeypatch)
    loader = card.unsloth.FastLanguageModel
    load = loader.from_pretrained

    def without_engine(*args, **kwargs):
        model, tokenizer = load(*args, **kwargs)
        del model.vllm_engine  # what Unsloth returns after disabling fast_inference
        return model, tokenizer

    monkeypatch.setattr(loader, "from_pretrained", without_engine)
    with pytest.raises(UnslothLoadFailed, match="sin vLLM") as failed:
        gpu.load_unsloth_model(get_profile("rtx5090").replace(backend="unsloth"), show=lambda line: None)
    assert "python -m labs doctor" in str(failed.value)
    assert card.calls.named("get_peft_model") == []


def test_l72s_demo_stops_when_the_students_load_leaves_out_fast_inference(card, smi, tmp_path, monkeypatch):
    """The demo's load cell on rtx5090 with a ``cargar_modelo`` that leaves out ``fast_inference=True``: Unsloth
    loads the model without vLLM (no ``vllm_engine``) and the demo stops there, in Spanish, naming the argument."""
    from labs.l72 import demo
    from labs.l72.standby import UnslothLoadFailed

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("HF_HUB_CACHE", str(fake_card.tiny_hub(tmp_path / "hub")))
    mi_demo = demo.Demo("rtx5090", show=lambda line: None)
    _fresh_unsloth_process(monkeypatch)

    def cargar_modelo(FastLanguageModel, perfil):
        return FastLanguageModel.from_pretrained(model_name=perfil.unsloth_model, load_in_4bit=perfil.load_in_4bit,
                                                 max_seq_length=perfil.max_prompt_tokens + perfil.max_completion_length)

    try:
        with pytest.raises(UnslothLoadFailed, match=r"sin vLLM: ¿fast_inference=True\?"):
            mi_demo.load(cargar_modelo, card.unsloth.FastLanguageModel)
    finally:
        mi_demo.monitor.stop()
    assert len(card.calls.named("from_pretrained")) == 1 and card.calls.named("get_peft_model") == []


def test_the_format_pass_hands_the_cards_cached_memory_back_before_grpo_loads(card):
    """rtx5090-base's format pass runs before GRPO loads its model and vLLM measures the free memory: the blocks
    torch's allocator kept for the pass go back to the card first."""
    from labs.training import format_pass

    format_pass._release_memory()
    assert card.cuda.emptied == 1


def _finish(run) -> None:
    from labs.core.runfolder import STATE_FINISHED

    run.write_status(STATE_FINISHED, 1, 1)


def test_python_m_labs_l72_on_a_finished_run_says_so_and_loads_nothing(card, tmp_path, monkeypatch, capsys):
    """A second ``python -m labs l72`` after the run finished: the run is only read (no doctor, no model)."""
    from labs.l71 import lab as l71
    from labs.l72 import lab, recipe_rule
    from labs.l72.steps import LAB

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    planned = recipe_rule.plan(get_profile("rtx5090"), {}, saved=True)[0]
    run = l71.new_run(planned, None, False, LAB)
    _finish(run)
    assert lab.run_lab("rtx5090") == run.root  # the profile by its name, as the command line passes it
    assert f"{run.root} ya terminó" in capsys.readouterr().out
    assert card.calls.named("from_pretrained") == []


def test_l72s_demo_with_entrenar_aqui_trains_the_whole_run_unless_it_already_finished(card, smi, tmp_path,
                                                                                        monkeypatch):
    """``ENTRENAR_AQUI = True`` in the L7.2 notebook on the card: the demo becomes the whole run, with its expected
    duration; once that run has finished, the demo runs alone. Both then stop at the hub (no download here)."""
    from labs.doctor.runnable import EnvironmentNotReady
    from labs.l71 import lab as l71
    from labs.l72 import demo
    from labs.l72.steps import LAB

    runs = tmp_path / "runs"
    monkeypatch.setenv("COURSE_RUNS", str(runs))
    lines: list[str] = []
    with pytest.raises(EnvironmentNotReady):
        demo.Demo("rtx5090", entrenar_aqui=True, show=lines.append)
    full = [line for line in lines if line.startswith("ENTRENAR_AQUI = True: entreno aquí el run completo")]
    assert len(full) == 1 and "(unas " in full[0], lines
    run = l71.new_run(demo.l72_profile(get_profile("rtx5090"))[0], None, False, LAB)  # the whole run's folder
    assert str(run.root) in full[0]
    _finish(run)
    lines.clear()
    with pytest.raises(EnvironmentNotReady):
        demo.Demo("rtx5090", entrenar_aqui=True, show=lines.append)
    assert f"ENTRENAR_AQUI = True, pero {run.root} ya terminó: hago solo la demo." in lines, lines


def test_the_terminal_command_of_l72_names_the_profile_only_when_the_lab_would_not_pick_it(monkeypatch):
    from labs.l72 import demo

    monkeypatch.setenv("COURSE_PROFILE", "rtx5090")
    assert demo.terminal_command(get_profile("rtx5090")) == "python -m labs l72"
    assert "--profile rtx5090-base" in demo.terminal_command(get_profile("rtx5090-base"))


def test_the_trained_evaluation_accepts_unsloths_merged_and_in_tensor_lora_requests(tmp_path):
    """Besides vLLM's ``LoRARequest`` for a saved folder, Unsloth's ``load_lora`` can answer with an adapter folded
    into the engine (``_MergedLoRARequest``, marked ``_unsloth_merged``) or carried as tensors (its ``LoRARequest``
    with ``lora_tensors``, no folder): both name the trained adapter. The shapes are read from the pinned
    unsloth_zoo's source (importing it patches the process), then the guard is given objects of those shapes."""
    import importlib.machinery

    from labs.l72.lora import LoraNotLoaded, require_lora_request

    spec = importlib.machinery.PathFinder.find_spec("unsloth_zoo")
    zoo = Path(next(iter(spec.submodule_search_locations)))  # pyright: ignore[reportOptionalMemberAccess]
    assert "    _unsloth_merged = True" in (zoo / "vllm_utils.py").read_text(encoding="utf-8")
    assert "    lora_tensors: Optional[Dict[str, torch.Tensor]] = None" in \
        (zoo / "vllm_lora_request.py").read_text(encoding="utf-8")

    class MergedLoRARequest:  # unsloth_zoo.vllm_utils._MergedLoRARequest's marker
        _unsloth_merged = True

    merged = MergedLoRARequest()
    assert require_lora_request(merged, tmp_path) is merged
    in_tensors = SimpleNamespace(lora_name="trained", lora_int_id=1, lora_path="", lora_tensors={"w": [0.0]})
    assert require_lora_request(in_tensors, tmp_path) is in_tensors
    with pytest.raises(LoraNotLoaded, match="lora_int_id"):
        require_lora_request(SimpleNamespace(lora_name="trained", lora_int_id=0, lora_tensors={"w": [0.0]}))


def test_l72s_demo_is_remade_from_scratch_each_time_it_runs(card, smi, tmp_path, monkeypatch):
    """The notebook's demo folder (``l72-demo-<profile>``) from an earlier try is removed before the new demo starts:
    its few steps are redone every time, while the long runs are never removed."""
    from labs.doctor.runnable import EnvironmentNotReady
    from labs.l72 import demo

    runs = tmp_path / "runs"
    monkeypatch.setenv("COURSE_RUNS", str(runs))
    old = runs / "l72-demo-rtx5090" / "metrics.jsonl"
    old.parent.mkdir(parents=True)
    old.write_text('{"step": 1}\n', encoding="utf-8")
    kept = runs / "l72-rtx5090" / "metrics.jsonl"
    kept.parent.mkdir(parents=True)
    kept.write_text('{"step": 1}\n', encoding="utf-8")
    with pytest.raises(EnvironmentNotReady):  # then it stops at the hub, as the demo test above
        demo.Demo("rtx5090", show=lambda line: None)
    assert not old.exists() and kept.exists()
