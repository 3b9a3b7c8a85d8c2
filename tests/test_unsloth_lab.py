"""Lab L7.2 (labs.l72): the guards and computations that decide what the lab measures.

Unsloth's GPU path cannot run on this machine (no GPU; the GPU stack's pins also conflict with the CPU
stack), so it is the one place tested by structure: a stand-in ``unsloth`` package records *when* it
was imported, and a stand-in model records what ``fast_generate`` received. Everything else is real:
vLLM's own ``LoRARequest`` and ``SamplingParams``, a PEFT adapter saved by PEFT, the bundled tokenizer,
the pinned unsloth-zoo release's own memory-fraction code, psutil. A real CPU-fallback run (TRL + PEFT +
vLLM colocate) is exercised by the notebook under nbval.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from labs.training import pinned_api as pa
from labs.core import runfolder as rf
from labs import l72 as u
from labs import vram
from labs.core.profiles import get_profile
import rundirs

REPO = Path(__file__).resolve().parent.parent
CI = get_profile("ci")
RTX = get_profile("rtx5090")


def _python(code: str, *, env_extra: dict | None = None, pythonpath: list[str] | None = None):
    env = {k: v for k, v in os.environ.items() if k not in (u.STANDBY_ENV, u.UTIL_OVERRIDE_ENV)}
    env["PYTHONPATH"] = os.pathsep.join([*(pythonpath or []), str(REPO)])
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=600)


# --------------------------------------------------------------------------------------------------
# The LoRA-loaded guard
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def adapter_dir(tmp_path_factory) -> Path:
    """A real LoRA adapter folder, written by PEFT from a tiny Llama (same targets as the profiles)."""
    from peft import get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from labs.training.recipe import lora_config

    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)
    model = get_peft_model(LlamaForCausalLM(config), lora_config(CI))
    folder = tmp_path_factory.mktemp("adapter")
    model.save_pretrained(str(folder))
    assert (folder / "adapter_config.json").exists()
    return folder


@pytest.fixture(scope="module")
def vllm_lora_request():
    from vllm.lora.request import LoRARequest

    return LoRARequest


def test_guard_refuses_no_lora_request():
    with pytest.raises(u.LoraNotLoaded, match="modelo base"):
        u.require_lora_request(None)


def test_guard_accepts_vllms_request_for_the_saved_adapter(adapter_dir, vllm_lora_request):
    request = vllm_lora_request("trained", 1, str(adapter_dir))
    assert u.require_lora_request(request, adapter_dir) is request


def test_guard_refuses_a_request_for_a_folder_without_an_adapter(tmp_path, vllm_lora_request):
    with pytest.raises(u.LoraNotLoaded, match="adapter_config.json"):
        u.require_lora_request(vllm_lora_request("trained", 1, str(tmp_path)))


def test_guard_refuses_another_runs_adapter(adapter_dir, tmp_path, vllm_lora_request):
    request = vllm_lora_request("trained", 1, str(adapter_dir))
    with pytest.raises(u.LoraNotLoaded, match="otro adaptador"):
        u.require_lora_request(request, adapter_dir=tmp_path)


def test_guard_refuses_something_that_is_not_a_lora_request(adapter_dir):
    with pytest.raises(u.LoraNotLoaded, match="lora_int_id"):
        u.require_lora_request(str(adapter_dir))


class StandInModel:
    """Unsloth's model as evaluation sees it: ``fast_generate`` = vLLM's ``generate`` (records its calls)."""

    def __init__(self, answer: str):
        self.answer, self.calls = answer, []

    def fast_generate(self, prompts, sampling_params=None, use_tqdm=True, lora_request=None):
        self.calls.append({"prompts": list(prompts), "params": sampling_params, "lora_request": lora_request})
        text = f"<think>cuento</think>\n<answer>{self.answer}</answer>"
        return [SimpleNamespace(outputs=[SimpleNamespace(text=text, token_ids=[1, 2, 3])]) for _ in prompts]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from labs.training import models

    return AutoTokenizer.from_pretrained(models.model_path(CI))


@pytest.fixture
def eval_rows():
    from labs.training import data

    return data.course_splits(CI)["eval"][:3]


def test_trained_evaluation_without_lora_request_never_generates(tmp_path, tokenizer, eval_rows):
    model, run = StandInModel("1"), rf.RunFolder(tmp_path / "run")
    with pytest.raises(u.LoraNotLoaded):
        u.evaluate_unsloth(eval_rows, model, tokenizer, run, "trained", 16)
    assert model.calls == [] and not run.path(rf.EVAL_TRAINED).exists()


def test_base_evaluation_refuses_a_lora_request(tmp_path, tokenizer, eval_rows, adapter_dir, vllm_lora_request):
    request = vllm_lora_request("trained", 1, str(adapter_dir))
    with pytest.raises(ValueError, match="sin adaptador"):
        u.evaluate_unsloth(eval_rows, StandInModel("1"), tokenizer, rf.RunFolder(tmp_path), "base", 16, request)


def test_trained_evaluation_sends_the_lora_request_with_every_generation(tmp_path, tokenizer, eval_rows, adapter_dir,
                                                                        vllm_lora_request):
    request = vllm_lora_request("trained", 7, str(adapter_dir))
    gold = eval_rows[0]["answer"]
    model, run = StandInModel(gold), rf.RunFolder(tmp_path / "run")
    records = u.evaluate_unsloth(eval_rows, model, tokenizer, run, "trained", 16, lora_request=request,
                                 adapter_dir=adapter_dir)
    assert model.calls and all(call["lora_request"] is request for call in model.calls)
    params = model.calls[0]["params"]
    assert params.temperature == 0.0 and params.max_tokens == 16  # the same greedy decoding as L7.1
    prompts = [p for call in model.calls for p in call["prompts"]]
    assert len(prompts) == len(eval_rows) and eval_rows[0]["question"] in prompts[0]
    assert [r["id"] for r in rf.read_jsonl(run.path(rf.EVAL_TRAINED))] == [r["id"] for r in eval_rows]
    assert records[0]["correct"] and [r["correct"] for r in records[1:]] == [r["answer"] == gold for r in eval_rows[1:]]


# --------------------------------------------------------------------------------------------------
# The import-order guard (in fresh processes: an import cannot be undone)
# --------------------------------------------------------------------------------------------------


@pytest.fixture
def stand_in_unsloth(tmp_path) -> Path:
    """An ``unsloth`` package that records, at import time, the environment and what was imported."""
    pkg = tmp_path / "site" / "unsloth"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        import os, sys
        STANDBY_AT_IMPORT = os.environ.get("UNSLOTH_VLLM_STANDBY")
        IMPORTED_BEFORE = [m for m in ("trl", "transformers", "peft") if m in sys.modules]
    """))
    return pkg.parent


def test_guard_sets_standby_before_importing_unsloth(stand_in_unsloth):
    result = _python("""
        import json
        from labs.l72 import enable_standby_and_import_unsloth
        unsloth = enable_standby_and_import_unsloth()
        print(json.dumps([unsloth.STANDBY_AT_IMPORT, unsloth.IMPORTED_BEFORE, unsloth.__file__]))
    """, pythonpath=[str(stand_in_unsloth)])
    assert result.returncode == 0, result.stderr
    standby, before, where = json.loads(result.stdout.strip().splitlines()[-1])
    assert where.startswith(str(stand_in_unsloth))
    assert standby == "1" and before == []


@pytest.mark.parametrize("first", ["transformers", "trl"])
def test_guard_refuses_when_a_patched_module_came_first(stand_in_unsloth, first):
    result = _python(f"""
        import os, sys
        import {first}
        from labs.l72 import enable_standby_and_import_unsloth
        try:
            enable_standby_and_import_unsloth()
        except Exception as exc:
            print(type(exc).__name__, "unsloth" in sys.modules, os.environ.get("UNSLOTH_VLLM_STANDBY"))
            print(exc)
            raise SystemExit(3)
    """, pythonpath=[str(stand_in_unsloth)])
    assert result.returncode == 3, result.stderr[-2000:]
    head, message = result.stdout.split("\n", 1)
    assert head.split() == ["ImportOrderError", "False", "None"]  # nothing imported, nothing set
    assert first in message and "Reinicia el kernel" in message


def test_guard_refuses_unsloth_already_imported_without_standby():
    with pytest.raises(u.ImportOrderError, match="sin UNSLOTH_VLLM_STANDBY=1"):
        u.enable_standby_and_import_unsloth(modules={"unsloth": object()}, environ={})
    module = object()
    assert u.enable_standby_and_import_unsloth(modules={"unsloth": module}, environ={u.STANDBY_ENV: "1"}) is module


def test_the_lab_modules_import_nothing_unsloth_patches():
    # run_lab imports these before the guard runs; if one pulled in transformers, the GPU path would fail.
    result = _python("""
        import sys
        import labs.l72, labs.l71, labs.training.recipe, labs.training.evaluation, labs.vram, labs.training.data, labs.doctor
        import rewards
        print(sorted(m for m in ("trl", "transformers", "peft", "unsloth") if m in sys.modules))
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"



def test_l72s_start_on_rtx5090_leaves_the_import_order_open():
    """Issue 33, item 2: everything L7.2 does before ``import unsloth`` (the lab, the demo and the rehearsal
    call ``start``), the reward functions' probe included, imports none of trl, transformers and peft.

    In a fresh process. Without a CUDA GPU the machine's checks, the last steps of ``start``, stop it after
    the pre-flight and the run folder; with one (the GPU stack) ``start`` returns and unsloth would come next.
    """
    result = _python("""
        import json, os, sys
        from labs.doctor import EnvironmentNotReady
        from labs.l72 import ORDER_SENSITIVE_MODULES, BackendUnavailable, start
        from labs.l72.standby import import_order_problem
        try:
            reached = start("rtx5090").backend.name
        except (EnvironmentNotReady, BackendUnavailable) as exc:
            reached = type(exc).__name__
        print(json.dumps([reached, import_order_problem(sys.modules, os.environ),
                          [m for m in ORDER_SENSITIVE_MODULES if m in sys.modules]]))
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    reached, problem, imported = json.loads(result.stdout.strip().splitlines()[-1])
    assert reached in ("EnvironmentNotReady", "BackendUnavailable", u.BACKEND_UNSLOTH)
    assert problem is None and imported == []

# --------------------------------------------------------------------------------------------------
# The memory fraction in force
# --------------------------------------------------------------------------------------------------


def _pinned_zoo_rule():
    """The fraction-choosing statements of the pinned unsloth-zoo's ``load_vllm``, compiled."""
    version = pa.pinned_version("unsloth-zoo", "gpu")
    try:
        source = pa.wheel_source("unsloth-zoo", version, "unsloth_zoo/vllm_utils.py")
    except pa.WheelUnavailable as exc:
        pytest.skip(f"unsloth-zoo {version} wheel not cached and not downloadable: {exc}")
    load_vllm = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "load_vllm")
    body = load_vllm.body
    first = next(i for i, s in enumerate(body) if ast.unparse(s).startswith("free_memory, total_memory = get_mem_info()"))
    last = next(i for i, s in enumerate(body) if isinstance(s, ast.If)
                and ast.unparse(s.test) == "unsloth_vllm_standby and (not standby_util_override)")
    return compile(ast.Module(body=body[first:last + 1], type_ignores=[]), f"unsloth_zoo {version}", "exec")


def test_fraction_rule_matches_the_pinned_unsloth_zoo():
    from packaging.version import Version

    code = _pinned_zoo_rule()
    checked = 0
    for total_gib in (8, 12, 15, 16, 22, 24, 31.4, 32, 40, 48, 80, 96, 141):
        for vllm_version in ("0.10.2", "0.11.0", "0.31.0"):
            for requested in (0.3, 0.6, 0.95):
                for standby in (False, True):
                    for override in (False, True):
                        ns = {"get_mem_info": lambda: (total_gib * 2**30 * 0.97, total_gib * 2**30),
                              "Version": Version, "vllm_version": vllm_version, "UNSLOTH_ENABLE_LOGGING": False,
                              "logger": None, "print": lambda *a, **k: None, "gpu_memory_utilization": requested,
                              "unsloth_vllm_standby": standby, "standby_util_override": override}
                        exec(code, ns)  # noqa: S102 - the pinned release's own code, nothing else
                        ours = u.unsloth_memory_fraction(requested, total_gib, vllm_version, standby=standby,
                                                         override=override)
                        assert ours.in_force == pytest.approx(ns["gpu_memory_utilization"], abs=1e-12), (
                            total_gib, vllm_version, requested, standby, override)
                        checked += 1
    assert checked == 13 * 3 * 3 * 2 * 2


def test_fraction_on_a_32_gb_card_is_what_the_vram_plan_assumes():
    vllm_gpu = pa.pinned_version("vllm", "gpu")
    fraction = u.unsloth_memory_fraction(RTX.vllm_gpu_memory_utilization, vram.DEFAULT_CARD_GIB, vllm_gpu)
    assert fraction.rule == "standby" and fraction.in_force == pytest.approx(vram.STANDBY_UTILIZATION)
    assert fraction.in_force != RTX.vllm_gpu_memory_utilization  # the requested value is not in force
    text = fraction.describe_es()
    assert u._fmt(fraction.in_force) in text and u._fmt(RTX.vllm_gpu_memory_utilization) in text
    assert u.UTIL_OVERRIDE_ENV in text


def test_fraction_follows_the_environment():
    card, vllm_gpu = vram.DEFAULT_CARD_GIB, pa.pinned_version("vllm", "gpu")
    target = u.standby_target_fraction(card, vllm_gpu)
    on = u.expected_gpu_fraction(RTX, card, vllm_gpu, environ={u.STANDBY_ENV: "1"})
    override = u.expected_gpu_fraction(RTX, card, vllm_gpu, environ={u.STANDBY_ENV: "1", u.UTIL_OVERRIDE_ENV: "1"})
    off = u.expected_gpu_fraction(RTX, card, vllm_gpu, environ={})
    assert (on.in_force, on.rule) == (target, "standby")
    assert (override.in_force, override.rule) == (RTX.vllm_gpu_memory_utilization, "standby-override")
    assert (off.in_force, off.rule) == (RTX.vllm_gpu_memory_utilization, "no-standby")


def test_fraction_is_read_from_the_engine_config():
    from vllm.config import CacheConfig

    llm = SimpleNamespace(llm_engine=SimpleNamespace(vllm_config=SimpleNamespace(
        cache_config=CacheConfig(gpu_memory_utilization=0.4125))))
    assert u.engine_memory_fraction(llm) == 0.4125
    assert u.engine_memory_fraction(SimpleNamespace()) is None
    colocate = u.MemoryFraction(0.3, 0.3, "trl-colocate", device="cpu").with_engine_value(0.4125)
    assert colocate.in_force == 0.4125 and "RAM del host" in colocate.describe_es()
    standby = u.unsloth_memory_fraction(0.3, 32.0, "0.31.0").with_engine_value(0.81)
    assert standby.in_force == u.standby_target_fraction(32.0, "0.31.0") and standby.engine_value == 0.81


def test_4bit_with_new_vllm_needs_the_bnb_plugin():
    assert u.check_4bit_vllm_plugin(RTX, "0.31.0", plugin_installed=False)
    assert u.check_4bit_vllm_plugin(RTX, "0.31.0", plugin_installed=True) == []
    assert u.check_4bit_vllm_plugin(RTX, "0.27.1", plugin_installed=False) == []
    assert u.check_4bit_vllm_plugin(RTX.replace(load_in_4bit=False), "0.31.0", plugin_installed=False) == []


# --------------------------------------------------------------------------------------------------
# Back-end choice, the restart rule, the command line
# --------------------------------------------------------------------------------------------------


def test_cpu_profiles_fall_back_and_say_why():
    for name in ("cpu", "ci"):
        backend = u.choose_backend(get_profile(name), cuda=True, installed=True)
        assert backend.name == u.BACKEND_FALLBACK and "NotImplementedError" in backend.reason_es


def test_a_gpu_profile_never_falls_back_silently():
    assert u.choose_backend(RTX, cuda=True, installed=True).is_unsloth
    for cuda, installed in ((False, True), (True, False)):
        with pytest.raises(u.BackendUnavailable):
            u.choose_backend(RTX, cuda=cuda, installed=installed)


def _modules_with_allocator(instance):
    """``sys.modules`` as the guard reads it, with vLLM's cumem module holding ``instance`` as its singleton."""
    allocator = SimpleNamespace(CuMemAllocator=type("CuMemAllocator", (), {"instance": instance}))
    return {**sys.modules, u.standby.CUMEM_MODULE: allocator}


def test_a_failed_standby_load_asks_for_a_restart_and_blocks_a_second_try(monkeypatch):
    monkeypatch.setattr(u.standby, "_FAILED_STANDBY_LOAD", None)  # the state lives beside the guard
    started = _modules_with_allocator(object())
    with pytest.raises(u.UnslothLoadFailed, match="Reinicia el kernel") as err:
        with u.standby_load_guard(RTX, started):
            raise MemoryError("CUDA out of memory")
    assert "max_seq_length" in str(err.value)
    ran = []
    with pytest.raises(u.UnslothLoadFailed, match="ya falló"):
        with u.standby_load_guard(RTX, started):
            ran.append(True)
    assert ran == []


@pytest.mark.parametrize("modules", [{}, "allocator module, no instance"])
def test_a_load_refused_before_vllm_started_needs_no_restart(monkeypatch, modules):
    """Unsloth 2026.10.9 refuses ``load_in_4bit=True, load_in_16bit=True`` before vLLM starts: the call can be fixed
    and run again in the same kernel (the guard asked for a restart anyway)."""
    monkeypatch.setattr(u.standby, "_FAILED_STANDBY_LOAD", None)
    if modules:
        modules = _modules_with_allocator(None)
    refusal = "Unsloth: Can only load in 4bit or 8bit or 16bit, not a combination!"
    with pytest.raises(u.UnslothLoadFailed, match="no hace falta reiniciar") as err:
        with u.standby_load_guard(RTX, modules):
            raise RuntimeError(refusal)
    assert "Reinicia" not in str(err.value) and "Can only load" in str(err.value)
    ran = []
    with u.standby_load_guard(RTX, modules):  # a second, corrected call runs
        ran.append(True)
    assert ran == [True]


def test_command_line_errors_are_spanish_and_exit_2(capsys):
    assert u.main(["--profile", "no-existe"]) == 2
    assert "No existe el perfil" in capsys.readouterr().err
    assert u.main(["--profile", "ci", "--set", "max_prompt_length=512"]) == 2
    assert "max_prompt_tokens" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# Memory records and the side-by-side comparison (synthetic run folders)
# --------------------------------------------------------------------------------------------------


def test_resource_monitor_sees_a_real_allocation():
    monitor = u.ResourceMonitor(interval_s=0.02).start()
    before = monitor.rss_peak
    import mmap
    import time

    # Fresh anonymous pages, written: a heap allocation could reuse memory that is already resident.
    block = mmap.mmap(-1, 256 * 2**20)
    block.write(b"x" * len(block))
    time.sleep(0.3)
    summary = monitor.stop()
    block.close()
    assert summary["sampled_rss_peak_gib"] - before >= 0.2 and summary["samples"] >= 3
    assert summary["gpu"] is None


def _with_step_times(rows, seconds):
    for row, s in zip(rows, seconds):
        row["step_time"] = s
    return rows


def test_comparison_reads_everything_from_the_run_folders(tmp_path, monkeypatch):
    # The L7.1 run is matched by the student's saved recipe (find_lab_run): an area of its own, not the session's,
    # where a notebook run earlier on this worker may have saved one.
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "area"))
    l71_times, l72_times = [9, 7, 8, 7, 6, 8], [5, 4, 4, 6, 5, 4]
    n = len(l71_times)
    assert n > CI.max_steps  # more logged rows than max_steps: the records must not care
    l71_rows = _with_step_times(rundirs.history(n, seed=1), l71_times)
    l72_rows = _with_step_times(rundirs.history(n, seed=2), l72_times)
    common = dict(profile="ci", max_steps=CI.max_steps)
    l71 = rundirs.make_run(tmp_path, "l71-ci", metrics=l71_rows, lab="L7.1",
                           verdicts=rundirs.paired_verdicts(2, 4, 1, 1), **common)
    l72 = rundirs.make_run(tmp_path, "l72-ci", metrics=l72_rows, lab="L7.2",
                           verdicts=rundirs.paired_verdicts(2, 3, 3, 0), **common)
    rundirs.make_run(tmp_path, "l72-ci-failed", metrics=l72_rows, lab="L7.2", state=rf.STATE_FAILED, **common)
    u.write_resources(l72, {"peak_rss_gib": 3.25, "measured_by": "test", "gpu": None})
    assert u.find_lab_run("L7.2", "ci", tmp_path) == l72
    assert u.find_lab_run("L7.1", "ci", tmp_path) == l71
    assert u.find_lab_run("L7.1", "rtx5090", tmp_path) is None
    # a newer L7.1 run with another recipe (--set max_steps=...) is not a reference for this profile
    rundirs.make_run(tmp_path, "l71-ci-short", metrics=l71_rows, lab="L7.1", profile="ci", max_steps=1)
    assert u.find_lab_run("L7.1", "ci", tmp_path) == l71

    a, b = u.lab_record(l71), u.lab_record(l72)
    assert (a["seconds_per_step"], b["seconds_per_step"]) == (7.5, 4.5)
    assert a["memory_gib"] is None and b["memory_gib"] == 3.25 and b["memory_kind"].startswith("RAM")
    tail = [r["reward"] for r in l72_rows][-max(1, n // 4):]
    assert b["reward_final"] == pytest.approx(sum(tail) / len(tail))
    assert (b["base_accuracy"], b["trained_accuracy"]) == (2 / 8, 5 / 8)
    table = u.comparison_table([a, b])
    assert list(table.index) == ["L7.1", "L7.2"]
    assert table.loc["L7.1", "Qué memoria"] == "sin registrar"
    text = " ".join(u.describe_comparison_es([a, b]))
    assert "sin registrar para L7.1" in text and "7.5" in text and "4.5" in text
    png = tmp_path / "cmp.png"
    u.plot_comparison([a, b], png)
    assert png.stat().st_size > 10_000


def test_comparison_says_where_the_two_runs_settings_differ(tmp_path):
    l71 = rundirs.make_run(tmp_path, "l71-ci", lab="L7.1", profile="ci", max_steps=CI.max_steps)
    l72 = rundirs.make_run(tmp_path, "l72-ci", lab="L7.2", profile="ci", max_steps=CI.max_steps)
    record = rf.read_json(rf.RunFolder(l72).path(rf.RUN_JSON))
    record["trainer_args"] = {"beta": 0.04, "max_steps": CI.max_steps, "num_generations": 4, "optim": "adamw_8bit",
                              "output_dir": "elsewhere"}
    rf.write_json(rf.RunFolder(l72).path(rf.RUN_JSON), record)
    a, b = u.lab_record(l71), u.lab_record(l72)
    assert (a["settings_source"], b["settings_source"]) == ("grpo_config", "trainer_args")
    diffs = {k: (x, y) for k, x, y in u.settings_differences(a, b)}
    assert set(diffs) == {"num_generations", "optim"}  # output_dir never counts
    text = " ".join(u.describe_settings_es([a, b]))
    assert "num_generations: 8 frente a 4" in text
    assert "Sin registrar en L7.1" in text and "optim (L7.2 usó 'adamw_8bit')" in text
    assert text in " ".join(u.describe_comparison_es([a, b]))
    same = " ".join(u.describe_settings_es([a, a]))
    assert same.startswith("Ajustes de entrenamiento: los mismos")


# --------------------------------------------------------------------------------------------------
# L7.2's trainer: Unsloth's swapped defaults pinned, TRL's "ref" adapter dropped, trainer.args recorded
# --------------------------------------------------------------------------------------------------


def test_l72_config_is_l71s_recipe_plus_trls_values_where_unsloth_swaps(tmp_path):
    from labs.training import recipe

    for name in ("ci", "rtx5090"):
        profile = get_profile(name)
        ours, l71 = u.grpo_config_kwargs(profile, "out"), recipe.grpo_config_kwargs(profile, "out")
        assert {k: ours[k] for k in l71} == l71, name  # L7.1's recipe, unchanged
        assert {k: ours[k] for k in u.COURSE_VALUES} == u.COURSE_VALUES
        assert ours["vllm_importance_sampling_correction"] == profile.vllm_importance_sampling_correction


def test_pinned_values_are_what_l71_trains_with_on_the_installed_trl(tmp_path):
    # L7.1 passes none of these keywords: its trainer gets TRL's (and transformers') defaults.
    from trl import GRPOConfig

    from labs.training import recipe

    default = GRPOConfig(**recipe.grpo_config_kwargs(CI, str(tmp_path)))
    for key, value in u.COURSE_VALUES.items():
        if key == "epsilon_high":  # TRL's None: "the same as epsilon" (GRPOTrainer resolves it)
            assert default.epsilon_high is None and value == default.epsilon, (value, default.epsilon)
        else:
            assert getattr(default, key) == value, (key, getattr(default, key), value)
    pinned = GRPOConfig(**u.grpo_config_kwargs(CI, str(tmp_path)))
    assert u.trainer_settings(pinned, u.COURSE_VALUES) == u.COURSE_VALUES


def _tiny_peft_model(vocab_size: int = 64):
    from peft import get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from labs.training.recipe import lora_config

    import torch

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)
    return get_peft_model(LlamaForCausalLM(config), lora_config(CI))


def _add_trls_reference_adapter(model) -> None:
    """What TRL's GRPOTrainer does to a PEFT model when beta != 0 (grpo_trainer.py, the 'ref' block)."""
    model.add_adapter("ref", model.peft_config["default"])
    for name, param in model.named_parameters():
        if ".default." in name:
            model.get_parameter(name.replace(".default.", ".ref.")).data.copy_(param.data)


def _lora_keys_as_unsloth_sends_them(model) -> list[str]:
    # unsloth_zoo 2026.10.9 vllm_utils._build_lora_request (load_tensors=True); tests/test_gpu_wheels.py
    # runs the wheel's own expression.
    return [k.replace(".default", "") for k in model.state_dict() if ".lora_A." in k or ".lora_B." in k]


def test_drop_reference_adapter_on_a_peft_model_with_two_adapters():
    import torch
    from vllm.lora.utils import parse_fine_tuned_lora_name

    model = _tiny_peft_model()
    assert u.drop_reference_adapter(model, show=lambda _: None) is False  # nothing to drop
    _add_trls_reference_adapter(model)
    assert set(model.peft_config) == {"default", "ref"}
    with pytest.raises(ValueError, match="unsupported LoRA weight"):
        for key in _lora_keys_as_unsloth_sends_them(model):
            parse_fine_tuned_lora_name(key)  # vLLM's own parser, as it loads the rollout's adapter
    lines = []
    assert u.drop_reference_adapter(model, show=lines.append) is True
    assert set(model.peft_config) == {"default"} and model.active_adapter == "default" and "'ref'" in lines[0]
    keys = _lora_keys_as_unsloth_sends_them(model)
    assert keys and all(parse_fine_tuned_lora_name(k)[0] for k in keys)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".lora_" in n and ".default." in n for n in trainable)
    # the reference TRL now uses (adapters disabled) is what the copy was: lora_B starts at zero
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        with model.disable_adapter():
            reference = model(input_ids=ids).logits
        assert torch.equal(model(input_ids=ids).logits, reference)


@pytest.mark.trains  # one real GRPOTrainer step on a wrapped PEFT model (conftest adds slow)
def test_l72_trainer_on_a_wrapped_peft_model_drops_trls_ref_and_records_trainer_args(tmp_path, tokenizer, monkeypatch):
    """The GPU path's shape on a CPU: GRPOTrainer gets a model that is already a PEFT model, with beta != 0."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from rewards import reward_functions

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    profile = CI.replace(use_vllm=False, max_steps=1, num_generations=2, per_device_train_batch_size=2,
                         gradient_accumulation_steps=1, max_completion_length=8, report_to=(),
                         gradient_checkpointing=False, save_steps=10)
    assert profile.beta != 0
    rows = [{"prompt": [{"role": "user", "content": f"¿Cuánto es {i} + {i}?"}], "answer": str(2 * i), "id": str(i)}
            for i in range(4)]
    run = rf.RunFolder(tmp_path / "run")
    rf.write_json(run.path(rf.RUN_JSON), {"lab": "L7.2"})
    # Without the course's step, TRL (this TRL 1.16; 1.15 has the same block) adds the second adapter.
    plain = GRPOTrainer(model=_tiny_peft_model(len(tokenizer)), reward_funcs=reward_functions(),
                        args=GRPOConfig(**u.grpo_config_kwargs(profile, str(tmp_path / "plain"))),
                        train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    assert set(plain.model.peft_config) == {"default", "ref"}
    trainer = u.make_trainer(profile, run, _tiny_peft_model(len(tokenizer)), reward_functions(),
                             Dataset.from_list(rows), processing_class=tokenizer)
    assert set(trainer.model.peft_config) == {"default"}
    record = rf.read_json(run.path(rf.RUN_JSON))
    used = record["trainer_args"]
    assert {k: used[k] for k in u.COURSE_VALUES} == u.COURSE_VALUES
    assert used["beta"] == profile.beta and used["num_generations"] == 2 and used["max_steps"] == 1
    assert record["grpo_config"]["optim"] == "adamw_torch_fused" and record["grpo_config_changes"] == {}
    trainer.train()  # the KL reference now comes from disable_adapter(): one real step runs
    assert trainer.state.global_step == 1 and any("kl" in k for k in trainer.state.log_history[0])


def test_trainer_settings_records_what_the_args_hold_and_changes_are_said(tmp_path):
    from trl import GRPOConfig

    run = rf.RunFolder(tmp_path / "run")
    rf.write_json(run.path(rf.RUN_JSON), {"lab": "L7.2", "grpo_config": {"stale": True}})
    kwargs = u.grpo_config_kwargs(CI, str(tmp_path / "out"))
    args = GRPOConfig(**kwargs)
    args.weight_decay = 0.001  # what Unsloth's wrapper would have done had the course not passed it
    lines = []
    used = u.record_trainer_settings(run, kwargs, SimpleNamespace(args=args), show=lines.append)
    record = rf.read_json(run.path(rf.RUN_JSON))
    assert record["trainer_args"] == used and used["weight_decay"] == 0.001 and used["optim"] == "adamw_torch_fused"
    assert record["grpo_config_changes"] == {"weight_decay": {"receta": 0.0, "usado": 0.001}}
    assert record["grpo_config"]["weight_decay"] == 0.0 and "stale" not in record["grpo_config"]
    assert lines == ["[run] weight_decay: el trainer usa 0.001 en lugar de 0.0 (queda apuntado en run.json)."]
    json.dumps(record)  # plain JSON (enums, paths)


# --------------------------------------------------------------------------------------------------
# rtx5090-base: L7.2 runs on the instruct profile and says why
# --------------------------------------------------------------------------------------------------


def test_on_the_base_route_l72_runs_the_instruct_profile_and_says_why():
    base = get_profile("rtx5090-base").replace(max_steps=7)
    from labs.training.preflight import PreflightError

    with pytest.raises(PreflightError, match="format_pass"):
        u.check_unsloth_path(base)
    switched, why = u.profile_for_l72(base)
    assert switched.name == "rtx5090" and switched.max_steps == 7  # the student's own --set is kept
    for key in ("model", "unsloth_model", "format_pass", "learning_rate", "lora_r", "lora_alpha", "load_in_4bit"):
        assert getattr(switched, key) == getattr(RTX, key), key
    assert "rtx5090-base" in why and "L7.1" in why and "import unsloth" in why and "lora_r=16" in why
    u.check_unsloth_path(switched.replace(load_in_4bit=False))  # nothing left to refuse (4-bit needs the plugin)
    for name in ("rtx5090", "ci", "cpu"):
        assert u.profile_for_l72(get_profile(name)) == (get_profile(name), None)
