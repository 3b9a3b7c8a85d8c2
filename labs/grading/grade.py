"""Grade one run, or one student's submission: the four criteria, "what to watch", a level suggestion.

Level rule (a suggestion; criterion 4 is always checked by the instructor):

- any of criteria 1-3 "no cumple" -> "por debajo del nivel 3";
- any of criteria 1-3 "no se puede determinar" -> no suggestion (the report says what is missing);
- criteria 1-3 met -> "nivel 3"; it becomes "nivel 4" when the run uses reward functions beyond the
  course's three (``COURSE_REWARDS``) *and* the submission holds evidence that a named hack was
  prevented: a comparison run where the format-hacking detector fires while the main run is clean
  (an E2-style comparison). Own functions without that evidence -> "nivel 3 (posible nivel 4)".
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from pathlib import Path

from labs.core import diagnostics as dg
from labs.core import runfolder as rf

from . import criteria as cr
from .holdout import check_holdout
from .inputs import Problem, RunData, find_value, load_run
from .submissions import find_notebooks, find_run_folders, read_notebook

LEVEL_4 = "nivel 4"
LEVEL_3 = "nivel 3"
LEVEL_3_MAYBE_4 = "nivel 3 (posible nivel 4)"
BELOW_3 = "por debajo del nivel 3"
NO_LEVEL = "sin sugerencia"


@dataclass
class RunGrade:
    name: str
    run_dir: Path
    data: RunData
    criteria: list[cr.Criterion]
    findings: list[dg.Finding] = field(default_factory=list)
    hacking: dg.Finding | None = None
    holdout: dict | None = None  # labs.core.stats.paired_comparison recomputed from eval/*.jsonl
    own_rewards: list[str] = field(default_factory=list)
    comparisons: list["RunGrade"] = field(default_factory=list)
    level: str = NO_LEVEL
    level_reason: str = ""
    problems: list[str] = field(default_factory=list)  # about the submission as a whole

    @property
    def verdicts(self) -> list[str]:
        return [c.verdict for c in self.criteria]

    def criterion(self, number: int) -> cr.Criterion:
        return self.criteria[number - 1]


def _failed_grade(name: str, run_dir: Path, exc: BaseException) -> RunGrade:
    """What the report shows if the grader itself breaks on a submission: never a traceback."""
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    text = (
        f"No se puede evaluar esta entrega porque el evaluador falló ({type(exc).__name__}"
        + (f" en {Path(where.filename).name}:{where.lineno}" if where else "")
        + "). Avisa al equipo del curso."
    )
    crit = [cr.Criterion(i, t, cr.NO_SE_PUEDE, "", reasons=[text]) for i, t in enumerate(
        ("Entrenamiento estable", "Recompensa y longitud media suben", "Mejora en el holdout", "Explicaciones"), start=1)]
    return RunGrade(name, run_dir, RunData(root=run_dir), crit, level_reason=text, problems=[text])


def _evaluate(data: RunData, notebook: dict | None) -> RunGrade:
    checked = check_holdout(data)
    criteria = [cr.stability(data), cr.curves(data), cr.holdout(data, checked), cr.explanations(data, notebook)]
    summary = checked.comparison
    grade = RunGrade(
        name=str(find_value(data.run, "run_name") or data.root.name)[:100],
        run_dir=data.root,
        data=data,
        criteria=criteria,
        findings=dg.what_to_watch(data.metrics, summary, find_value(data.run, "max_completion_length")) if data.metrics else [],
        hacking=dg.detect_format_hacking(data.metrics, summary) if data.metrics else None,
        holdout=summary,
        own_rewards=[n for n in criteria[3].values.get("reward_functions", []) if n not in cr.COURSE_REWARDS],
        problems=data.problems_for("run") + data.problems_for("curves"),
    )
    return grade


def _grade(data: RunData, others: list[RunData], notebook: dict | None) -> RunGrade:
    grade = _evaluate(data, notebook)
    grade.comparisons = [_evaluate(other, None) for other in others]
    suggest_level(grade)
    return grade


def grade_run(run_dir: str | Path, comparisons=(), notebook: dict | None = None) -> RunGrade:
    """Grade one run folder. ``comparisons``: other run folders of the same student (e.g. E2)."""
    run_dir = Path(run_dir)
    try:
        return _grade(load_run(run_dir), [load_run(Path(c)) for c in comparisons], notebook)
    except Exception as exc:  # a broken grader must not stop a class: report it instead
        return _failed_grade(run_dir.name, run_dir, exc)


def hack_prevented(grade: RunGrade) -> str | None:
    """The evidence that a named hack was prevented, in Spanish, or None."""
    if grade.hacking is None or grade.hacking.holds is not False:
        return None
    for other in grade.comparisons:
        if other.hacking is not None and other.hacking.holds:
            return (
                f"La ejecución de comparación '{other.name}' muestra hacking de formato y la principal no "
                "(detalle en «Ejecuciones de comparación» y «Qué observar»)"
            )
    return None


def suggest_level(grade: RunGrade) -> None:
    first3 = grade.criteria[:3]
    failed = [f"{c.number}" for c in first3 if c.verdict == cr.NO_CUMPLE]
    unknown = [f"{c.number}" for c in first3 if c.verdict == cr.NO_SE_PUEDE]
    if failed:
        grade.level, grade.level_reason = BELOW_3, f"No cumple el criterio {', '.join(failed)}."
        return
    if unknown:
        grade.level = NO_LEVEL
        grade.level_reason = f"No se puede determinar el criterio {', '.join(unknown)}: mira los motivos en su sección."
        return
    base = "Cumple los criterios 1 a 3; el nivel depende también de las explicaciones (criterio 4)."
    if not grade.own_rewards:
        grade.level = LEVEL_3
        grade.level_reason = f"{base} Usa solo las funciones de recompensa del curso ({', '.join(cr.COURSE_REWARDS)}); el nivel 4 pide funciones propias."
        return
    evidence = hack_prevented(grade)
    own = ", ".join(grade.own_rewards)
    if evidence:
        grade.level = LEVEL_4
        grade.level_reason = f"{base} Funciones propias: {own}. {evidence}."
    else:
        grade.level = LEVEL_3_MAYBE_4
        grade.level_reason = (
            f"{base} Tiene funciones propias ({own}), pero la entrega no trae una ejecución de comparación en la que se vea "
            "el hacking que evitan: el instructor decide si la evidencia que aporta basta."
        )


def _main_run_key(data: RunData):
    """Sort key: the main run has a correctness reward, finished, has the most steps, is the newest."""
    names = [n for n, _ in cr.all_reward_names(data)]
    status = data.status or {}
    return (
        any(dg.is_correctness_name(n) for n in names),
        status.get("state") == rf.STATE_FINISHED,
        status.get("max_steps") or 0,
        str(status.get("updated") or ""),
        str(data.root),
    )


def grade_submission(root: str | Path, name: str | None = None, problems=(), skip: Path | None = None) -> RunGrade:
    """Grade a student's submission folder: its main run, its other runs as comparisons, its notebook.

    The main run is the one with a correctness reward, finished, with the most steps, newest last.
    """
    root = Path(root)
    name = name or root.name
    try:
        runs = find_run_folders(root, skip=skip) if root.is_dir() else []
        notebooks = find_notebooks(root) if root.is_dir() else []
        notebook = read_notebook(notebooks[0]) if notebooks else None
        if not runs:
            text = "la entrega no contiene ninguna carpeta de ejecución (con run.json, status.json, metrics.jsonl o eval/)"
            data = RunData(root=root, problems=[Problem(a, f"No se puede evaluar {w} porque {text}.") for a, w in (
                ("status", "si el entrenamiento terminó"), ("metrics", "las curvas de entrenamiento"), ("eval", "la mejora en el holdout"))])
            grade = _grade(data, [], notebook)
        else:
            loaded = sorted((load_run(r) for r in runs), key=_main_run_key)
            grade = _grade(loaded[-1], loaded[:-1], notebook)
        grade.name = name
        grade.problems = list(problems) + grade.problems
        return grade
    except Exception as exc:
        return _failed_grade(name, root, exc)
