"""C2b's main run is the student's L7.1 run, or none (issue 51, item 4).

Never a rehearsal's run (``runs/rehearsal-<gpu>/l71``: a finished 3-step L7.1 run with the correctness reward), never
L7.2's (``l72-*``, lab L7.2), never an exercise's. With no L7.1 run, or an unfinished one, the grader and the C2b
self-check say so with the same sentence and the command that trains it. Synthetic run folders: nothing trains.
"""

from __future__ import annotations

import pytest
from rundirs import good_run, history, make_run

from labs.core import runfolder as rf
from labs.grading import grade_submission, selfcheck
from labs.grading import main_run


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    monkeypatch.setenv("COURSE_PROFILE", "rtx5090")
    return tmp_path


def rehearsal(runs, tag="rtx5090", *, marked=True):
    """The rehearsal's L7.1 part as it leaves its folder: finished, 3 steps, lab L7.1, the correctness reward, and
    (``marked``) its run.json's ``purpose`` as ``labs.rehearsal.parts`` records it; unmarked: a run from before that."""
    folder = runs / f"rehearsal-{tag}"
    run = good_run(folder, "l71", metrics=history(3), max_steps=3)
    if marked:
        rf.mark_purpose(rf.RunFolder(run), rf.PURPOSE_REHEARSAL)
    (folder / main_run.REHEARSAL_JSON).write_text("{}")
    return run


def test_an_unfinished_main_run_beside_a_finished_rehearsal_is_said_the_same_way_by_both(runs):
    rehearsed = rehearsal(runs)
    main = make_run(runs, "l71-rtx5090", metrics=history(20), max_steps=500, state=rf.STATE_RUNNING, step=20)
    graded = grade_submission(runs)
    assert graded.data.root == main and rehearsed not in [c.data.root for c in [graded]]
    sentence = main_run.missing_es(graded.data)
    assert sentence.startswith("La ejecución del L7.1 l71-rtx5090 no ha terminado (20 de 500 pasos)")
    assert "python -m labs l71" in sentence and sentence in graded.main_why
    assert "l71 (es del ensayo: una comparación)" in graded.main_why
    found, why = selfcheck.choose_run()
    assert found is None and sentence in why
    with pytest.raises(RuntimeError, match="python -m labs l71"):
        selfcheck.find_or_make_run(echo=lambda _: None)


@pytest.mark.parametrize("l72_name", ["l72-rtx5090", "l72-ci"])
def test_a_submission_whose_only_finished_run_is_l72s_has_no_main_run(runs, l72_name):
    l72 = good_run(runs, l72_name, metrics=history(500, seed=1), lab="L7.2")
    graded = grade_submission(runs)
    sentence = main_run.missing_es(None)
    assert sentence.startswith("No hay ninguna ejecución del L7.1") and "python -m labs l71" in sentence
    assert graded.data.root != l72 and sentence in graded.main_why
    assert f"{l72_name} (no es del L7.1: es una comparación)" in graded.main_why
    assert [c.data.root for c in graded.comparisons] == [l72]
    assert all(sentence in r for c in graded.criteria[:3] for r in c.reasons), [c.reasons for c in graded.criteria]
    assert "Se evalúa l72" not in graded.main_why
    found, why = selfcheck.choose_run()
    assert found is None and why.startswith(sentence)


def test_a_rehearsal_alone_is_no_main_run(runs):
    rehearsal(runs)
    graded = grade_submission(runs)
    assert graded.data.root == runs and main_run.missing_es(None) in graded.main_why


@pytest.mark.parametrize("moved_to", ["l71-rtx5090", "copias/l71"])
def test_a_rehearsal_run_moved_elsewhere_in_runs_is_still_not_graded(runs, moved_to):
    """The rehearsal's run is recognised by its record, not only by its folder: copied or renamed out of
    ``rehearsal-<gpu>/`` (here to L7.1's own folder name), it is still a comparison, never the main run. Before the
    rehearsal recorded ``purpose`` in run.json, the folder rule alone graded the moved run as the student's L7.1."""
    import shutil

    moved = runs / moved_to
    moved.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(rehearsal(runs)), moved)
    shutil.rmtree(runs / "rehearsal-rtx5090")
    graded = grade_submission(runs)
    assert graded.data.root == runs and main_run.missing_es(None) in graded.main_why
    assert f"{moved.name} (es del ensayo: una comparación)" in graded.main_why
    found, why = selfcheck.choose_run()
    assert found is None and why.startswith(main_run.missing_es(None))


def test_a_rehearsal_run_from_before_the_record_is_still_known_by_its_folder(runs):
    rehearsal(runs, marked=False)
    graded = grade_submission(runs)
    assert graded.data.root == runs and "l71 (es del ensayo: una comparación)" in graded.main_why


def test_the_l71_run_beats_a_newer_exercise_run_and_a_rehearsal(runs):
    rehearsal(runs)
    main = good_run(runs, "l71-rtx5090", metrics=history(30), max_steps=30)
    e4 = good_run(runs, "e4-rtx5090", metrics=history(60), max_steps=60, lab="E4")
    graded = grade_submission(runs)
    assert graded.data.root == main and main_run.missing_es(graded.data) is None
    assert "e4-rtx5090 (no es del L7.1: es una comparación)" in graded.main_why
    found, _ = selfcheck.choose_run()
    assert found == main and e4 != main
