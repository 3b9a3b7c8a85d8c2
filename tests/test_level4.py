"""Level 4 counts wherever the student earned it (issue 25, item 4), and the E1-E3 predictions reach the report
(issue 35, item 4: recorded answers, read as text, the template told apart).

Criteria 1-3 are graded on the main run (the 500-step L7.1 run with the course's rewards); the level-4
evidence (own reward functions plus a comparison run in which the hack shows up) is looked for in every
finished run. The grader, the rubric's self-check and E4 share ``level4_evidence``.
"""

from __future__ import annotations

import json
import sys
import types

import pytest
from rundirs import NO_GAIN_HOLDOUT, e2_run, good_run, history, make_run, paired_verdicts

from labs.exercises import e4
from labs.grading import grade as grade_module
from labs import assign
from labs.grading import grade_submission, selfcheck, submissions, written
from labs.grading.report import render_markdown

OWN = {"correctness_reward": 1.0, "format_reward": 1.0, "soft_format_reward": 1.0, "razonamiento_con_cuentas": 1.0}


def student_runs(root, *, e4_state="finished", with_e2=True):
    """L7.1 (500 steps, course rewards), E4 (250 steps, an own reward) and, optionally, E2 (format only)."""
    l71 = good_run(root, "l71-rtx5090", metrics=history(500, seed=1), lab="L7.1")
    rows = history(250, seed=2, extra={"razonamiento_con_cuentas": (0.1, 0.3)})
    kw = {} if e4_state == "finished" else {"state": e4_state, "step": 120}
    own = make_run(root, "e4-rtx5090-1a2b3c4d", metrics=rows, rewards=OWN, lab="E4", max_steps=250,
                   verdicts=paired_verdicts(280, 140, 60, 20), **kw)
    e2 = e2_run(root, "e2-rtx5090-solo-formato") if with_e2 else None
    return l71, own, e2


def test_level_4_from_an_e4_run_beside_a_longer_main_run(tmp_path):
    student = tmp_path / "ana"
    l71, own, e2 = student_runs(student)
    g = grade_submission(student)
    assert g.run_dir == l71  # the 500-step run is the main one, as before
    assert g.verdicts[:3] == ["cumple"] * 3
    assert g.own_rewards == []  # the main run uses only the course's functions ...
    assert g.level == grade_module.LEVEL_4  # ... and level 4 still counts, from the E4 run
    assert g.level4 == grade_module.Level4Evidence(own.name, ["razonamiento_con_cuentas"], e2.name)
    text = render_markdown(g, [])
    assert f"en la ejecución '{own.name}'" in text and f"comparación '{e2.name}' muestra hacking de formato" in text


def test_without_the_comparison_it_is_a_possible_level_4_naming_the_run(tmp_path):
    student = tmp_path / "luis"
    _, own, _ = student_runs(student, with_e2=False)
    g = grade_submission(student)
    assert g.level == grade_module.LEVEL_3_MAYBE_4
    assert g.level4 == grade_module.Level4Evidence(own.name, ["razonamiento_con_cuentas"], None)
    assert own.name in g.level_reason


def test_an_unfinished_own_reward_run_is_no_evidence(tmp_path):
    student = tmp_path / "eva"
    student_runs(student, e4_state="running")
    g = grade_submission(student)
    assert g.level == grade_module.LEVEL_3 and g.level4 is None


def test_criteria_1_to_3_still_decide_on_the_main_run(tmp_path):
    student = tmp_path / "rosa"
    make_run(student, "l71-rtx5090", metrics=history(500, seed=1), verdicts=paired_verdicts(300, 142, 30, 28))
    _, own, e2 = student_runs(tmp_path / "tmp")
    for run in (own, e2):
        (student / run.name).parent.mkdir(parents=True, exist_ok=True)
        run.rename(student / run.name)
    g = grade_submission(student)
    assert g.run_dir.name == "l71-rtx5090" and g.level == grade_module.BELOW_3
    assert g.level4 is not None and g.level4.complete  # the evidence is there, criteria 1-3 are not


def test_self_check_and_e4_use_the_same_rule_and_runs_as_the_grader(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    l71, own, e2 = student_runs(tmp_path)
    main = selfcheck.find_or_make_run(echo=lambda line: None)
    assert main == l71
    grade, report = selfcheck.self_check(main)
    graded = grade_submission(tmp_path)
    assert grade.level == graded.level == grade_module.LEVEL_4
    assert grade.level4 == graded.level4
    assert own.name in report.read_text()
    seen = selfcheck.grade_runs()
    lines = e4.grade_lines(seen)
    assert any(l71.name in line for line in lines) and any(own.name in line and e2.name in line for line in lines)
    assert lines[-1].startswith(f"Nivel sugerido: {grade_module.LEVEL_4}")


def test_c2b_prints_the_terminal_command_instead_of_training_on_a_gpu_profile(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    calls = []
    fake = types.ModuleType("labs.l71")
    fake.run_lab = lambda profile=None, run_name=None: calls.append(profile) or tmp_path / "x"
    monkeypatch.setitem(sys.modules, "labs.l71", fake)
    with pytest.raises(RuntimeError, match="python -m labs l71 --profile rtx5090") as err:
        selfcheck.find_or_make_run(profile="rtx5090", echo=lambda line: None)
    assert "ENTRENAR_AQUI" in str(err.value) and calls == []
    assert selfcheck.find_or_make_run(profile="rtx5090", entrenar_aqui=True, echo=lambda line: None) == tmp_path / "x"
    assert calls == ["rtx5090"]


def notebook_with(cells: list[str], predictions: dict[str, str] | None = None) -> dict:
    """Code cells, then one markdown cell per prediction, tagged as the exercise notebooks tag theirs."""
    out = [{"cell_type": "code", "metadata": {}, "source": c} for c in cells]
    out += [{"cell_type": "markdown", "metadata": {"tags": [tag, "otter_answer_cell"]}, "source": text.splitlines(True)}
            for tag, text in (predictions or {}).items()]
    return {"cells": out, "metadata": {}, "nbformat": 4}


def test_predictions_are_read_from_the_exercise_notebooks_without_running_them(tmp_path):
    """Item 4 of issue 35: a prediction is a recorded answer (a markdown cell written before the sweep), not code, and
    not counted; the report quotes the student's own words and says plainly which one is still the template."""
    student = tmp_path / "ana"
    good_run(student, "l71-rtx5090")
    nbs = student / "notebooks"
    nbs.mkdir()
    template = written.PREDICTION_TEMPLATE
    (nbs / "E1_tamano_de_grupo.ipynb").write_text(json.dumps(notebook_with(
        ["import os"], {"prediccion-e1": f"{template}\nCon G = 16 la curva será menos ruidosa <b>pero</b> más lenta."})))
    (nbs / "E2_reward_hacking.ipynb").write_text(json.dumps(notebook_with(
        ['prediccion_e2 = "una frase de seis palabras o más"'], {"prediccion-e2": template})))
    # the marker deleted and the rest of the template left, in lower case and without accents: still the template
    (nbs / "E3_peso_kl.ipynb").write_text(json.dumps(notebook_with(
        [], {"prediccion-e3": "tu prediccion, en una frase,\n\nantes de ejecutar el barrido"})))
    (nbs / submissions.NOTEBOOK_NAME).write_text(json.dumps(notebook_with([])))
    g = grade_submission(student)
    assert g.predictions["E1"].text == "Con G = 16 la curva será menos ruidosa <b>pero</b> más lenta."
    assert {e: p.status for e, p in g.predictions.items()} == {"E1": written.WRITTEN, "E2": written.TEMPLATE,
                                                               "E3": written.TEMPLATE}
    text = render_markdown(g, [])
    assert "E1: «Con G = 16 la curva será menos ruidosa &lt;b&gt;pero&lt;/b&gt; más lenta.»" in text
    assert "E2: _(sin predicción: la celda sigue con el texto de la plantilla" in text  # a code cell is not a prediction
    assert "E3: _(sin predicción: la celda sigue con el texto de la plantilla" in text
    assert "no puntúan" in text
    assert "No se encontró el notebook C2b_rubrica.ipynb" not in text  # the rubric is not mistaken for E1


@pytest.mark.parametrize("cell,expected", [
    (written.PREDICTION_TEMPLATE, None),
    ("ESCRIBE AQUÍ", None),
    ("escribe aqui TU PREDICCIÓN", None),
    ("*tu predicción*\n\n---", None),
    ("ESCRIBE AQUÍ tu predicción, en una frase, antes de ejecutar el barrido. Con beta = 0 se alarga.", "Con beta = 0 se alarga."),
    ("Con beta = 0 se alarga.\n\nESCRIBE AQUÍ", "Con beta = 0 se alarga."),
    ("Sube.", "Sube."),  # one word of the student's own is an answer: the instructor judges it, no word count does
])
def test_a_prediction_is_the_students_own_text_and_never_the_template(cell, expected):
    nb = notebook_with([], {"prediccion-e3": cell})
    found = submissions.prediction_in(nb, "E3")
    assert found.text == expected and bool(found) is (expected is not None)
    assert submissions.prediction_in(notebook_with([]), "E3").status == written.MISSING


def test_the_exercise_notebooks_record_the_prediction_the_grader_reads():
    """The student notebooks carry each prediction as a tagged markdown cell with the grader's template, and no code
    cell or check for it (otter's manual question: graded by the instructor, never by grader.check)."""
    for exercise, name in (("E1", "E1_tamano_de_grupo.ipynb"), ("E2", "E2_reward_hacking.ipynb"), ("E3", "E3_peso_kl.ipynb")):
        nb = json.loads((assign.STUDENT_DIR / name).read_text())
        assert submissions.prediction_in(nb, exercise).status == written.TEMPLATE
        text = json.dumps(nb)
        assert f"prediccion_{exercise.lower()}" not in text and 'grader.check(\\"prediccion-' not in text


def test_the_main_run_is_l71s_beside_a_later_l72_run_of_the_same_length(tmp_path, monkeypatch):
    """Issue 33, item 3: L7.2 trains as many steps as L7.1 and finishes after it; a good L7.1 run beside a
    flat L7.2 run is level 3, by one rule the grader, C2b's self-check and E4 share, and each says why."""
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    l71 = good_run(tmp_path, "l71-rtx5090-base", metrics=history(500, seed=1), lab="L7.1", profile="rtx5090-base")
    flat = history(500, seed=3, correctness=(0.6, 0.6), fmt=(0.45, 0.45), soft=(0.19, 0.19), length=(250, 250))
    l72 = make_run(tmp_path, "l72-rtx5090", metrics=flat, lab="L7.2", verdicts=paired_verdicts(*NO_GAIN_HOLDOUT))
    status = json.loads((l72 / "status.json").read_text())
    status["updated"] = "2099-01-01T00:00:00+00:00"  # it finished after L7.1
    (l72 / "status.json").write_text(json.dumps(status))
    assert grade_module.grade_run(l72).level == grade_module.BELOW_3  # graded on its own, L7.2 would fail

    g = grade_submission(tmp_path)
    assert g.run_dir == l71 and g.level == grade_module.LEVEL_3
    assert "l72-rtx5090 (no es del L7.1: es una comparación)" in g.main_why
    assert g.main_why in render_markdown(g, [])

    main = selfcheck.find_or_make_run(echo=lambda line: None)
    assert main == l71
    grade, report = selfcheck.self_check(main)
    assert grade.level == grade_module.LEVEL_3 and "no es del L7.1" in report.read_text()
    lines = e4.grade_lines(selfcheck.grade_runs())
    assert f"'{l71.name}'" in lines[0] and lines[-1].startswith(f"Nivel sugerido: {grade_module.LEVEL_3}")
