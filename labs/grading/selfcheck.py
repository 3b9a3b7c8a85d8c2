"""The student's self-check from the rubric notebook: find a run, grade it as the instructor will, show the report.

The self-check grades the same pool the instructor's grader does: the main run by the grader's rule
(``choose_run``) and every other run folder beside it, where the level-4 evidence is also looked for
(``grade.level4_evidence``). Training is never started from here on a GPU profile unless asked
(``entrenar_aqui``): without a finished run the notebook gets the terminal command.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from labs.core import runfolder as rf
from labs.core.paths import runs_dir

from labs.core.spanish import plural

from .grade import RunGrade, grade_run
from .main_run import choose_main, is_finished, missing_es
from .inputs import load_run
from .report import write_report
from .submissions import exercise_predictions, find_notebooks, read_notebook, rubric_notebook

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


def _run_folders(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        child for child in root.iterdir()
        if not child.name.startswith(("_", ".")) and not child.is_symlink() and child.is_dir()
        and ((child / rf.RUN_JSON).exists() or (child / rf.STATUS_JSON).exists())
    )


def choose_run(root: Path | None = None) -> tuple[Path | None, str]:
    """The run the instructor's grader would take as the main one among the run folders under ``root``.

    The rule is the grader's own (``main_run.choose_main``): the student's own L7.1 run, never L7.2's, an
    exercise's or a rehearsal's. Only a finished one is graded here: with none, or with an unfinished one, the
    answer is None and why says so as the grader does (``main_run.missing_es``), with the command.
    Returns (run folder or None, why, in Spanish).
    """
    root = Path(root) if root is not None else runs_dir()
    folders = _run_folders(root)
    unfinished = [f.name for f in folders if not rf.RunFolder(f).is_finished()]
    pending = (
        f" Sin terminar (no se evalúan): {', '.join(unfinished)}; termínalas en una terminal con el mismo comando que las empezó."
        if unfinished else ""
    )
    runs = [load_run(f) for f in folders]
    main, _, why = choose_main(runs)
    if main is None or missing_es(main):
        return None, why
    finished = [d for d in runs if is_finished(d)]
    why = (f"Evalúo {main.root.name}: es la que el evaluador tomaría como principal entre "
           f"{plural(len(finished), 'ejecución terminada', 'ejecuciones terminadas')} de {root}. {why}")
    return main.root, why + pending


def other_runs(run_dir: Path) -> list[Path]:
    """The run folders beside ``run_dir``: the rest of the submission, where the level-4 evidence is also looked for."""
    run_dir = Path(run_dir)
    return [f for f in _run_folders(run_dir.parent) if f.resolve() != run_dir.resolve()]


def grade_runs(root: Path | None = None) -> RunGrade | None:
    """What the instructor's grader says of the runs under ``root`` (default ``runs_dir()``): the main run by
    the grader's rule, every other run folder as a comparison. None when no run has finished."""
    main, why = choose_run(root)
    if main is None:
        return None
    grade = grade_run(main, comparisons=other_runs(main))
    grade.main_why = why
    return grade


def find_or_make_run(run_dir: str | Path | None = None, profile: str | None = None, echo=print,
                     entrenar_aqui: bool = False) -> Path:
    """The run folder to grade: ``run_dir`` if given, else the main run by the grader's rule, else an L7.1 run.

    ``choose_run`` picks among the finished runs and ``echo`` prints which one and why. With no finished run,
    the L7.1 recipe trains here (``labs.l71.run_lab``) only with ``entrenar_aqui``; without it it raises
    ``RuntimeError`` with the exact terminal command (a CPU profile's says it takes minutes), as the L7.1 notebook
    does (``labs.l71.notebook.open_run``). A Run All of C2b trains nothing (issue 52).
    """
    if run_dir is not None:
        path = Path(run_dir)
        if not (path / rf.RUN_JSON).exists() and not (path / rf.METRICS_JSONL).exists():
            raise FileNotFoundError(f"{path} no parece una carpeta de ejecución: no tiene {rf.RUN_JSON} ni {rf.METRICS_JSONL}.")
        echo(f"Evalúo {path}: es la carpeta que indicaste.")
        return path
    found, why = choose_run()
    echo(why)
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
    from labs.core.profiles import get_profile, student_command

    chosen = get_profile(profile)
    command = student_command("l71", chosen)  # the L7.1 notebook's terminal command (same run folder)
    if not entrenar_aqui and chosen.use_cpu:  # minutes, but only when asked (issue 52: Run All trained)
        raise RuntimeError(
            f"No hay ninguna ejecución terminada que evaluar. En CPU la receta del L7.1 tarda minutos: lánzala en una "
            f"terminal, desde la carpeta del curso ({command}), o pon ENTRENAR_AQUI = True en esta celda y vuelve a "
            "ejecutarla. Sin tus ejercicios del L7.1 guardados, entrena las recompensas y los ajustes del curso."
        )
    if not entrenar_aqui:
        raise RuntimeError(
            f"No hay ninguna ejecución del L7.1 terminada que evaluar. Entrena la receta del L7.1 en una terminal, desde la carpeta "
            f"del curso: {command}\nCuando termine, vuelve a ejecutar esta celda: solo lee la carpeta. (Para entrenar "
            "aquí, pon ENTRENAR_AQUI = True; son horas en la GPU, atadas a esta pestaña del navegador.)"
        )
    echo(f"Entreno aquí la receta del L7.1 con el perfil '{chosen.name}' (es lo mismo que {command}).")
    return Path(l71.run_lab(profile=chosen.name))


def self_check(run_dir: str | Path, comparisons=None, out_dir: str | Path | None = None,
               notebooks_dir: str | Path | None = None) -> tuple[RunGrade, Path]:
    """Grade the student's run as the instructor will, and write the report.

    ``comparisons``: the other runs (default: every run folder beside ``run_dir``, as the grader takes a
    submission's other runs). ``notebooks_dir``: where the student's notebooks are saved (the rubric's
    answers and the E1-E3 predictions go into the report). The report goes to
    ``runs_dir()/_c2b_autoevaluacion/<run>`` unless ``out_dir`` says otherwise; returns (grade, report path).
    """
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else runs_dir() / SELFCHECK_DIR / run_dir.name
    comparisons = other_runs(run_dir) if comparisons is None else [Path(c) for c in comparisons]
    notebooks = find_notebooks(Path(notebooks_dir)) if notebooks_dir is not None else []
    rubric = rubric_notebook(notebooks)
    grade = grade_run(run_dir, comparisons=comparisons, notebook=read_notebook(rubric) if rubric else None)
    main, _, why = choose_main([grade.data] + [c.data for c in grade.comparisons])
    grade.main_why = why if main is grade.data else (
        f"Se evalúa {run_dir.name} porque es la carpeta indicada, pero el evaluador del instructor tomaría como principal "
        + (f"{main.root.name}. " if main is not None else "ninguna. ") + why)
    grade.predictions = exercise_predictions(notebooks)
    return grade, write_report(grade, out_dir)


def show_report(report: str | Path) -> None:
    """Display a report in a notebook: the Markdown, then its figures (inline images need real files)."""
    from IPython.display import Image, Markdown, display

    from labs.core.folded import Folded

    report = Path(report)
    text = report.read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]+\)", "", text)
    # The summary (suggested level, one row per criterion) shows; each criterion's evidence is folded under it
    # (issue 52: the whole report was a 101-line scroll). The file holds all of it.
    head, section, rest = text.partition("\n## ")
    display(Markdown(head))
    if section:
        detail = "## " + rest
        display(Folded(f"Cada criterio con su umbral y su evidencia ({len(detail.splitlines())} líneas, también en "
                       f"{report}): pulsa para desplegarlo", detail))
    for rel in images:
        path = report.parent / rel
        if path.is_file():
            display(Image(filename=str(path)))
