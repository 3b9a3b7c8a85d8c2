"""E4, your own reward: a student's function trained in the L7.1 recipe and graded for C2b level 4.

The student writes a reward function in a file, checks it against ``rewards.examples`` (scored as TRL scores
its output: ``trl_rewards``) and trains with it beside the recipe's three (``trained_functions``: the student's saved
rewrites of the lesson's functions, else the course's), scored against the same three. Each version of the function gets its own run folder
(``run_name``: the name carries a hash of the source), so editing the function and running again trains anew
instead of reusing a run made with the old version. Level 4 asks for a comparison run where the format-hacking
detector fires (the E2 run, format only). The grader finds the evidence in any finished run of the submission
(``labs.grading.level4_evidence``), so the E4 run counts beside a longer L7.1 main run.
"""

from __future__ import annotations

import hashlib
import math
import os
from functools import wraps
from pathlib import Path

from labs.core.paths import REPO_ROOT, runs_dir
from labs.core.profiles import Profile, student_command
from labs.core.runfolder import RunFolder
from labs.exercises.sweep import SweepError, format_value
from labs.exercises.variants import base_overrides, is_smoke_test
from rewards import REWARD_NAMES
from rewards.own import describe_reward_functions

LAB = "E4"
EXERCISE = "«escribe tu función» (sección 1 de E4)"
# A tiny batch as TRL passes it (conversational completions, the data set's columns by keyword): the probe of
# ``recompensa_hecha``.
PROBE = {"prompts": [[{"role": "user", "content": "¿Cuánto es 48 + 24?"}]] * 2,
         "completions": [[{"role": "assistant", "content": "<think>48 + 24 = 72</think>\n<answer>72</answer>"}],
                         [{"role": "assistant", "content": "<think>Vamos a pensarlo.</think>\n<answer>72</answer>"}]],
         "answer": ["72", "72"], "id": ["sonda-1", "sonda-1"]}


def trl_rewards(func, completions, **columns) -> list[float]:
    """What GRPOTrainer makes of one call of ``func``: its output turned into one reward per completion as TRL turns
    it (``labs.training.reward_outputs``: any iterable of numbers, a tuple, a numpy array, None for "not
    applicable"), None and NaN as 0.0, since TRL sums the functions ignoring them. ValueError (Spanish) where TRL
    could not use the output (one value for the batch, a dict, text, another length) or it holds an infinity."""
    from labs.training.reward_outputs import reward_output_problem, trl_reward_tensor

    name = getattr(func, "__name__", repr(func))
    output = func(completions=completions, **columns)
    try:
        output = list(output)  # TRL iterates the output once: a generator is read here, once
    except TypeError:
        pass
    problem = reward_output_problem(name, output, len(completions))
    if problem:
        raise ValueError(problem)
    return [0.0 if math.isnan(v) else v for v in trl_reward_tensor(name, output, len(completions)).tolist()]


def as_trl_rewards(func):
    """``func`` returning what ``trl_rewards`` makes of its output: for ``rewards.examples.score_table``, which reads
    plain lists, so that a function TRL accepts (a tuple, a numpy array, None) is scored as TRL would score it."""

    @wraps(func)
    def rewards(completions, **columns):
        return trl_rewards(func, completions, **columns)

    return rewards


def recompensa_hecha(func) -> bool:
    """True when the student's reward answers TRL's call on a tiny batch with rewards TRL can use; otherwise say in
    Spanish which exercise to finish (as ``labs.exercises.ejercicios_hechos`` does for E1-E3) and return False."""
    name = getattr(func, "__name__", repr(func))
    try:
        if func(**PROBE) is None:
            line = f"`{name}` aún no está escrita (devuelve None): termina el ejercicio {EXERCISE}."
        else:
            trl_rewards(func, **PROBE)
            line = None
    except Exception as error:  # a written but failing function: which, and the error in one line
        line = f"`{name}` falla ({type(error).__name__}: {error}): revisa el ejercicio {EXERCISE}."
    if line:
        print("Esta celda usa tu función de recompensa, que aún no funciona, así que no hace nada todavía:")
        print("  - " + line)
        print("Termina ese ejercicio (su grader.check debe pasar) y vuelve a ejecutar esta celda.")
    return line is None


def own_functions(funcs) -> list[dict]:
    """What run.json will record about the student's E4 functions (name, file, source and its SHA-256): those with a
    name of their own, not the recipe's rewrites of the lesson's three (the recipe's id covers those)."""
    return [r for r in describe_reward_functions(funcs, REWARD_NAMES) if r["own"] and r["name"] not in REWARD_NAMES]


def trained_functions(reward_names=REWARD_NAMES) -> list:
    """The functions E4 trains for ``reward_names`` (``--rewards``): of each lesson name the recipe's, the student's
    saved function of the L7.1 notebook's section 1 (else the course's), and each ``file.py:function`` as it is.
    E4's check scores these, the table shows these, and ``train_or_read`` trains these."""
    from labs.l71 import student_rewards
    from rewards import reward_functions

    saved, _ = student_rewards.load(echo=lambda _: None)
    return student_rewards.pick(saved, list(reward_names)) if saved is not None else reward_functions(list(reward_names))


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
    """``e4-<profile>-<8 hex digits>``: one run folder per version of the student's functions and of their recipe."""
    own = own_functions(funcs)
    if not own:
        raise ValueError(
            "E4 pide al menos una función de recompensa tuya (archivo.py:funcion); ahora solo están las del curso."
        )
    # the recipe's id too: E4 is the student's recipe plus their reward, so a changed recipe is a new run (the old
    # folder stays, and is no longer read as if it had trained this one)
    from labs.l71 import recipe_identity

    recipe = recipe_identity.saved(profile)["id"]
    digest = hashlib.sha256((recipe + "".join(r["source_sha256"] or r["name"] for r in own)).encode()).hexdigest()
    return f"e4-{profile.name}-{digest[:8]}"


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
    # the student's recipe plus their reward: the saved function of each lesson name, as the terminal's command
    funcs = trained_functions(reward_names)
    return Path(l71.run_lab(profile, run_name=str(folder.root), lab=LAB, reward_names=list(reward_names),
                            reward_funcs=funcs, **base_overrides(profile, runs_root=runs_root)))
