"""The L7.2 notebook's runs (labs.l72.demo): a short demo through the student's cells, and the long runs it reads.

The notebook must never start hours of training: on a GPU profile a missing or unfinished long run prints
its terminal command. The demo's CPU run itself is executed by nbval on the notebook (ci profile). The checks of
the student's cells are tested in tests/test_l72_wrong_answers.py and tests/test_l72_checks.py.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import rundirs
from labs.core.profiles import get_profile
from labs.l72 import demo
from labs.l72.standby import STANDBY_ENV, ImportOrderError

SOURCE = Path(__file__).resolve().parent.parent / "sources" / "L7_2_unsloth_standby.ipynb"


def code_cells() -> list[str]:
    cells = json.loads(SOURCE.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


# ------------------------------------------------------------------------------------------- the runs


def test_l72_runs_on_rtx5090_on_any_gpu_profile_and_says_why():
    chosen, why = demo.l72_profile(get_profile("rtx5090-base"))
    assert chosen.name == "rtx5090" and chosen.backend == "unsloth" and not chosen.format_pass
    assert "rtx5090-base" in why and "L7.1" in why
    cpu, _ = demo.l72_profile(get_profile("ci"))
    assert cpu.name == "ci"


def test_the_demo_is_a_few_steps_on_a_gpu_and_the_ci_budget_on_a_cpu():
    gpu = demo.demo_profile(get_profile("rtx5090-base"))
    assert gpu.name == "rtx5090" and gpu.max_steps == demo.DEMO_GPU["max_steps"] < get_profile("rtx5090").max_steps
    cpu = demo.demo_profile(get_profile("cpu"))
    ci = get_profile("ci")
    assert (cpu.max_steps, cpu.eval_size, cpu.use_cpu, cpu.use_vllm) == (ci.max_steps, ci.eval_size, True, False)


def test_a_missing_gpu_run_prints_the_terminal_command_and_trains_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    said = []
    assert demo.full_run(get_profile("rtx5090-base"), show=said.append) is None
    assert "python -m labs l72 --profile rtx5090" in said[-1] and "ENTRENAR_AQUI" in said[-1]
    assert demo.l71_reference(get_profile("rtx5090"), show=said.append) is None
    assert "python -m labs l71 --profile rtx5090" in said[-1]
    assert list(tmp_path.iterdir()) == []  # nothing was started


def test_an_unfinished_gpu_run_says_where_it_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    rundirs.make_run(tmp_path, "l72-rtx5090", lab="L7.2", state="running", step=120, max_steps=500)
    said = []
    assert demo.full_run(get_profile("rtx5090"), show=said.append) is None
    assert "paso 120 de 500" in said[-1] and "python -m labs l72 --profile rtx5090" in said[-1]


def test_a_finished_gpu_run_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    folder = rundirs.make_run(tmp_path, "l72-rtx5090", lab="L7.2")
    assert demo.full_run(get_profile("rtx5090"), show=lambda _: None) == folder


@pytest.mark.parametrize("profile", ["ci", "cpu"])
def test_a_missing_cpu_run_trains_only_when_the_student_asks(profile, tmp_path, monkeypatch):
    """Issue 52: Run All on the untouched notebook trained the whole L7.2 lab (8 minutes on ci) in a child process.
    Without ``entrenar`` a missing CPU run names the switch and the terminal command and starts nothing."""
    from labs.l72 import child_runs

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    started = []
    monkeypatch.setattr(child_runs, "run_lab_in_subprocess", lambda *a, **k: started.append(("l72", a)))
    monkeypatch.setattr(child_runs, "ensure_l71_run", lambda *a, **k: started.append(("l71", a)))
    said = []
    assert demo.full_run(get_profile(profile), show=said.append) is None
    assert demo.CPU_FLAG in said[-1] and "python -m labs l72" in said[-1], said
    assert demo.l71_reference(get_profile(profile), show=said.append) is None
    assert demo.CPU_FLAG in said[-1] and "python -m labs l71" in said[-1], said
    assert started == [] and list(tmp_path.iterdir()) == []
    demo.full_run(get_profile(profile), show=said.append, entrenar=True)
    demo.l71_reference(get_profile(profile), show=said.append, entrenar=True)
    assert [lab for lab, _ in started] == ["l72", "l71"]  # asked: each starts its child


def test_on_a_gpu_the_students_imports_run_only_in_the_right_order(monkeypatch):
    gpu_demo = object.__new__(demo.Demo)
    gpu_demo.profile, gpu_demo.show = get_profile("rtx5090"), print
    called = []
    monkeypatch.setitem(__import__("sys").modules, "transformers", object())
    monkeypatch.setenv(STANDBY_ENV, "1")
    with pytest.raises(ImportOrderError, match="transformers"):
        gpu_demo.fast_language_model(lambda: called.append(1))
    assert called == []  # refused before the student's imports ran


# ------------------------------------------------------------------------------------------ the notebook


def test_the_notebook_runs_the_students_functions_and_no_long_run():
    cells = code_cells()
    joined = "\n".join(cells)
    for call in ("fast_language_model(importar_unsloth, standby_posible)", "load(cargar_modelo, FastLanguageModel)",
                 "add_lora(anadir_lora, FastLanguageModel, model)", "train_and_evaluate(model, tokenizer)"):
        assert call in joined, call
    called = {ast.unparse(n.func) for s in cells if not s.startswith("def ")
              for n in ast.walk(ast.parse(s)) if isinstance(n, ast.Call)}
    long_runs = {"unsloth_lab.run_lab", "unsloth_lab.ensure_l71_run", "unsloth_lab.run_l71_in_subprocess"}
    assert not called & long_runs  # only through demo.full_run / demo.l71_reference, which ask first
    assert "ENTRENAR_AQUI = False" in joined
    assert f"{demo.CPU_FLAG} = False" in joined and f"entrenar={demo.CPU_FLAG}" in joined


def test_the_cpu_stand_in_loads_the_profiles_model_and_adds_the_lora_it_is_asked_for():
    """labs.l72.standin on a CPU profile: the student's Unsloth keywords answered with transformers + PEFT (the
    profile's model, whatever model_name says), each call saying so in Spanish."""
    from labs.l72.standin import CpuFastLanguageModel

    said = []
    fast = CpuFastLanguageModel(get_profile("ci"), show=said.append)
    model, tokenizer = fast.from_pretrained(model_name="unsloth/Qwen3-4B-Instruct-2507", max_seq_length=640,
                                            load_in_4bit=True, fast_inference=True, gpu_memory_utilization=0.6)
    assert tokenizer.model_max_length == 640 and "sin 4 bits (load_in_4bit=True)" in said[0]
    peft = fast.get_peft_model(model, r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], random_state=3)
    config = peft.peft_config["default"]
    assert (config.r, config.lora_alpha, sorted(config.target_modules)) == (8, 16, ["q_proj", "v_proj"])
    assert "r=8, lora_alpha=16" in said[1] and "use_gradient_checkpointing='unsloth'" in said[1]
