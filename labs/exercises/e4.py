"""E4, your own reward: a student's function trained in the L7.1 recipe and graded for C2b level 4.

The student writes a reward function in a file, checks it against ``rewards.examples`` and trains with
it beside the lesson's three (``reward_functions([..., "mi_recompensa.py:funcion"])``). Each version of
the function gets its own run folder (``run_name``: the name carries a hash of the source), so editing
the function and running again trains anew instead of reusing a run made with the old version. Level 4
asks for a comparison run where the format-hacking detector fires: the E2 run (format only) is that
comparison when it exists (``comparison_runs``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from labs.core.paths import runs_dir
from labs.core.profiles import Profile
from labs.exercises.variants import e2_variants
from rewards import REWARD_NAMES
from rewards.own import describe_reward_functions

LAB = "E4"


def own_functions(funcs) -> list[dict]:
    """What run.json will record about the student's functions (name, file, source and its SHA-256)."""
    return [r for r in describe_reward_functions(funcs, REWARD_NAMES) if r["own"]]


def run_name(profile: Profile, funcs) -> str:
    """``e4-<profile>-<8 hex digits>``: one run folder per version of the student's functions."""
    own = own_functions(funcs)
    if not own:
        raise ValueError(
            "E4 pide al menos una función de recompensa tuya (archivo.py:funcion); ahora solo están las del curso."
        )
    digest = hashlib.sha256("".join(r["source_sha256"] or r["name"] for r in own).encode()).hexdigest()
    return f"e4-{profile.name}-{digest[:8]}"


def comparison_runs(profile: Profile, runs_root=None) -> list[Path]:
    """The E2 run of this profile (format only, no correctness) if it exists: level 4's comparison."""
    root = Path(runs_root) if runs_root is not None else runs_dir()
    names = [v.name for v in e2_variants(profile, runs_root) if v.lab == "E2"]
    return [root / n for n in names if (root / n / "run.json").exists()]


def grade_lines(grade) -> list[str]:
    """What the C2b grader says about the student's run, in Spanish lines for the notebook."""
    lines = [f"Funciones propias que reconoce el evaluador: {', '.join(grade.own_rewards) or 'ninguna'}."]
    if not grade.comparisons:
        lines.append(
            "Sin ejecución de comparación: para el nivel 4 hace falta una (por ejemplo la de E2, solo formato) en la "
            "que el detector de hacking de formato salte."
        )
    for other in grade.comparisons:
        verdict = other.hacking.message if other.hacking is not None else "sin métricas."
        lines.append(f"Comparación '{other.name}': {verdict}")
    if grade.hacking is not None:
        lines.append(f"Tu ejecución: {grade.hacking.message}")
    lines.append(f"Nivel sugerido: {grade.level}. {grade.level_reason}")
    return lines
