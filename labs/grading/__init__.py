"""The C2b grader: checkpoint C2b(a) of lesson 7, graded from what runs left on disk.

From a terminal::

    python -m labs.grading runs/<run_name> --out notas/            # one run folder
    python -m labs.grading entregas/ --out notas/                  # one folder or .zip per student
    python -m labs.grading entregas/ana.zip --out notas/ana        # one student's submission

From a notebook: ``grade_run(run_dir) -> RunGrade``, ``write_report(grade, out_dir)``,
``grade_class(class_dir, out_dir)``, and for the students' self-check ``find_or_make_run()``,
``self_check(run_dir)``, ``grade_runs()`` and ``show_report(path)``; ``level4_evidence`` is the level-4 rule
they all share, and ``choose_main`` the rule for the main run (L7.1's; L7.2, the sweeps and E4 are comparisons).

It reads only the run-folder layout of ``labs.core.runfolder`` (JSON, JSON lines, PNG), never executes or
unpickles anything submitted, writes only under the output folder, and turns every unreadable input
into a Spanish "no se puede evaluar X porque Y" in the report. The criteria, thresholds and their
justification are in ``RUBRIC.md`` beside this file.

Modules: ``inputs`` (safe reading), ``submissions`` (class folders and zips), ``holdout`` (pairing the
evaluation), ``criteria`` (the four criteria), ``main_run`` (the main run: L7.1's own, or none), ``grade`` (a run
or submission, level), ``figures``,
``report`` (Markdown, CSV), ``cli`` (front doors), ``selfcheck`` (the rubric notebook's helpers), ``written`` (the
student's written answers and E1-E3's predictions, told apart from the template).
"""

from .cli import grade_class, grade_one, main
from .criteria import CUMPLE, MANUAL, NO_CUMPLE, NO_SE_PUEDE, Criterion
from .grade import (MAIN_LAB, Level4Evidence, RunGrade, choose_main, grade_run, grade_submission, level4_evidence,
                    level4_lines)
from .report import write_report
from .selfcheck import choose_run, find_or_make_run, grade_runs, newest_finished_run, other_runs, self_check, show_report

__all__ = [
    "CUMPLE",
    "MAIN_LAB",
    "MANUAL",
    "NO_CUMPLE",
    "NO_SE_PUEDE",
    "Criterion",
    "Level4Evidence",
    "RunGrade",
    "choose_main",
    "choose_run",
    "find_or_make_run",
    "grade_class",
    "grade_one",
    "grade_runs",
    "grade_run",
    "grade_submission",
    "level4_evidence",
    "level4_lines",
    "main",
    "newest_finished_run",
    "other_runs",
    "self_check",
    "show_report",
    "write_report",
]
