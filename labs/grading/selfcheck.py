"""The student's self-check from the rubric notebook: find (or produce) a run, grade it, show the report."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from labs.core import runfolder as rf
from labs.core.paths import runs_dir

from .grade import RunGrade, grade_run
from .report import write_report

SELFCHECK_DIR = "_c2b_autoevaluacion"  # under runs_dir(); its name starts with "_" so it is never a run


def newest_finished_run(root: Path | None = None) -> Path | None:
    """The most recently updated finished run folder directly under ``root`` (default: runs_dir())."""
    root = Path(root) if root is not None else runs_dir()
    if not root.is_dir():
        return None
    finished = []
    for child in root.iterdir():
        if child.name.startswith(("_", ".")) or child.is_symlink() or not child.is_dir():
            continue
        folder = rf.RunFolder(child)
        if folder.is_finished():
            status = folder.status() or {}
            finished.append((str(status.get("updated") or ""), (child / rf.STATUS_JSON).stat().st_mtime, child))
    return max(finished)[2] if finished else None


def find_or_make_run(run_dir: str | Path | None = None, profile: str | None = None) -> Path:
    """The run folder to grade: ``run_dir`` if given, else the newest finished run, else a new L7.1 run.

    The last step calls ``labs.l71.run_lab(profile=profile)``, which trains with the L7.1 recipe and returns
    the run folder (minutes on the ``ci``/``cpu`` profiles, hours on ``rtx5090``).
    """
    if run_dir is not None:
        path = Path(run_dir)
        if not (path / rf.RUN_JSON).exists() and not (path / rf.METRICS_JSONL).exists():
            raise FileNotFoundError(f"{path} no parece una carpeta de ejecución: no tiene {rf.RUN_JSON} ni {rf.METRICS_JSONL}.")
        return path
    found = newest_finished_run()
    if found is not None:
        return found
    try:
        l71 = importlib.import_module("labs.l71")
    except ModuleNotFoundError as exc:
        if exc.name != "labs.l71":  # labs.l71 exists but something it imports is missing: say that
            raise
        raise RuntimeError(
            f"No hay ninguna ejecución terminada en {runs_dir()} y el laboratorio L7.1 (labs.l71) no está disponible "
            "en esta copia del curso. Ejecuta primero el notebook del L7.1 o indica la carpeta de tu ejecución."
        ) from None
    return Path(l71.run_lab(profile=profile))


def self_check(run_dir: str | Path, comparisons=(), out_dir: str | Path | None = None) -> tuple[RunGrade, Path]:
    """Grade the student's run (and comparison runs, for level 4) as the instructor will.

    The report goes to ``runs_dir()/_c2b_autoevaluacion/<run>`` unless ``out_dir`` says otherwise;
    returns (grade, report path).
    """
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else runs_dir() / SELFCHECK_DIR / run_dir.name
    grade = grade_run(run_dir, comparisons=[Path(c) for c in comparisons])
    return grade, write_report(grade, out_dir)


def show_report(report: str | Path) -> None:
    """Display a report in a notebook: the Markdown, then its figures (inline images need real files)."""
    from IPython.display import Image, Markdown, display

    report = Path(report)
    text = report.read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    display(Markdown(re.sub(r"!\[[^\]]*\]\([^)]+\)", "", text)))
    for rel in images:
        path = report.parent / rel
        if path.is_file():
            display(Image(filename=str(path)))
