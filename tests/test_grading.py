"""The C2b grader on synthetic run folders: scenarios, malformed input, zips, a class, the front doors."""

from __future__ import annotations

import json
import os
import sys
import types
import zipfile
from pathlib import Path

import pytest
from notebook_cells import outputs_only_in_checked_cells
from rundirs import (
    NO_GAIN_HOLDOUT,
    SMALL_HOLDOUT,
    corrupt,
    dump,
    e2_run,
    format_hacking_run,
    good_run,
    history,
    kl_explosion_run,
    make_run,
    oom_run,
    paired_verdicts,
    read_csv_rows,
)

from labs.core import diagnostics as dg
from labs.core import runfolder as rf
from labs.core import stats
from labs.grading import CUMPLE, MANUAL, NO_CUMPLE, NO_SE_PUEDE, grade_class, grade_run, grade_submission, main
from labs.grading import criteria as cr
from labs.grading import grade as grade_module
from labs.grading import report as report_module
from labs.grading import selfcheck, submissions, written
from labs.grading.report import render_markdown


def report(grade) -> str:
    return render_markdown(grade, [])


def files_outside(root: Path, out: Path) -> set[str]:
    return {str(p) for p in root.rglob("*") if out not in p.parents and p != out}


# ------------------------------------------------------------------------------------ the scenarios


def test_good_run_meets_criteria_1_to_3(tmp_path):
    g = grade_run(good_run(tmp_path))
    assert g.verdicts == [CUMPLE, CUMPLE, CUMPLE, MANUAL]
    assert g.level == grade_module.LEVEL_3
    assert g.hacking.holds is False
    text = report(g)
    assert "**Nivel sugerido: nivel 3.**" in text
    assert "McNemar exacto" in text and "Theil-Sen" in text
    assert "correctness_reward (peso 1)" in text


def test_oom_at_step_120(tmp_path):
    g = grade_run(oom_run(tmp_path))
    assert g.criterion(1).verdict == NO_CUMPLE
    assert any("sin memoria (OOM) en el paso 120 de 500" in r for r in g.criterion(1).reasons)
    assert g.criterion(3).verdict == NO_SE_PUEDE
    assert g.level == grade_module.BELOW_3
    text = report(g)
    assert "OOM" in text and "falta la carpeta eval/" in text


def test_kl_explosion(tmp_path):
    g = grade_run(kl_explosion_run(tmp_path))
    c1 = g.criterion(1)
    assert c1.verdict == NO_CUMPLE
    assert c1.values["kl_max_smoothed"] > dg.KL_BOUND
    assert any("La KL se disparó" in r for r in c1.reasons)
    assert g.criterion(2).verdict == CUMPLE  # only the KL fails


def test_format_hacking(tmp_path):
    g = grade_run(format_hacking_run(tmp_path))
    assert g.hacking.holds is True
    assert g.criterion(2).verdict == NO_CUMPLE  # the length did not rise
    assert g.criterion(3).verdict == NO_CUMPLE
    text = report(g)
    assert "Posible hacking de formato" in text


def test_no_gain_on_the_holdout(tmp_path):
    g = grade_run(make_run(tmp_path, "nogain", verdicts=paired_verdicts(*NO_GAIN_HOLDOUT)))
    c3 = g.criterion(3)
    assert c3.verdict == NO_CUMPLE
    assert c3.values["n"] == 500 and c3.values["gained"] == 30 and c3.values["lost"] == 28
    assert c3.values["mcnemar_p"] == pytest.approx(stats.mcnemar_exact(30, 28))
    assert "No hay mejora medible" in report(g)


def test_holdout_too_small_to_tell(tmp_path):
    g = grade_run(make_run(tmp_path, "small", verdicts=paired_verdicts(*SMALL_HOLDOUT)))
    assert g.criterion(3).verdict == NO_SE_PUEDE
    assert g.level == grade_module.NO_LEVEL
    assert "No se puede saber si mejoró la precisión" in report(g) and "8 problemas" in report(g)


# ------------------------------------------------------------------------------------ malformed input


def test_missing_status(tmp_path):
    run = good_run(tmp_path)
    (run / rf.STATUS_JSON).unlink()
    g = grade_run(run)
    assert g.criterion(1).verdict == NO_SE_PUEDE
    assert "No se puede evaluar si el entrenamiento terminó porque status.json no existe." in report(g)
    assert g.criterion(2).verdict == CUMPLE  # the rest is still graded


def test_truncated_status(tmp_path):
    run = good_run(tmp_path)
    text = (run / rf.STATUS_JSON).read_text()
    corrupt(run / rf.STATUS_JSON, text[: len(text) // 2])
    g = grade_run(run)
    assert g.criterion(1).verdict == NO_SE_PUEDE
    assert "status.json no es JSON válido" in report(g)


def test_status_without_steps(tmp_path):
    run = good_run(tmp_path)
    dump(run / rf.STATUS_JSON, {"state": "finished", "step": "muchos"})
    g = grade_run(run)
    assert g.criterion(1).verdict == NO_SE_PUEDE
    assert "'step' y 'max_steps' enteros" in report(g)


def test_metrics_with_a_cut_last_line_and_a_bad_middle_line(tmp_path):
    run = good_run(tmp_path)
    lines = (run / rf.METRICS_JSONL).read_text().splitlines()
    lines[50] = "{esto no es json"
    lines.append('{"step": 201, "rew')
    corrupt(run / rf.METRICS_JSONL, "\n".join(lines))
    g = grade_run(run)
    assert g.criterion(2).verdict == CUMPLE
    text = report(g)
    assert "1 líneas que no son JSON válido (líneas 51)" in text
    assert "La última línea de metrics.jsonl está cortada" in text


def test_nan_and_infinity_in_metrics(tmp_path):
    rows = history(100)
    run = make_run(tmp_path, "nan", metrics=rows, verdicts=paired_verdicts(*NO_GAIN_HOLDOUT))
    lines = (run / rf.METRICS_JSONL).read_text().splitlines()
    row = json.loads(lines[40])
    text = json.dumps(row).replace(f'"reward": {json.dumps(row["reward"])}', '"reward": NaN')
    text = text.replace(f'"loss": {json.dumps(row["loss"])}', '"loss": Infinity')
    lines[40] = text
    corrupt(run / rf.METRICS_JSONL, "\n".join(lines) + "\n")
    g = grade_run(run)
    c1 = g.criterion(1)
    assert c1.verdict == NO_CUMPLE
    reason = " ".join(c1.reasons)
    assert "'reward' en 1 paso (el primero, el 41)" in reason and "'loss'" in reason
    assert g.criterion(2).verdict == CUMPLE  # NaN values are skipped by the trend test


def test_run_stopped_at_step_3(tmp_path):
    run = make_run(tmp_path, "short", metrics=history(3), max_steps=500, state=rf.STATE_FAILED, step=3, kind="interrupted")
    g = grade_run(run)
    assert g.criterion(1).verdict == NO_CUMPLE
    assert g.criterion(2).verdict == NO_SE_PUEDE
    text = report(g)
    assert "se interrumpió en el paso 3 de 500" in text
    assert "solo hay 3 valores registrados" in text


def test_finished_but_too_short_to_judge(tmp_path):
    g = grade_run(make_run(tmp_path, "ci", metrics=history(3), profile="ci"))
    assert g.criterion(1).verdict == NO_SE_PUEDE
    assert "solo tiene 3 pasos" in report(g)


def test_running_status_is_not_finished(tmp_path):
    g = grade_run(make_run(tmp_path, "running", state=rf.STATE_RUNNING, max_steps=500))
    assert g.criterion(1).verdict == NO_CUMPLE
    assert "sigue en 'running' en el paso 200 de 500" in report(g)


@pytest.mark.parametrize(
    "prefix,expected",
    [("math500-", "no es de GSM8K test"), ("gsm8k-train-", "son problemas de entrenamiento")],
)
def test_evaluation_ids_from_another_data_set(tmp_path, prefix, expected):
    run = make_run(tmp_path, "other", verdicts=paired_verdicts(280, 140, 60, 20), eval_prefix=prefix)
    g = grade_run(run)
    assert g.criterion(3).verdict == NO_SE_PUEDE
    assert expected in report(g)


def test_summary_naming_another_data_set(tmp_path):
    g = grade_run(make_run(tmp_path, "math", verdicts=paired_verdicts(280, 140, 60, 20), dataset="MATH-500"))
    assert g.criterion(3).verdict == NO_SE_PUEDE
    assert "es de otro conjunto de datos" in report(g) and "MATH-500" in report(g)


def test_hand_edited_summary_is_not_trusted(tmp_path):
    run = make_run(tmp_path, "edited", verdicts=paired_verdicts(*NO_GAIN_HOLDOUT))
    summary = json.loads((run / rf.EVAL_SUMMARY).read_text())
    summary.update(trained_accuracy=0.95, mcnemar_p=0.0001)
    dump(run / rf.EVAL_SUMMARY, summary)
    g = grade_run(run)
    assert g.criterion(3).verdict == NO_CUMPLE
    assert "no coincide con los archivos por problema" in report(g)


def test_eval_records_with_bad_verdicts_and_unpaired_ids(tmp_path):
    run = make_run(tmp_path, "partial", verdicts=paired_verdicts(280, 140, 60, 20))
    rows = [json.loads(x) for x in (run / rf.EVAL_TRAINED).read_text().splitlines()]
    rows[0]["correct"] = "sí"
    rf.write_jsonl(run / rf.EVAL_TRAINED, rows[:-10])
    g = grade_run(run)
    assert g.criterion(3).values["n"] == 489
    text = report(g)
    assert "10 problemas aparecen solo en uno de los dos archivos" in text
    assert "1 problema no tiene 'correct' verdadero o falso y se deja fuera" in text


def test_missing_eval_and_empty_metrics(tmp_path):
    run = make_run(tmp_path, "bare")
    corrupt(run / rf.METRICS_JSONL, "")
    g = grade_run(run)
    assert g.criterion(2).verdict == NO_SE_PUEDE
    assert g.criterion(3).verdict == NO_SE_PUEDE
    text = report(g)
    assert "metrics.jsonl está vacío" in text and "falta la carpeta eval/" in text


def test_binary_run_json_and_deeply_nested_summary(tmp_path):
    run = good_run(tmp_path)
    corrupt(run / rf.RUN_JSON, b"\x80\x81\xff garbage")
    corrupt(run / rf.EVAL_SUMMARY, "[" * 100_000)
    g = grade_run(run)
    text = report(g)
    assert "run.json no es texto UTF-8" in text
    assert "anidado a demasiada profundidad" in text
    assert g.criterion(3).verdict == CUMPLE  # recomputed from the per-problem files
    assert g.criterion(4).values["reward_functions"] == list(cr.COURSE_REWARDS)  # from the metrics


def test_symlinked_metrics_are_not_followed(tmp_path):
    elsewhere = good_run(tmp_path / "elsewhere")
    run = good_run(tmp_path, "linked")
    (run / rf.METRICS_JSONL).unlink()
    os.symlink(elsewhere / rf.METRICS_JSONL, run / rf.METRICS_JSONL)
    g = grade_run(run)
    assert g.criterion(2).verdict == NO_SE_PUEDE
    assert "es un enlace simbólico" in report(g)


def test_oversized_file_is_refused(tmp_path, monkeypatch):
    from labs.grading import inputs

    monkeypatch.setattr(inputs, "MAX_JSONL_BYTES", 1000)
    g = grade_run(good_run(tmp_path))
    assert g.criterion(2).verdict == NO_SE_PUEDE
    assert "el límite es 0 MB" in report(g) or "supera el límite" in report(g)


def test_an_empty_folder_grades_without_raising(tmp_path):
    g = grade_run(tmp_path)
    assert g.verdicts[:3] == [NO_SE_PUEDE] * 3
    assert "Traceback" not in report(g)


def test_a_grader_bug_is_reported_not_raised(tmp_path, monkeypatch):
    def broken(data):
        raise KeyError("boom")

    monkeypatch.setattr(cr, "curves", broken)
    g = grade_run(good_run(tmp_path))
    assert g.verdicts == [NO_SE_PUEDE] * 4
    assert "el evaluador falló (KeyError" in report(g)


# ------------------------------------------------------------------------------------ levels and answers


def test_level_4_needs_own_rewards_and_a_comparison_showing_the_hack(tmp_path):
    student = tmp_path / "ana"
    own = {"correctness_reward": 2.0, "format_reward": 0.5, "single_answer_reward": 0.5}
    rows = history(200, extra={"single_answer_reward": (0.1, 0.4)})
    make_run(student, "principal", metrics=rows, rewards=own, verdicts=paired_verdicts(280, 140, 60, 20))
    g3 = grade_submission(student)
    assert g3.own_rewards == ["single_answer_reward"]
    assert g3.level == grade_module.LEVEL_3_MAYBE_4

    e2_run(student)
    g4 = grade_submission(student)
    assert g4.run_dir.name == "principal"
    assert [c.run_dir.name for c in g4.comparisons] == ["e2_solo_formato"]
    assert g4.level == grade_module.LEVEL_4
    assert "e2_solo_formato" in g4.level_reason and "hacking de formato" in g4.level_reason


def test_course_rewards_only_stay_at_level_3_even_with_a_comparison(tmp_path):
    student = tmp_path / "luis"
    good_run(student, "principal")
    e2_run(student)
    assert grade_submission(student).level == grade_module.LEVEL_3


def notebook_json(answers: dict[str, str]) -> dict:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# C2b"}]
    cells += [{"cell_type": "markdown", "metadata": {"tags": [tag]}, "source": text.splitlines(True)} for tag, text in answers.items()]
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_notebook_answers_are_quoted_and_escaped(tmp_path):
    student = tmp_path / "eva"
    good_run(student, "principal")
    answers = {
        "c2b-respuesta-funciones": "correctness_reward paga 2.0 <script>alert(1)</script>\nformat_reward paga 0.5",
        "c2b-respuesta-separacion": f"{cr.PLACEHOLDER}: ...",
    }
    dump(student / submissions.NOTEBOOK_NAME, notebook_json(answers))
    g = grade_submission(student)
    text = report(g)
    assert "> correctness_reward paga 2.0 &lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<script>" not in text
    assert "_(sin respuesta: la celda sigue con el texto de la plantilla" in text  # the placeholder
    assert "_(sin respuesta: no está la celda de la respuesta en el notebook)_" in text  # the missing level-4 answer


@pytest.mark.parametrize("cell", [
    cr.ANSWER_TEMPLATE,
    "tu respuesta.",  # "ESCRIBE AQUÍ" deleted, the rest of the template left
    "Escribe aqui tu respuesta",  # retyped without capitals or accents
    "ESCRIBE AQUÍ\n\n**tu respuesta**\n\n---",
    "  \n\n",
])
def test_a_template_only_partly_replaced_is_not_counted_as_an_answer(tmp_path, cell):
    """Issue 35, item 4: what the self-check counts by itself (answers written, the CSV's respuestas_escritas) cannot be
    fooled by leaving the template, or part of it, in the cell; nothing counts words."""
    student = tmp_path / "eva"
    good_run(student, "principal")
    own = "Paga 2.0 por el número correcto: ESCRIBE AQUÍ"  # the marker left beside a real answer does not hide it
    dump(student / submissions.NOTEBOOK_NAME, notebook_json({"c2b-respuesta-funciones": own,
                                                             "c2b-respuesta-separacion": cell}))
    g = grade_submission(student)
    answers = g.criteria[3].values["answers"]
    assert answers["c2b-respuesta-funciones"].text == "Paga 2.0 por el número correcto:"
    assert not answers["c2b-respuesta-separacion"] and answers["c2b-respuesta-separacion"].status == written.TEMPLATE
    out = tmp_path / "out"
    grade_module_csv = report_module.csv_row(g, "eva", None, out)
    assert grade_module_csv["respuestas_escritas"] == 1
    text = report(g)
    assert "> Paga 2.0 por el número correcto:" in text and text.count("la celda sigue con el texto de la plantilla") == 1


# ------------------------------------------------------------------------------------ zips and a class


def zip_folder(folder: Path, target: Path, prefix: str = "") -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in folder.rglob("*"):
            if path.is_file():
                archive.write(path, prefix + str(path.relative_to(folder)))
    return target


def test_class_with_folders_zips_and_broken_entries(tmp_path):
    klass = tmp_path / "clase"
    good_run(klass / "ana", "run1")
    good_run(tmp_path / "src_bea", "run1")
    zip_folder(tmp_path / "src_bea", klass / "bea.zip", prefix="entrega/anidada/")
    corrupt(klass / "carl.zip", b"PK\x03\x04 esto no es un zip")
    with zipfile.ZipFile(klass / "dani.zip", "w") as archive:
        archive.writestr("../../evil.json", "{}")
        archive.writestr("/tmp/absolute_evil.json", "{}")
        archive.writestr("run/run.json", "{}")
        archive.writestr("run/model/adapter.safetensors", b"\x00" * 10)
        archive.writestr("run/pesos.pkl", b"\x80\x04")
        link = zipfile.ZipInfo("run/link.json")
        link.external_attr = (0o120777 << 16)
        archive.writestr(link, "/etc/passwd")
    (klass / "eli").mkdir()
    corrupt(klass / "notas.txt", "no es una entrega")
    out = tmp_path / "notas"
    before = files_outside(tmp_path, out)

    grades = grade_class(klass, out)

    assert files_outside(tmp_path, out) == before  # nothing written outside the output folder
    assert not Path("/tmp/absolute_evil.json").exists()
    by_name = {g.name: g for g in grades}
    assert sorted(by_name) == ["ana", "bea", "carl", "dani", "eli"]
    assert by_name["ana"].verdicts == by_name["bea"].verdicts == [CUMPLE, CUMPLE, CUMPLE, MANUAL]
    assert any("dañado" in p for p in by_name["carl"].problems)
    dani = " ".join(by_name["dani"].problems)
    assert "ruta no es segura" in dani and "enlace simbólico" in dani and ".pkl" in dani and ".safetensors" in dani
    assert not (out / "_entregas" / "dani" / "run" / "pesos.pkl").exists()
    assert "ninguna carpeta de ejecución" in report(by_name["eli"])

    rows = read_csv_rows(out / "resumen.csv")
    assert [r["alumno"] for r in rows] == ["ana", "bea", "carl", "dani", "eli"]
    assert rows[0]["criterio_3_holdout"] == CUMPLE and rows[0]["nivel_sugerido"] == "nivel 3"
    assert "dañado" in rows[2]["motivos"]
    for r in rows:
        assert (out / r["informe"]).is_file()
    assert (out / "ana" / "figuras" / "curvas.png").read_bytes().startswith(b"\x89PNG")
    assert "notas.txt" in (out / "informe_clase.md").read_text()


def test_zip_member_over_the_limit_is_skipped(tmp_path, monkeypatch):
    monkeypatch.setitem(submissions.ZIP_SUFFIXES, ".jsonl", 10_000)
    run = good_run(tmp_path / "src")
    target = zip_folder(run, tmp_path / "big.zip")
    problems = submissions.unpack_zip(target, tmp_path / "out" / "big")
    assert any("metrics.jsonl" in p and "ocupa demasiado" in p for p in problems)
    assert not (tmp_path / "out" / "big" / rf.METRICS_JSONL).exists()
    assert (tmp_path / "out" / "big" / rf.RUN_JSON).exists()


def test_output_folder_inside_the_class_folder_is_not_a_student(tmp_path):
    klass = tmp_path / "clase"
    good_run(klass / "ana", "run1")
    grades = grade_class(klass, klass / "notas")
    assert [g.name for g in grades] == ["ana"]
    assert [g.name for g in grade_class(klass, klass / "notas")] == ["ana"]  # a second pass too


def test_csv_cells_cannot_become_formulas(tmp_path):
    klass = tmp_path / "clase"
    good_run(klass / "=HYPERLINK(1)", "run1")
    grade_class(klass, tmp_path / "out")
    row = read_csv_rows(tmp_path / "out" / "resumen.csv")[0]
    assert row["alumno"] == "'=HYPERLINK(1)"


# ------------------------------------------------------------------------------------ front doors


def test_main_on_a_run_folder_writes_report_figures_and_csv(tmp_path, capsys):
    run = good_run(tmp_path / "runs")
    out = tmp_path / "out"
    assert main([str(run), "--out", str(out)]) == 0
    text = (out / "informe.md").read_text()
    assert "![" in text and (out / "figuras" / "curvas.png").is_file() and (out / "figuras" / "holdout.png").is_file()
    assert read_csv_rows(out / "resumen.csv")[0]["criterio_1_estable"] == CUMPLE
    assert "nivel 3" in capsys.readouterr().out


def test_main_on_a_missing_path(tmp_path, capsys):
    assert main([str(tmp_path / "nada"), "--out", str(tmp_path / "out")]) == 2
    assert "No existe" in capsys.readouterr().err


def test_module_runs_as_a_command(tmp_path):
    import subprocess

    run = make_run(tmp_path, "cmd", metrics=history(20), verdicts=paired_verdicts(*SMALL_HOLDOUT))
    result = subprocess.run(
        [sys.executable, "-m", "labs.grading", str(run), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "no se puede determinar" in result.stdout


def test_find_or_make_run(tmp_path, monkeypatch):
    import importlib.util

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    if importlib.util.find_spec("labs.l71") is None:  # until the L7.1 recipe lands
        with pytest.raises(RuntimeError, match="L7.1"):
            selfcheck.find_or_make_run()

    made = tmp_path / "from_l71"
    fake = types.ModuleType("labs.l71")
    calls = []
    fake.run_lab = lambda profile=None, run_name=None: calls.append(profile) or made
    monkeypatch.setitem(sys.modules, "labs.l71", fake)
    import labs

    monkeypatch.setattr(labs, "l71", fake, raising=False)
    with pytest.raises(RuntimeError, match="ENTRENAR_AQUI = True") as err:  # issue 52: C2b's Run All trained L7.1
        selfcheck.find_or_make_run(profile="ci")
    assert "python -m labs l71" in str(err.value) and "minutos" in str(err.value) and calls == []
    assert selfcheck.find_or_make_run(profile="ci", entrenar_aqui=True) == made and calls == ["ci"]

    old = make_run(tmp_path, "old", metrics=history(20))
    new = make_run(tmp_path, "new", metrics=history(20))
    make_run(tmp_path, "still_running", metrics=history(20), state=rf.STATE_RUNNING)
    os.utime(old / rf.STATUS_JSON, (1, 1))
    status = json.loads((old / rf.STATUS_JSON).read_text())
    dump(old / rf.STATUS_JSON, status | {"updated": "2000-01-01T00:00:00+00:00"})
    assert selfcheck.find_or_make_run() == new
    assert selfcheck.find_or_make_run(old) == old
    with pytest.raises(FileNotFoundError):
        selfcheck.find_or_make_run(tmp_path / "nada")


def test_self_check_writes_under_the_runs_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    run = good_run(tmp_path, "mine")
    grade, path = selfcheck.self_check(run)
    assert path == tmp_path / selfcheck.SELFCHECK_DIR / "mine" / "informe.md" and path.is_file()
    assert grade.verdicts[:3] == [CUMPLE] * 3
    assert selfcheck.newest_finished_run() == run  # the self-check folder is never taken for a run


def test_student_curves_are_copied_only_if_they_are_png(tmp_path):
    from labs.grading import write_report
    from labs.grading.inputs import PNG_SIGNATURE

    run = good_run(tmp_path / "runs")
    (run / rf.CURVES_DIR).mkdir()
    (run / rf.CURVES_DIR / "reward.png").write_bytes(PNG_SIGNATURE + b"rest of an image")
    (run / rf.CURVES_DIR / "fake.png").write_bytes(b"#!/bin/sh\necho not an image")
    g = grade_run(run)
    text = write_report(g, tmp_path / "out").read_text()
    assert (tmp_path / "out" / "figuras" / "alumno" / "reward.png").is_file()
    assert not (tmp_path / "out" / "figuras" / "alumno" / "fake.png").exists()
    assert "No se copia la figura fake.png porque no es un PNG válido." in text


def test_rubric_notebook_and_grader_agree_on_the_answer_cells():
    nb = json.loads((Path(__file__).resolve().parent.parent / "sources" / submissions.NOTEBOOK_NAME).read_text())
    tags = {t for c in nb["cells"] for t in c.get("metadata", {}).get("tags", [])}
    assert set(cr.ANSWER_TAGS) <= tags
    assert all(v.status == written.TEMPLATE for v in cr.notebook_answers(nb).values())  # the template counts as unanswered
    answer_cells = [c for c in nb["cells"] if set(cr.ANSWER_TAGS) & set(c.get("metadata", {}).get("tags", []))]
    assert ["".join(c["source"]) for c in answer_cells] == [cr.ANSWER_TEMPLATE] * len(cr.ANSWER_TAGS)
    assert outputs_only_in_checked_cells(nb["cells"])


@pytest.mark.parametrize(
    "run_json,expected",
    [
        ({"reward_functions": ["correctness_reward", "format_reward"]}, [("correctness_reward", None), ("format_reward", None)]),
        ({"reward_functions": [{"name": "a", "weight": 2}, {"name": "b"}]}, [("a", 2.0), ("b", None)]),
        ({"grpo_config": {"reward_funcs": {"a": 0.5}}}, [("a", 0.5)]),
        ({"reward_functions": ["a", "b"], "grpo_config": {"reward_weights": [1.0, 0.2]}}, [("a", 1.0), ("b", 0.2)]),
        ({"reward_functions": [3, None, {"weight": 1}, "  "]}, []),
        (None, []),
    ],
)
def test_reward_functions_read_from_every_run_json_shape(run_json, expected):
    from labs.grading.inputs import reward_functions

    assert reward_functions(run_json) == expected


def test_the_self_check_grades_the_main_run_by_the_graders_rule_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    main = make_run(tmp_path, "l71-rtx5090", metrics=history(30), max_steps=30)
    e2_run(tmp_path, "e2-rtx5090-solo-formato")  # newer, no correctness reward
    make_run(tmp_path, "e3-rtx5090-beta0", metrics=history(20), max_steps=20)  # newer, fewer steps
    make_run(tmp_path, "l71-rtx5090-20260101", metrics=history(40), max_steps=60, state=rf.STATE_RUNNING, step=40)
    said = []
    assert selfcheck.find_or_make_run(echo=said.append) == main
    why = said[0]
    assert why.startswith("Evalúo l71-rtx5090: es la que el evaluador tomaría como principal entre 3 ejecuciones terminadas")
    assert "e2-rtx5090-solo-formato (no tiene recompensa de corrección)" in why
    assert "e3-rtx5090-beta0 (pide 20 pasos frente a 30)" in why
    assert "Sin terminar (no se evalúan): l71-rtx5090-20260101" in why
    # the grader, given the same folders as a submission, takes the same main run
    assert grade_submission(tmp_path).data.root == main
    only = tmp_path / "one"
    make_run(only, "solo", metrics=history(12), max_steps=12)
    path, why = selfcheck.choose_run(only)
    assert path == only / "solo" and "entre 1 ejecución terminada de" in why


def test_the_notebook_shows_the_reports_summary_and_folds_each_criterions_evidence(tmp_path, monkeypatch):
    """Issue 52: C2b displayed the whole report, 101 lines to scroll. The summary (level, one row per criterion) shows;
    the criteria's sections are folded under one line, and the file keeps everything."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    run = make_run(tmp_path, "l71-ci", metrics=history(20), profile="ci")
    _, report = selfcheck.self_check(run)
    InteractiveShell.instance()  # display() publishes rich outputs only under a shell, as in the notebook's kernel
    try:
        with capture_output() as shown:
            selfcheck.show_report(report)
    finally:
        InteractiveShell.clear_instance()
    markdown = [o.data["text/markdown"] for o in shown.outputs if "text/markdown" in o.data]
    folded = [o.data for o in shown.outputs if "<details>" in o.data.get("text/html", "")]
    assert len(markdown) == 1 and "Nivel sugerido" in markdown[0] and "| 1 |" in markdown[0]
    assert "## Criterio 1" not in markdown[0] and len(markdown[0].splitlines()) < 30
    assert len(folded) == 1 and "Criterio 1" in folded[0]["text/html"] and len(folded[0]["text/plain"].splitlines()) == 1
