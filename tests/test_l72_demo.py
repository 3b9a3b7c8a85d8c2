"""The L7.2 notebook's student cells and its runs: the checks (labs.l72.answers) and the demo (labs.l72.demo).

The checks must tell a right answer from the usual wrong ones (trl imported first, Standby set after the
import, a number typed instead of the profile's field, a positional argument) without loading anything.
The notebook must never start hours of training: on a GPU profile a missing or unfinished long run prints
its terminal command. The demo's CPU run itself is executed by nbval on the notebook (ci profile).
"""

from __future__ import annotations

import ast
import json
import linecache
from pathlib import Path

import pytest

import rundirs
from labs.core.profiles import get_profile
from labs.l72 import answers, demo, from_pretrained_kwargs, get_peft_model_kwargs
from labs.l72.standby import STANDBY_ENV, ImportOrderError

SOURCE = Path(__file__).resolve().parent.parent / "sources" / "L7_2_unsloth_standby.ipynb"
PROFILES = [get_profile("rtx5090"), get_profile("ci")]


def code_cells() -> list[str]:
    cells = json.loads(SOURCE.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def define(source: str, filename: str) -> dict:
    """Run ``source`` as a notebook cell runs: its text in linecache, so inspect.getsource finds it."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def solution(name: str):
    """The notebook's solution function ``name`` (markers and all), defined in a fresh namespace."""
    (source,) = [s for s in code_cells() if s.startswith(f"def {name}(")]
    return source, define(source, f"<l72-{name}>")[name]


# ------------------------------------------------------------------------------------------ import order

RIGHT = """
def importar_unsloth():
    import unsloth
    from unsloth import FastLanguageModel
    return FastLanguageModel
"""


def test_the_right_order_passes_and_the_solution_is_right():
    assert answers.import_order_errors(RIGHT, {STANDBY_ENV: "1"}) == []
    source, _ = solution("importar_unsloth")
    assert answers.import_order_errors(source, {STANDBY_ENV: "1"}) == []
    assert answers.imports_fast_language_model(source)


@pytest.mark.parametrize("first", ["import trl", "from transformers import AutoTokenizer", "import peft.tuners"])
def test_a_patched_module_before_unsloth_is_named(first):
    source = RIGHT.replace("    import unsloth\n", f"    {first}\n    import unsloth\n")
    (problem,) = answers.import_order_errors(source, {STANDBY_ENV: "1"})
    assert first.split()[1].split(".")[0] in problem and "Reinicia el kernel" in problem


def test_standby_must_come_before_the_import_not_after():
    after = RIGHT.replace("    return", "    os.environ[\"UNSLOTH_VLLM_STANDBY\"] = \"1\"\n    return")
    (problem,) = answers.import_order_errors(after, {})
    assert "sin UNSLOTH_VLLM_STANDBY=1" in problem
    before = RIGHT.replace("    import unsloth\n", "    os.environ[\"UNSLOTH_VLLM_STANDBY\"] = \"1\"\n    import unsloth\n")
    assert answers.import_order_errors(before, {}) == []


def test_order_is_the_source_order_also_inside_blocks():
    nested = "def f():\n    if True:\n        import trl\n    import unsloth\n"
    assert answers.import_order_errors(nested, {STANDBY_ENV: "1"})


def test_no_import_and_no_return_are_reported():
    assert answers.import_order_errors("def f():\n    ...\n", {STANDBY_ENV: "1"})
    assert not answers.imports_fast_language_model("def f():\n    import unsloth\n    from unsloth import FastLanguageModel\n")


# ------------------------------------------------------------------------------------ the two calls


def test_the_solutions_make_the_labs_calls():
    _, cargar = solution("cargar_modelo")
    _, anadir = solution("anadir_lora")
    assert answers.call_errors(cargar, "from_pretrained", PROFILES, from_pretrained_kwargs) == []
    assert answers.call_errors(anadir, "get_peft_model", PROFILES, get_peft_model_kwargs, "modelo") == []


def _function(source: str):
    namespace = define(source, f"<alumno-{abs(hash(source))}>")
    return next(v for k, v in namespace.items() if k != "__builtins__")


def test_a_typed_number_passes_the_lesson_profile_but_not_the_other():
    source, _ = solution("anadir_lora")
    typed = _function(source.replace("r=perfil.lora_r", "r=16"))
    rtx, ci = PROFILES
    assert answers.call_errors(typed, "get_peft_model", [rtx], get_peft_model_kwargs, "modelo") == []
    (problem,) = answers.call_errors(typed, "get_peft_model", PROFILES, get_peft_model_kwargs, "modelo")
    assert "perfil ci" in problem and f"debe ser {ci.lora_r}" in problem and "perfil.lora_r" in problem


def test_missing_extra_and_positional_arguments_are_named():
    source, _ = solution("cargar_modelo")
    missing = _function(source.replace("        fast_inference=True,\n", "        use_cache=False,\n"))
    problems = " ".join(answers.call_errors(missing, "from_pretrained", PROFILES, from_pretrained_kwargs))
    assert "falta fast_inference=" in problems and "sobra use_cache" in problems
    positional = _function("def f(FastLanguageModel, perfil):\n"
                           "    return FastLanguageModel.from_pretrained(perfil.unsloth_model)\n")
    assert "no por posición" in " ".join(answers.call_errors(positional, "from_pretrained", PROFILES,
                                                              from_pretrained_kwargs))


def test_a_stub_or_a_crash_fails_with_a_message_not_a_traceback():
    assert answers.call_errors(None, "from_pretrained", PROFILES, from_pretrained_kwargs)
    stub = _function("def f(FastLanguageModel, perfil):\n    ...\n")
    assert "no llama" in answers.call_errors(stub, "from_pretrained", PROFILES, from_pretrained_kwargs)[0]
    broken = _function("def f(FastLanguageModel, perfil):\n    return perfil.no_existe\n")
    assert "AttributeError" in answers.call_errors(broken, "from_pretrained", PROFILES, from_pretrained_kwargs)[0]


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
    for call in ("fast_language_model(importar_unsloth)", "load(cargar_modelo, FastLanguageModel)",
                 "add_lora(anadir_lora, FastLanguageModel, model)", "train_and_evaluate(model, tokenizer)"):
        assert call in joined, call
    called = {ast.unparse(n.func) for s in cells if not s.startswith("def ")
              for n in ast.walk(ast.parse(s)) if isinstance(n, ast.Call)}
    long_runs = {"unsloth_lab.run_lab", "unsloth_lab.ensure_l71_run", "unsloth_lab.run_l71_in_subprocess"}
    assert not called & long_runs  # only through demo.full_run / demo.l71_reference, which ask first
    assert "ENTRENAR_AQUI = False" in joined
