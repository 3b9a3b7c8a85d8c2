"""Grade one run, or one student's submission: the four criteria, "what to watch", a level suggestion.

Level rule (a suggestion; criterion 4 is always checked by the instructor):

- any of criteria 1-3 "no cumple" -> "por debajo del nivel 3";
- any of criteria 1-3 "no se puede determinar" -> no suggestion (the report says what is missing);
- criteria 1-3 met (on the main run) -> "nivel 3"; it becomes "nivel 4" when ``level4_evidence`` finds,
  among *all* the finished runs of the submission (not only the main one), a run with reward functions
  beyond the course's three (``COURSE_REWARDS``) whose format-hacking detector stays clean *and* another
  finished run where that detector fires (an E2-style comparison). Own functions without that comparison
  -> "nivel 3 (posible nivel 4)". ``level4_evidence`` is the one rule: the grader, the rubric notebook's
  self-check and E4 all call it, and RUBRIC.md states it.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from labs.core import diagnostics as dg
from labs.core import runfolder as rf

from . import criteria as cr
from .holdout import check_holdout
from .inputs import Problem, RunData, find_value, load_run
from .main_run import MAIN_LAB, MAIN_RUN_RULE_ES, choose_main, is_exercise_reference, main_run_key, missing_es  # noqa: F401 (re-exported)
from .submissions import exercise_predictions, find_notebooks, find_run_folders, read_notebook, rubric_notebook
from .written import Written

LEVEL_4 = "nivel 4"
LEVEL_3 = "nivel 3"
LEVEL_3_MAYBE_4 = "nivel 3 (posible nivel 4)"
BELOW_3 = "por debajo del nivel 3"
NO_LEVEL = "sin sugerencia"


@dataclass
class Level4Evidence:
    """Where the level-4 evidence is: the run with the student's own reward functions, and the
    comparison run in which the hack they close shows up (None when the submission has none)."""

    run: str
    own_rewards: list[str]
    comparison: str | None = None

    @property
    def complete(self) -> bool:
        return self.comparison is not None


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
    level4: Level4Evidence | None = None  # which runs carry the level-4 evidence (``level4_evidence``)
    predictions: dict[str, Written] = field(default_factory=dict)  # E1-E3 predictions from the notebooks
    problems: list[str] = field(default_factory=list)  # about the submission as a whole
    main_why: str = ""  # which run is the main one and why (``choose_main``), in Spanish

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


def _finished(grade: RunGrade) -> bool:
    status = grade.data.status or {}
    return status.get("state") == rf.STATE_FINISHED


def level4_evidence(grades: Sequence[RunGrade]) -> Level4Evidence | None:
    """The level-4 rule, over every run of a submission (the main run first, then the others).

    Evidence is a finished run with own reward functions (names beyond ``COURSE_REWARDS``) whose
    format-hacking detector stays clean, plus another finished run where that detector fires: the hack
    shows up without the student's functions and not with them. Returns the complete evidence if any
    pair exists; else the first finished run with own functions (no comparison: a possible level 4);
    else None.
    """
    finished = [g for g in grades if _finished(g)]
    own = [g for g in finished if g.own_rewards]
    hacked = [g for g in finished if g.hacking is not None and g.hacking.holds]
    for g in own:
        if g.hacking is None or g.hacking.holds is not False:
            continue
        other = next((h for h in hacked if h.run_dir != g.run_dir), None)
        if other is not None:
            return Level4Evidence(g.run_dir.name, list(g.own_rewards), other.run_dir.name)
    if own:
        return Level4Evidence(own[0].run_dir.name, list(own[0].own_rewards))
    return None


def level4_lines(evidence: Level4Evidence | None) -> list[str]:
    """The level-4 evidence in Spanish, as the report, the self-check and E4 say it."""
    if evidence is None:
        return [f"Ninguna ejecución terminada usa funciones de recompensa propias (distintas de {', '.join(cr.COURSE_REWARDS)})."]
    lines = [f"Funciones propias ({', '.join(evidence.own_rewards)}) en la ejecución '{evidence.run}'."]
    if evidence.complete:
        lines.append(f"La ejecución de comparación '{evidence.comparison}' muestra hacking de formato y '{evidence.run}' no.")
    else:
        lines.append(
            "Falta una ejecución de comparación terminada en la que el detector de hacking de formato salte (por ejemplo "
            f"la de E2, solo formato) mientras que en '{evidence.run}' no."
        )
    return lines


def hack_prevented(grade: RunGrade) -> str | None:
    """The complete level-4 evidence of ``grade`` and its comparisons, in Spanish, or None."""
    evidence = level4_evidence([grade, *grade.comparisons])
    return " ".join(level4_lines(evidence)) if evidence is not None and evidence.complete else None


def suggest_level(grade: RunGrade) -> None:
    """Criteria 1-3 on the main run; the level-4 evidence from every run (``level4_evidence``)."""
    grade.level4 = level4_evidence([grade, *grade.comparisons])
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
    base = f"La ejecución principal ('{grade.run_dir.name}') cumple los criterios 1 a 3; el nivel depende también de las explicaciones (criterio 4)."
    evidence = grade.level4
    if evidence is None:
        grade.level = LEVEL_3
        grade.level_reason = f"{base} Ninguna ejecución terminada usa funciones propias: solo las del curso ({', '.join(cr.COURSE_REWARDS)}); el nivel 4 las pide."
        return
    if evidence.complete:
        grade.level = LEVEL_4
        grade.level_reason = f"{base} {' '.join(level4_lines(evidence))}"
    else:
        grade.level = LEVEL_3_MAYBE_4
        grade.level_reason = (
            f"{base} {level4_lines(evidence)[0]} Pero la entrega no trae una ejecución de comparación en la que se vea "
            "el hacking que evitan: el instructor decide si la evidencia que aporta basta."
        )


def grade_submission(root: str | Path, name: str | None = None, problems=(), skip: Path | None = None) -> RunGrade:
    """Grade a student's submission folder: its main run, its other runs as comparisons, its notebook.

    The main run is L7.1's, by the grader's one rule (``choose_main``); the report says which and why.
    """
    root = Path(root)
    name = name or root.name
    try:
        runs = find_run_folders(root, skip=skip) if root.is_dir() else []
        notebooks = find_notebooks(root) if root.is_dir() else []
        rubric = rubric_notebook(notebooks)
        notebook = read_notebook(rubric) if rubric is not None else None
        if not runs:
            text = "la entrega no contiene ninguna carpeta de ejecución (con run.json, status.json, metrics.jsonl o eval/)"
            data = RunData(root=root, problems=[Problem(a, f"No se puede evaluar {w} porque {text}.") for a, w in (
                ("status", "si el entrenamiento terminó"), ("metrics", "las curvas de entrenamiento"), ("eval", "la mejora en el holdout"))])
            grade = _grade(data, [], notebook)
        else:
            main, others, why = choose_main([load_run(r) for r in runs])
            if main is None:  # no L7.1 run: nothing is graded in its place, every run stays a comparison
                main = RunData(root=root, problems=[Problem(a, f"No se puede evaluar {w}. {missing_es(None)}") for a, w in (
                    ("status", "si el entrenamiento terminó"), ("metrics", "las curvas de entrenamiento"),
                    ("eval", "la mejora en el holdout"))])
            grade = _grade(main, others, notebook)
            grade.main_why = why
        grade.name = name
        grade.predictions = exercise_predictions(notebooks)
        grade.problems = list(problems) + grade.problems
        return grade
    except Exception as exc:
        return _failed_grade(name, root, exc)
