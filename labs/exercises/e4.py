"""E4, your own reward: a student's function trained in the L7.1 recipe and graded for C2b level 4.

The student writes a reward function in a file, checks it against ``rewards.examples`` and trains with
it beside the lesson's three (``reward_functions([..., "mi_recompensa.py:funcion"])``). Each version of
the function gets its own run folder (``run_name``: the name carries a hash of the source), so editing
the function and running again trains anew instead of reusing a run made with the old version. Level 4
asks for a comparison run where the format-hacking detector fires: the E2 run (format only) is that
comparison when it exists (``comparison_runs``). The grader finds the evidence in any finished run of the
submission (``labs.grading.level4_evidence``), so the E4 run counts beside a longer L7.1 main run.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from labs.core.paths import REPO_ROOT, runs_dir
from labs.core.profiles import Profile, student_command
from labs.core.runfolder import RunFolder
from labs.exercises.sweep import SweepError, format_value
from labs.exercises.variants import base_overrides, is_smoke_test, planned_variants
from rewards import REWARD_NAMES
from rewards.own import describe_reward_functions

LAB = "E4"


def own_functions(funcs) -> list[dict]:
    """What run.json will record about the student's functions (name, file, source and its SHA-256)."""
    return [r for r in describe_reward_functions(funcs, REWARD_NAMES) if r["own"]]


REWARD_FILE = "mi_recompensa.py"


def write_reward_file(func, path: str | Path = REWARD_FILE) -> str:
    """Write the student's function (its source, as defined in the notebook) to ``path``; returns the name
    ``archivo.py:funcion`` that ``--rewards`` and ``reward_functions`` load. What trains is this file."""
    import inspect
    import textwrap

    name = getattr(func, "__name__", "")
    if not callable(func) or not name.isidentifier() or name == "<lambda>":
        raise ValueError("Escribe tu recompensa como una función con nombre (def mi_recompensa(completions, **kwargs): ...).")
    if name in REWARD_NAMES:
        raise ValueError(f"Tu función se llama como una del curso ({name}): ponle un nombre propio.")
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError) as exc:
        raise ValueError(f"No puedo leer el código de {name} ({exc}): vuelve a ejecutar la celda que la define.") from None
    header = ('"""Mi recompensa para GRPO en GSM8K (ejercicio E4). La escribe el cuaderno E4 con el código de tu celda:\n'
              'edítala allí, no aquí."""\n\n')
    Path(path).write_text(header + textwrap.dedent(source), encoding="utf-8")
    return f"{path}:{name}"


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
    names = [v.name for v in planned_variants("E2", profile, runs_root) if v.lab == "E2"]
    return [root / n for n in names if (root / n / "run.json").exists()]


def grade_lines(grade) -> list[str]:
    """What the C2b grader says of the runs folder (``labs.grading.grade_runs``), in Spanish lines for the notebook.

    Criteria 1-3 come from the main run (the grader's rule); the level-4 evidence from every finished run
    (``labs.grading.level4_evidence``, the rule the grader and the rubric's self-check also use).
    """
    from labs.grading import level4_lines

    if grade is None:
        return ["Aún no hay ninguna ejecución terminada que evaluar."]
    verdicts = ", ".join(f"criterio {c.number}: {c.verdict}" for c in grade.criteria[:3])
    lines = [f"Ejecución principal, la que juzga los criterios 1 a 3: '{grade.run_dir.name}' ({verdicts})."]
    lines += [grade.main_why] if grade.main_why else []
    lines += level4_lines(grade.level4)
    lines.append(f"Nivel sugerido: {grade.level}. {grade.level_reason}")
    return lines


def terminal_command(profile: Profile, reward_names, funcs, runs_root=None) -> str:
    """``python -m labs l71 ...`` that trains the student's run from the repository root, with the exercises' budget."""
    names = []
    for name in reward_names:
        path, sep, function = str(name).rpartition(":")
        if sep and path.endswith(".py") and Path(path).exists():  # a file next to the notebook: say it from the root
            name = f"{os.path.relpath(Path(path).resolve(), REPO_ROOT)}:{function}"
        names.append(name)
    sets = "".join(f" --set {k}={format_value(v)}" for k, v in base_overrides(profile, runs_root=runs_root).items())
    return (f"{student_command('l71', profile)} --lab {LAB} --run-name {run_name(profile, funcs)} "
            f"--rewards {','.join(names)}{sets}")


def train_or_read(profile: Profile, reward_names, funcs, *, entrenar_aqui: bool = False, runs_root=None,
                  echo=print) -> Path:
    """The student's run: read when it finished, trained here on a CPU profile (minutes) or when asked.

    On a GPU profile the run is hours: without ``entrenar_aqui`` a missing or unfinished run stops with the
    terminal command (the same run folder, so the notebook then reads it), as the other exercises do.
    """
    from labs import l71

    root = Path(runs_root) if runs_root is not None else runs_dir()
    folder = RunFolder(root / run_name(profile, funcs))
    command = terminal_command(profile, reward_names, funcs, runs_root)
    echo(f"En una terminal, desde la carpeta del curso: {command}")
    if folder.is_finished():
        echo(f"La ejecución {folder.root.name} ya terminó: la leo, sin entrenar.")
        return folder.root
    if not (entrenar_aqui or profile.use_cpu or is_smoke_test(profile)):
        raise SweepError(
            f"Aún no hay una ejecución terminada con esta versión de tu recompensa ({folder.root.name}). Lánzala en "
            f"una terminal: {command}\nContinúa donde se quedó si la interrumpes. Cuando termine, vuelve a ejecutar "
            "esta celda: solo lee la carpeta. (Para entrenar en este cuaderno, pon ENTRENAR_AQUI = True.)"
        )
    return Path(l71.run_lab(profile, run_name=str(folder.root), lab=LAB,
                            reward_names=list(reward_names), **base_overrides(profile, runs_root=runs_root)))
