"""L7.2's code that needs no card and that no training run reaches: its refusals, its fallbacks, what the notebook's
kernel runs on a CPU, and the child processes the notebook starts (their cells, with stand-in children).

Each test feeds the course's code a real input that takes the path: a PEFT model, a run folder, a process.
Nothing here trains.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
import traceback
from pathlib import Path

import pytest

import rundirs
from labs.core import childlog
from labs.core import runfolder as rf
from labs.core.profiles import get_profile


# --- the notebook's child processes (labs.l72.child_runs) ------------------------------------------------------


def _stand_in_lab(body: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(body)]


def test_interrupting_the_cell_kills_the_lab_it_started(tmp_path, monkeypatch):
    """Ctrl+C in the notebook while L7.1 trains in its child: the child is killed (it would go on training on its
    own, holding the memory L7.2 needs) and the interruption reaches the cell."""
    from labs.l72 import child_runs

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    pid_file = tmp_path / "child.pid"
    child = _stand_in_lab(f"""
        import os, sys, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        print("[paso 1/100] recompensa 0.1", flush=True)
        time.sleep(600)
    """)
    real_write = childlog.write

    def interrupt_at_the_first_line(log, line):
        real_write(log, line)
        raise KeyboardInterrupt

    monkeypatch.setattr(childlog, "write", interrupt_at_the_first_line)
    started = time.perf_counter()
    # ``interrupted`` keeps the call's frame, and so its Popen, alive: Popen's finaliser would reap the child first
    with pytest.raises(KeyboardInterrupt) as interrupted:
        child_runs.run_l71_in_subprocess("ci", show=lambda line: None, command=child)
    assert time.perf_counter() - started < 60  # it did not wait for the child's ten minutes
    pid = int(pid_file.read_text())  # this process's own child, so waitpid reaps it here
    deadline = time.monotonic() + 10
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the child kept running after the interruption")
        time.sleep(0.1)
    assert os.WIFSIGNALED(done[1]) and os.WTERMSIG(done[1]) == signal.SIGKILL  # killed, not finished
    assert interrupted.type is KeyboardInterrupt


def test_the_child_gets_a_free_master_port_unless_one_is_set(monkeypatch):
    from labs.l72 import child_runs

    monkeypatch.delenv("MASTER_PORT", raising=False)
    port = int(child_runs._child_env()["MASTER_PORT"])
    assert 1024 < port < 65536 and port != 29500
    monkeypatch.setenv("MASTER_PORT", "31234")
    assert child_runs._child_env()["MASTER_PORT"] == "31234"  # the student's choice is kept


def test_priming_the_format_pass_starts_nothing_on_a_profile_without_one(tmp_path, monkeypatch):
    from labs.l72 import child_runs

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    assert not get_profile("rtx5090").format_pass  # the instruct model answers in the format already
    said: list[str] = []
    child_runs.prime_format_pass_in_subprocess("rtx5090", show=said.append)
    assert said == [] and not (tmp_path / childlog.LOG_DIR).exists()


def test_a_format_pass_that_fails_in_its_child_raises_with_the_logs_last_lines(tmp_path, monkeypatch):
    """The priming child runs the lab's own format pass; here one that fails (a stand-in script in its place)."""
    from labs.l72 import child_runs

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    monkeypatch.setattr(child_runs, "_PRIME_SCRIPT", "import sys; print('ERROR: disco lleno'); sys.exit(4)")
    profile = get_profile("ci")
    assert profile.format_pass
    said: list[str] = []
    with pytest.raises(RuntimeError) as failed:
        child_runs.prime_format_pass_in_subprocess(profile.name, show=said.append)
    log = childlog.log_path(f"formato-{profile.name}")
    assert "código 4" in str(failed.value) and "ERROR: disco lleno" in str(failed.value) and str(log) in str(failed.value)
    assert len(said) == 1 and "pase de formato" in said[0]
    monkeypatch.setattr(child_runs, "_PRIME_SCRIPT", "print('/ruta/al/modelo')")
    child_runs.prime_format_pass_in_subprocess(profile.name, show=said.append)  # a child that succeeds: no error
    assert "/ruta/al/modelo" in log.read_text()


# --- the demo on a CPU profile (what the notebook's kernel runs under nbval) ------------------------------------


@pytest.mark.cpu_stack  # the demo's start runs the doctor: it rightly refuses a CPU profile on the GPU stack
def test_the_cpu_demo_loads_through_the_students_function_without_vllm(tmp_path, monkeypatch):
    from labs.l72 import demo
    from labs.l72.standin import CpuFastLanguageModel

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    said: list[str] = []
    mi_demo = demo.Demo("ci", show=said.append)
    fast_language_model = mi_demo.fast_language_model(lambda: pytest.fail("no Unsloth import on a CPU"))
    assert isinstance(fast_language_model, CpuFastLanguageModel)
    asked = []

    def cargar_modelo(FastLanguageModel, perfil):
        asked.append(perfil)
        return FastLanguageModel.from_pretrained(model_name=perfil.unsloth_model, fast_inference=True,
                                                 max_seq_length=perfil.max_prompt_tokens + perfil.max_completion_length,
                                                 load_in_4bit=perfil.load_in_4bit, max_lora_rank=perfil.lora_r)

    try:
        model, tokenizer = mi_demo.load(cargar_modelo, fast_language_model)
    finally:
        memory = mi_demo.monitor.stop() if mi_demo.monitor is not None else {}
    assert asked == [mi_demo.profile] and mi_demo.profile.use_cpu
    assert model.num_parameters() > 10**8 and tokenizer("1+1")["input_ids"]
    assert mi_demo.fraction.rule == "no-vllm" and mi_demo.fraction.engine_value is None
    assert memory["gpu"] is None  # a CPU demo samples no card


# --- the comparison's records (labs.l72.compare) --------------------------------------------------------------


def test_a_newer_l72_run_of_other_settings_is_not_the_reference(tmp_path):
    from labs.l72.compare import find_lab_run

    ci = get_profile("ci")
    l72 = rundirs.make_run(tmp_path, "l72-ci", lab="L7.2", profile="ci", max_steps=ci.max_steps)
    time.sleep(0.01)
    rundirs.make_run(tmp_path, "l72-ci-corto", lab="L7.2", profile="ci", max_steps=1)
    assert find_lab_run("L7.2", ci, tmp_path) == l72


def test_a_gpu_runs_memory_is_the_cards_and_the_ratio_is_computed(tmp_path):
    from labs.core.resources import write_resources
    from labs.l72.compare import describe_comparison_es, lab_record, reward_differences_es

    l71 = rundirs.make_run(tmp_path, "l71-rtx5090", lab="L7.1", profile="rtx5090")
    l72 = rundirs.make_run(tmp_path, "l72-rtx5090", lab="L7.2", profile="rtx5090")
    write_resources(l71, {"peak_rss_gib": 9.0, "gpu": {"device_used_by_run_gib": 24.0}})
    write_resources(l72, {"peak_rss_gib": 7.0, "gpu": {"device_used_by_run_gib": 12.0}})
    a, b = lab_record(l71), lab_record(l72)
    assert (a["memory_gib"], b["memory_gib"]) == (24.0, 12.0) and b["memory_kind"].startswith("GPU")
    memory = describe_comparison_es([a, b])[0]
    assert memory == "Memoria: L7.1 24.00 GiB, L7.2 12.00 GiB (0.50 veces; GPU (pico de memoria ocupada))."
    assert reward_differences_es(a, {**b, "recipe": None}) == []  # a run from before recipes were recorded


# --- L7.2's trainer, adapter and references ---------------------------------------------------------------------


def test_a_peft_that_keeps_the_reference_adapter_stops_the_run(monkeypatch):
    """vLLM refuses the 'ref' adapter's weights at the first rollout: if PEFT's delete_adapter left them, the run
    stops before training, not at the first step."""
    from test_unsloth_lab import _add_trls_reference_adapter, _tiny_peft_model

    from labs.l72.trainer import drop_reference_adapter

    model = _tiny_peft_model()
    _add_trls_reference_adapter(model)
    monkeypatch.setattr(model, "delete_adapter", lambda name: None)  # a PEFT whose delete_adapter does nothing
    with pytest.raises(RuntimeError, match="did not delete the 'ref' adapter"):
        drop_reference_adapter(model, show=lambda _: None)


def test_trainer_args_that_json_cannot_hold_are_recorded_as_text():
    from labs.l72.trainer import trainer_settings
    from types import SimpleNamespace

    args = SimpleNamespace(max_grad_norm=float("inf"), output_dir=Path("/runs/l72"), beta=0.0)
    assert trainer_settings(args, ["max_grad_norm", "output_dir", "beta"]) == {
        "max_grad_norm": "inf", "output_dir": "/runs/l72", "beta": 0.0}


def test_a_peft_models_adapter_is_saved_with_its_own_method(tmp_path):
    """The CPU path's model is PEFT's (no Unsloth ``save_lora``): ``save_pretrained`` writes the adapter."""
    from test_unsloth_lab import _tiny_peft_model
    from transformers import AutoTokenizer

    from labs.l72.lora import save_adapter
    from labs.training import models

    tokenizer = AutoTokenizer.from_pretrained(models.convert_bundled_model())
    folder = save_adapter(_tiny_peft_model(), tokenizer, rf.RunFolder(tmp_path / "run"))
    assert (folder / "adapter_config.json").exists() and (folder / "adapter_model.safetensors").exists()
    assert (folder / "tokenizer_config.json").exists()


def test_an_engine_without_the_adapter_refuses_the_trained_evaluation():
    from labs.l72.lora import LoraNotLoaded, require_engine_has_adapter

    require_engine_has_adapter({"engine_has_adapter": True, "max_abs_diff": 0.0, "adapter_max_delta": 0.1,
                                "compared": 12})
    with pytest.raises(LoraNotLoaded, match="mediría el modelo base") as refused:
        require_engine_has_adapter({"engine_has_adapter": False, "max_abs_diff": 0.1, "adapter_max_delta": 0.1,
                                    "compared": 12})
    assert "12 tensores comparados" in str(refused.value)


def test_a_reference_to_a_module_or_a_pin_that_is_gone_is_broken():
    from labs.l72.references import ReferenceBroken, _pin, resolve

    with pytest.raises(ReferenceBroken, match="no existe ese módulo"):
        resolve("paquete_que_no_existe.modulo.funcion")
    with pytest.raises(ReferenceBroken, match="no está fijado en requirements-gpu.txt"):
        _pin("paquete-que-no-existe", "gpu")
    assert _pin("trl", "cpu") != _pin("trl", "gpu")  # the two stacks pin their own TRL


# --- Standby: the memory rule, the load guard, the import record ----------------------------------------------


def test_a_negative_card_size_is_refused():
    from labs.l72.memory import standby_target_fraction

    assert standby_target_fraction(0.0, "0.31.0") == pytest.approx(0.75 * 0.95)  # the last tier starts at 0
    with pytest.raises(ValueError, match="no puede ser negativa"):
        standby_target_fraction(-1.0, "0.31.0")


def test_ctrl_c_during_a_standby_load_is_not_a_failed_load():
    """Interrupting the load cell is the student's choice, not a broken allocator: the next load may run."""
    from labs.l72 import standby

    rtx = get_profile("rtx5090")
    with pytest.raises(KeyboardInterrupt):
        with standby.standby_load_guard(rtx, modules={}):
            raise KeyboardInterrupt
    assert standby._FAILED_STANDBY_LOAD is None
    with standby.standby_load_guard(rtx, modules={}):
        pass


def test_an_import_with_no_frame_of_its_own_has_no_importer(monkeypatch):
    """Python's import machinery and the sandbox itself are never "the code that imported unsloth"."""
    from labs.l72 import sandbox

    frames = [traceback.FrameSummary("<frozen importlib._bootstrap>", 1, "_find_and_load"),
              traceback.FrameSummary(sandbox.__file__, 70, "find_spec"),
              traceback.FrameSummary(sandbox.__file__, 55, "_importer_file")]
    monkeypatch.setattr(sandbox.traceback, "extract_stack", lambda: list(frames))
    assert sandbox._importer_file() is None
    frames.insert(0, traceback.FrameSummary("/home/alumno/celda.py", 3, "<module>"))
    assert sandbox._importer_file() == "/home/alumno/celda.py"


# --- the rehearsal's verdict --------------------------------------------------------------------------------------


def test_a_failed_check_fails_the_rehearsal_even_when_every_part_finished():
    from labs.rehearsal.cli import settle

    ok = {"failure": None, "parts": {"l71": {"lab": "L7.1", "checks": {"engine_uses_trained_weights": {"ok": True}}}}}
    settle(ok)
    assert ok["status"] == "ok" and ok["failure"] is None
    bad = {"failure": None, "parts": {"l71": {"lab": "L7.1", "checks": {"engine_uses_trained_weights": {"ok": False}}}}}
    settle(bad)
    assert bad["status"] == "failed" and bad["failure"]["kind"] == "check"
    assert "L7.1: El motor de generación usa los pesos entrenados" in bad["failure"]["message_es"]
    assert "No lances el run completo" in bad["failure"]["message_es"]
    part_failed = {"failure": {"kind": "oom", "message_es": "sin memoria"}, "parts": {}}
    settle(part_failed)
    assert part_failed["status"] == "failed" and part_failed["failure"]["kind"] == "oom"  # the first cause is kept


def test_the_rehearsal_without_torch_sees_no_gpu(monkeypatch):
    from labs.rehearsal import cli

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    assert cli._gpu() == (False, None, None)
