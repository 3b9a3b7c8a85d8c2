"""Which run of a submission is the main one: the student's own L7.1 run, or none.

The grader, the rubric notebook's self-check and E4 share this one rule (``choose_main``; RUBRIC.md states it).
Only a run of L7.1 itself can be the main run: ``run.json``'s ``lab`` is ``L7.1`` and it is neither E1-E3's
shared reference (``ref-<profile>``, labelled L7.1 so that it trains the saved recipe) nor a rehearsal's run
(``runs/rehearsal-<gpu>/l71``: a finished 3-step L7.1 run with the correctness reward, whose run.json records
``purpose: rehearsal``). L7.2's runs, the
exercises' sweeps, E4 and the rehearsal's runs are comparisons. When no L7.1 run exists, or the one there is has
not finished, ``missing_es`` says so, with the command that trains it; the grader and the self-check print that
same sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from labs.core import diagnostics as dg
from labs.core import runfolder as rf
from labs.core.spanish import plural

from . import criteria as cr
from .inputs import RunData

MAIN_LAB = "L7.1"  # the graded run is L7.1's; L7.2, the exercises' sweeps, E4 and the rehearsal are comparisons
REHEARSAL_PREFIX = "rehearsal-"  # labs.rehearsal's folder: runs/rehearsal-<gpu or cpu>/{l71,l72}
REHEARSAL_JSON = "rehearsal.json"  # the rehearsal's record beside its runs (labs.rehearsal.cli writes it)
MAIN_RUN_RULE_ES = (
    "la regla del evaluador: la ejecución principal es la del L7.1 y ninguna otra (L7.2, el ensayo, los ejercicios "
    "y E4 son comparaciones). Entre las del L7.1, primero las que tienen recompensa de corrección, después las "
    "terminadas, después las de más pasos y, a igualdad, la más reciente"
)


def is_exercise_reference(data: RunData) -> bool:
    """E1-E3's shared reference (``ref-<profile>``): the recipe at the exercises' budget, labelled L7.1 so that it
    trains the saved recipe, but a comparison, never the main run."""
    name = str((data.run or {}).get("run_name") or data.root.name)
    return name.startswith(rf.REFERENCE_PREFIX)


def is_rehearsal_run(data: RunData) -> bool:
    """A run of the rehearsal (``python -m labs rehearse``): its run.json says so (``purpose``, which the rehearsal
    records), wherever the folder was copied or renamed; for runs from before that record, its folder sits in
    ``rehearsal-<gpu>/`` or beside the rehearsal's record. It trains L7.1's steps for minutes to measure the machine:
    never the main run."""
    if (data.run or {}).get(rf.PURPOSE_KEY) == rf.PURPOSE_REHEARSAL:
        return True
    parent = Path(data.root).parent
    return parent.name.startswith(REHEARSAL_PREFIX) or (parent / REHEARSAL_JSON).is_file()


def is_l71_run(data: RunData) -> bool:
    """Whether ``data`` can be the main run: the student's own L7.1 run (not the reference, not a rehearsal's)."""
    return (data.run or {}).get("lab") == MAIN_LAB and not is_exercise_reference(data) and not is_rehearsal_run(data)


def why_not_l71(data: RunData) -> str:
    """Why a run that is not L7.1's own is only a comparison, in Spanish."""
    if is_rehearsal_run(data):
        return "es del ensayo: una comparación"
    if is_exercise_reference(data):
        return "es la referencia de los ejercicios: una comparación"
    return "no es del L7.1: es una comparación"


def main_run_key(data: RunData):
    """Sort key among L7.1's own runs: a correctness reward, then finished, then the most steps, then the newest."""
    names = [n for n, _ in cr.all_reward_names(data)]
    status = data.status or {}
    return (
        any(dg.is_correctness_name(n) for n in names),
        status.get("state") == rf.STATE_FINISHED,
        status.get("max_steps") or 0,
        str(status.get("updated") or ""),
        str(data.root),
    )


def _loses_on(winner: tuple, other: tuple) -> str:
    """Why ``main_run_key`` put ``other`` below ``winner``, in Spanish."""
    if winner[0] != other[0]:
        return "no tiene recompensa de corrección"
    if winner[1] != other[1]:
        return "no ha terminado"
    if winner[2] != other[2]:
        return f"pide {plural(other[2], 'paso')} frente a {winner[2]}"
    return "es más antigua"


def is_finished(data: RunData) -> bool:
    return (data.status or {}).get("state") == rf.STATE_FINISHED


def l71_command(data: RunData | None = None) -> str:
    """The command that trains (or finishes) the L7.1 run: ``python -m labs l71`` for the run's profile."""
    from labs.core.profiles import PROFILES, student_command

    name = (((data.run or {}).get("profile") or {}).get("name") if data is not None else None)
    if not isinstance(name, str) or name not in PROFILES:
        return "python -m labs l71"
    return student_command("l71", name)


def missing_es(main: RunData | None) -> str | None:
    """The Spanish sentence the grader and the self-check both say when the main run is missing or unfinished;
    None when ``main`` is a finished L7.1 run."""
    if main is None:
        return ("No hay ninguna ejecución del L7.1: la ejecución principal que se evalúa es la del L7.1 (L7.2, el "
                "ensayo, los ejercicios y E4 son comparaciones). Entrénala en una terminal, desde la carpeta del curso: "
                f"{l71_command()}")
    if is_finished(main):
        return None
    status = main.status or {}
    done = f" ({status.get('step')} de {status.get('max_steps')} pasos)" if status.get("max_steps") else ""
    return (f"La ejecución del L7.1 {main.root.name} no ha terminado{done}: los criterios miran un entrenamiento "
            f"terminado. Termínala en una terminal, desde la carpeta del curso: {l71_command(main)} (sigue desde su "
            "último checkpoint).")


def choose_main(runs: Sequence[RunData]) -> tuple[RunData | None, list[RunData], str]:
    """The main run among ``runs`` (None when none is L7.1's own), the others, and why (Spanish: the rule, each
    other's place, and what is missing when the main run is absent or unfinished)."""
    own = sorted(((main_run_key(d), d) for d in runs if is_l71_run(d)), key=lambda kd: kd[0])
    best_key, best = own[-1] if own else (None, None)
    others = [d for d in runs if d is not best]
    placed = [f"{d.root.name} ({_loses_on(best_key, k)})" for k, d in reversed(own[:-1])]
    placed += [f"{d.root.name} ({why_not_l71(d)})" for d in runs if not is_l71_run(d)]
    why = f"Se evalúa {best.root.name} por {MAIN_RUN_RULE_ES}." if best is not None else ""
    if placed:
        why += (" " if why else "") + "Quedan como comparaciones: " + "; ".join(placed) + "."
    missing = missing_es(best)
    if missing:
        why = f"{missing} {why}".strip()
    return best, others, why
