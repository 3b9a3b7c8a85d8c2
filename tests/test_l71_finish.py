"""The run's own report grades the finished run: ``labs.l71.lab.finish`` marks the run finished first.

The run folder is written by the test helpers with TRL-shaped metrics of a clean 20-step run (status still
"running", as training leaves it), then closed by the lab's real ``finish``: curves, what to watch, the
C2b report in ``<run>/grading/informe.md``.
"""

import re

from labs.core import runfolder as rf
from labs.core.profiles import get_profile
from labs.grading import cli as grading_cli
from labs.l71 import lab as l71_lab
from labs.training import curves

from rundirs import GOOD_HOLDOUT, history, make_run, paired_verdicts

STEPS = 20


def criterion_1(report_text: str) -> str:
    match = re.search(r"^## Criterio 1: Entrenamiento estable \(([^)]*)\)", report_text, re.M)
    assert match, report_text[:2000]
    return match.group(1)


def trained_run(tmp_path):
    root = make_run(
        tmp_path, "l71-cpu", metrics=history(STEPS), max_steps=STEPS, state=rf.STATE_RUNNING,
        verdicts=paired_verdicts(*GOOD_HOLDOUT), profile="cpu",
    )
    return rf.RunFolder(root), get_profile("cpu", max_steps=STEPS)


def test_the_report_of_a_cleanly_finished_run_meets_criterion_1(tmp_path, capsys):
    run, profile = trained_run(tmp_path)
    l71_lab.finish(run, profile, STEPS)
    status = run.status()
    assert status["state"] == rf.STATE_FINISHED and status["step"] == STEPS == status["max_steps"]
    report = run.root / curves.GRADING_DIR / "informe.md"
    text = report.read_text(encoding="utf-8")
    assert criterion_1(text) == "cumple"
    assert "sigue en 'running'" not in text
    assert f"Informe de evaluación C2b: {report}" in capsys.readouterr().out


def test_a_crash_while_grading_leaves_a_finished_run_whose_report_can_be_written_again(tmp_path, monkeypatch, capsys):
    run, profile = trained_run(tmp_path)

    def broken_grader(_run):
        raise OSError("disco lleno")

    monkeypatch.setattr(curves, "grade", broken_grader)
    l71_lab.finish(run, profile, STEPS)
    out = capsys.readouterr().out
    assert run.is_finished()
    assert "no se pudo escribir el informe C2b (OSError: disco lleno)" in out
    assert f"python -m labs grade {run.root}" in out
    monkeypatch.undo()
    grading_dir = run.root / curves.GRADING_DIR
    assert grading_cli.main([str(run.root), "--out", str(grading_dir)]) == 0
    assert criterion_1((grading_dir / "informe.md").read_text(encoding="utf-8")) == "cumple"


def test_a_finished_run_without_its_report_gets_it_when_the_lab_is_run_again(tmp_path, capsys):
    run, profile = trained_run(tmp_path)
    run.write_status(rf.STATE_FINISHED, STEPS, STEPS)
    l71_lab.write_missing_report(run)
    report = run.root / curves.GRADING_DIR / "informe.md"
    assert criterion_1(report.read_text(encoding="utf-8")) == "cumple"
    assert "(faltaba)" in capsys.readouterr().out
    l71_lab.write_missing_report(run)  # already there: nothing written, nothing said
    assert capsys.readouterr().out == ""
