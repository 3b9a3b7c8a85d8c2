"""A student's own reward function: loading it by name, checking it before a run, recording it, and
the honest-and-hacking table it is checked against. The real training run with such a function is in
tests/test_l71_run.py (its run uses tests/data/recompensa_alumno.py)."""

from __future__ import annotations

import hashlib
import inspect
import shutil
import time
from pathlib import Path

import pytest

from labs.l71 import cli as l71_cli
from labs.training import preflight
from rewards import REWARD_NAMES, examples, reward_functions
from rewards.own import OwnRewardError, describe_reward_functions

STUDENT_FILE = Path(__file__).resolve().parent / "data" / "recompensa_alumno.py"
STUDENT = f"{STUDENT_FILE}:razonamiento_con_cuentas"
COLUMNS = ("prompt", "answer", "id")


def test_a_function_in_a_file_is_loaded_by_path_and_by_module(tmp_path, monkeypatch):
    funcs = reward_functions(["correctness_reward", STUDENT])
    assert [f.__name__ for f in funcs] == ["correctness_reward", "razonamiento_con_cuentas"]
    assert funcs[1]([[{"role": "assistant", "content": "<think>48 + 24 = 72</think><answer>72</answer>"}]]) == [0.3]
    shutil.copy(STUDENT_FILE, tmp_path / "mi_recompensa.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    by_relative_path = reward_functions("mi_recompensa.py:razonamiento_con_cuentas")[0]
    by_module = reward_functions("mi_recompensa:razonamiento_con_cuentas")[0]
    assert by_relative_path.__name__ == by_module.__name__ == "razonamiento_con_cuentas"


def test_an_edited_file_is_read_again(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "mia.py"
    path.write_text("def paga(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    assert reward_functions("mia.py:paga")[0](["a"]) == [1.0]
    path.write_text("def paga(completions, **kwargs):\n    return [2.0] * len(completions)\n")
    assert reward_functions("mia.py:paga")[0](["a"]) == [2.0]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("no_existe.py:f", "no existe el archivo"),
        (f"{STUDENT_FILE}:nada", "no tiene ninguna función llamada 'nada'.*razonamiento_con_cuentas"),
        (f"{STUDENT_FILE}:CUENTA", "no es una función"),
        ("modulo_que_no_existe:f", "no se encuentra el módulo"),
        ("rewards.functions:format_reward", "igual que una de las del curso"),
        ("mal nombre:f", "no es un nombre de módulo"),
        (":f", "modulo:funcion o archivo.py:funcion"),
    ],
)
def test_a_bad_name_is_refused_in_spanish(spec, message):
    with pytest.raises(OwnRewardError, match=message):
        reward_functions(["correctness_reward", spec])


def test_a_file_that_does_not_import_names_the_line(tmp_path):
    path = tmp_path / "rota.py"
    path.write_text("def f(completions, **kwargs):\n    return [\n")
    with pytest.raises(OwnRewardError, match=r"SyntaxError \(línea \d\)"):
        reward_functions(f"{path}:f")


def test_two_functions_with_one_name_are_refused(tmp_path):
    other = tmp_path / "otra.py"
    other.write_text("def razonamiento_con_cuentas(completions, **kwargs):\n    return [0.0] * len(completions)\n")
    with pytest.raises(ValueError, match="repetida"):
        reward_functions([STUDENT, f"{other}:razonamiento_con_cuentas"])


def test_preflight_calls_each_function_and_names_the_broken_ones():
    funcs = reward_functions([
        "correctness_reward", STUDENT,
        f"{STUDENT_FILE}:recompensa_que_falla", f"{STUDENT_FILE}:recompensa_de_grupo",
    ])
    problems = preflight.check_reward_calls(funcs, COLUMNS)
    assert len(problems) == 2
    assert "recompensa_que_falla lanzó KeyError" in problems[0] and "no debe lanzar" in problems[0]
    assert "recompensa_de_grupo devolvió 1 valor para 4" in problems[1]


def test_preflight_refuses_non_numbers():
    def texto(completions, **kwargs):
        return ["alto"] * len(completions)

    def infinita(completions, **kwargs):
        return [float("inf")] * len(completions)

    def sin_lista(completions, **kwargs):
        return 1.0

    def con_none(completions, **kwargs):
        return [None] * len(completions)  # TRL reads None as "not scored": allowed

    problems = preflight.check_reward_calls([texto, infinita, sin_lista, con_none], COLUMNS)
    assert [p.split()[4] for p in problems] == ["texto", "infinita", "sin_lista"]


def test_the_command_line_stops_before_loading_a_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    start = time.perf_counter()
    code = l71_cli.main(["--profile", "ci", "--run-name", "x",
                         "--rewards", f"correctness_reward,{STUDENT_FILE}:recompensa_de_grupo"])
    err = capsys.readouterr().err
    assert code == 2 and "recompensa_de_grupo devolvió 1 valor" in err
    assert time.perf_counter() - start < 20  # a model load or a vLLM start takes far longer
    assert not (tmp_path / "runs" / "x").exists()


def test_run_json_records_the_name_and_a_hash_of_the_source():
    funcs = reward_functions(["correctness_reward", STUDENT])
    course, own = describe_reward_functions(funcs, REWARD_NAMES)
    assert course == {"name": "correctness_reward", "module": "rewards.functions", "own": False}
    source = inspect.getsource(funcs[1])
    assert own["name"] == "razonamiento_con_cuentas" and own["own"]
    assert Path(own["file"]) == STUDENT_FILE
    assert own["source_sha256"] == hashlib.sha256(source.encode()).hexdigest()
    assert own["source"] == source


def test_the_course_functions_leave_only_filler_reasoning_open():
    rows = examples.score_table(reward_functions())
    result = examples.check_against_hacks(rows)
    assert result["bar"] == pytest.approx(2.9)
    assert result["open"] == ["razonamiento de relleno"]
    assert len(result["closed"]) == sum(not e.honest for e in examples.EXAMPLES) - 1
    by_label = {r["label"]: r["total"] for r in rows}
    assert by_label["dos respuestas"] == pytest.approx(0.2) and by_label["número correcto sin etiquetas"] == 0.0
    assert by_label[result["bar_label"]] == result["bar"]  # the honest answer the bar is read from


def test_the_student_function_closes_the_open_hack():
    rows = examples.score_table(reward_functions([*REWARD_NAMES, STUDENT]))
    assert examples.check_against_hacks(rows)["open"] == []
    table = examples.markdown_table(rows)
    assert "`razonamiento_con_cuentas`" in table and "hack abierto" not in table


def test_score_table_names_a_function_with_the_wrong_length():
    with pytest.raises(ValueError, match="recompensa_de_grupo debe devolver una lista con un número por completion"):
        examples.score_table(reward_functions(f"{STUDENT_FILE}:recompensa_de_grupo"))


def test_the_grader_lists_the_own_functions_source_hash(tmp_path):
    from labs.core import runfolder as rf
    from labs.grading import grade_run
    from rundirs import make_run

    root = make_run(tmp_path, rewards={**{n: 1.0 for n in REWARD_NAMES}, "razonamiento_con_cuentas": 1.0})
    record = rf.read_json(root / rf.RUN_JSON)
    record["reward_sources"] = describe_reward_functions(reward_functions([*REWARD_NAMES, STUDENT]), REWARD_NAMES)
    rf.write_json(root / rf.RUN_JSON, record)
    g = grade_run(root)
    digest = record["reward_sources"][-1]["source_sha256"]
    assert g.own_rewards == ["razonamiento_con_cuentas"]
    assert any(f"archivo recompensa_alumno.py, SHA-256 del código {digest[:12]}" in e for e in g.criterion(4).evidence)
