"""Run a list of lab variants one after another, each in its own process, resuming where it stopped.

The exercises (E1 to E3) compare several runs of the L7.1 recipe that differ in one setting. Each run
builds a vLLM engine that reserves a fixed share of the memory (``vllm_gpu_memory_utilization``; on
CPU, of the RAM) and is not reliably freed inside the process that built it. So every variant runs in a
fresh child process, through the lab's own front door::

    <python> -m labs l71 --profile <p> --run-name <name> --lab <E1|E2|E3> [--set key=value ...] [--rewards a,b]

and the parent only waits, shows the child's output and reads the run folder afterwards.

Resuming: a variant whose run folder already says ``finished`` (``RunFolder.is_finished``) is skipped
without starting a process, so running the same sweep again after an interruption (a closed notebook,
a crash, Ctrl+C) only runs what is missing. A variant that stopped halfway is started again and the
lab continues from its last checkpoint. A finished folder whose ``run.json`` records another recipe
than the variant asks for (settings, or reward functions by their sources' SHA-256) raises ``SweepError``
rather than being reused, naming what differs and the command that makes the comparison consistent
(``--rehacer-distintas``: that folder is renamed aside, nothing deleted, and only it is retrained): a
comparison must never mix recipes under one name.

Failures: when a child fails, the sweep reports the Spanish message the lab wrote in ``status.json``
(``message_es``), or else the child's last ``ERROR`` line, and goes on with the next variant (the
variants are independent; a failed one is simply missing from the comparison). With
``stop_on_failure=True`` it stops instead and marks the remaining variants as not run. Either way
``SweepResult.raise_on_failure()`` turns failures into one exception, which the notebooks call so that
a failed run is never silently left out of a table.

Output: the child's full output goes to ``<runs>/_sweep_logs/<name>.log``; on screen the sweep shows
the lab's own tagged lines (``[run]``, ``[eval]``, ``[qué observar]``, ...) and ``ERROR`` lines as
they arrive (``show="course"``), every line (``show="all"``) or nothing but its own summary
(``show="none"``), and on a failure the last lines of the log.

Run names must contain the profile name (``e1-ci-g8``), so a ``ci`` run is never taken for a ``cpu``
one in the same runs folder.

Here: the sweep itself (``plan``, ``run_sweep``, its results) and its command line
(``python -m labs sweep E1|E2|E3``). What a variant is and the checks on it live in
``labs.exercises.variant``, one child process in ``labs.exercises.child``, which variants each exercise
runs in ``labs.exercises.variants`` (the values compared, the budgets) and ``labs.exercises.student`` (the
variants the student built in the notebook, saved; ``python -m labs sweep`` trains those); the names a notebook or test uses are importable from here too.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from labs.core.paths import runs_dir
from labs.core.profiles import PROFILES, Profile, get_profile, student_command
from labs.core.runfolder import RunFolder
from labs.exercises.child import TAIL_LINES, failure_message, free_port, run_child  # noqa: F401 (TAIL_LINES: as before)
from labs.exercises.variant import (  # noqa: F401 (replace, recorded_rewards: reachable as sweep.<name>)
    SweepError,
    Variant,
    check_variants,
    recorded_rewards,
    replace,
    settings_mismatch,
    unique,
)
from labs.exercises.student import saved_variants
from labs.exercises.variants import is_smoke_test, planned_hours_es, recorded_budget, save_budget

LOG_DIR = "_sweep_logs"

# What a sweep did with one variant.
SKIPPED = "skipped"  # already finished: no process started
FINISHED = "finished"  # ran now and finished
FAILED = "failed"  # ran now and did not finish
NOT_RUN = "not_run"  # never started (an earlier failure with stop_on_failure=True)

STATE_ES = {SKIPPED: "reutilizada", FINISHED: "terminada", FAILED: "fallida", NOT_RUN: "no ejecutada"}


@dataclass
class VariantResult:
    variant: Variant
    run_dir: Path
    state: str
    returncode: int | None = None
    seconds: float = 0.0
    message: str = ""
    log_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.state in (SKIPPED, FINISHED)


@dataclass
class SweepResult:
    profile: str
    results: list[VariantResult]

    @property
    def failed(self) -> list[VariantResult]:
        return [r for r in self.results if not r.ok]

    def run_dirs(self) -> dict[str, Path]:
        """Variant name -> run folder, for the variants that finished."""
        return {r.variant.name: r.run_dir for r in self.results if r.ok}

    def summary_es(self) -> str:
        counts = {state: sum(r.state == state for r in self.results) for state in STATE_ES}
        ran = sum(r.seconds for r in self.results if r.state in (FINISHED, FAILED))
        parts = [f"{counts[s]} {STATE_ES[s]}{'s' if counts[s] != 1 else ''}" for s in STATE_ES if counts[s]]
        return f"Barrido en el perfil '{self.profile}': {len(self.results)} variantes ({', '.join(parts)}); {ran:.0f} s ejecutando."

    def raise_on_failure(self) -> None:
        """Raise ``SweepError`` naming every variant that did not finish, with its reason."""
        if not self.failed:
            return
        lines = [f"- {r.variant.name} ({STATE_ES[r.state]}): {r.message or 'sin mensaje'}" for r in self.failed]
        raise SweepError(
            "Estas variantes no terminaron, así que la comparación estaría incompleta:\n"
            + "\n".join(lines)
            + "\nCorrige la causa y vuelve a ejecutar el barrido: las variantes terminadas no se repiten."
        )


# --------------------------------------------------------------------------------------------------
# the child's command line
# --------------------------------------------------------------------------------------------------


def format_value(value) -> str:
    """A setting as ``--set`` writes it (``labs.core.profiles.parse_override`` reads it back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def lab_command(variant: Variant, profile_name: str, python: str | None = None) -> list[str]:
    """The command line that runs ``variant`` with the L7.1 lab's CLI (``python -m labs l71``)."""
    cmd = [python or sys.executable, "-m", "labs", "l71", "--profile", profile_name,
           "--run-name", variant.name, "--lab", variant.lab]
    for key, value in variant.overrides.items():
        cmd += ["--set", f"{key}={format_value(value)}"]
    if variant.rewards is not None:
        cmd += ["--rewards", ",".join(variant.rewards)]
    if variant.built_by:
        cmd += ["--variante-de", variant.built_by]
    return cmd


def plan(variants: Sequence[Variant], profile: Profile | str | None = None, runs_root=None) -> list[tuple[Variant, bool]]:
    """(variant, already finished) for each variant, without running anything."""
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    root = Path(runs_root) if runs_root is not None else runs_dir()
    return [(v, RunFolder(root / v.name).is_finished()) for v in unique(variants)]


# --------------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------------


CommandFor = Callable[[Variant, str], Sequence[str]]
SET_ASIDE_FLAG = "--rehacer-distintas"


def exercise_of(variants: Sequence[Variant], exercise: str | None = None) -> str:
    """The exercise a sweep runs (E1, E2 or E3), for its command line."""
    return exercise or next((v.lab for v in variants if v.lab in ("E1", "E2", "E3")), "E1")


def set_aside_folder(run: RunFolder) -> Path:
    """Rename a finished folder of another recipe to ``<name>-otra-receta-<n>`` (nothing is deleted) and return it."""
    n = 1
    while (aside := run.root.with_name(f"{run.root.name}-otra-receta-{n}")).exists():
        n += 1
    run.root.rename(aside)
    return aside


def mismatch_message(run: RunFolder, variant: Variant, differences: list[str], exercise: str, profile: Profile,
                     root: Path) -> str:
    """A finished folder of another recipe, in Spanish: what differs and the command that makes it consistent."""
    return (f"La carpeta {run.root} ya terminó, pero entrenó otra receta que la variante '{variant.name}' de "
            f"{exercise} (tus ajustes o tus recompensas guardadas cambiaron después):\n- " + "\n- ".join(differences)
            + "\nCompararla con las demás mezclaría dos recetas. Para que la comparación sea coherente, en una "
            f"terminal: {command_line(exercise, profile, root)} {SET_ASIDE_FLAG}\n(aparta cada carpeta de otra "
            "receta con el sufijo -otra-receta-N, sin borrar nada, y reentrena solo esas; las que ya entrenaron tu "
            "receta se reutilizan).")


def run_sweep(
    variants: Sequence[Variant],
    profile: Profile | str | None = None,
    *,
    runs_root: str | os.PathLike | None = None,
    stop_on_failure: bool = False,
    timeout: float | None = None,
    show: str = "course",
    echo: Callable[[str], None] = print,
    command_for: CommandFor | None = None,
    set_aside: bool = False,
    exercise: str | None = None,
) -> SweepResult:
    """Run ``variants`` one after another, each in its own process; skip the ones already finished.

    ``profile``: a Profile or a name (default: ``COURSE_PROFILE`` or autodetection). ``runs_root``: the
    runs folder (default ``labs.core.paths.runs_dir()``; the children get it as ``COURSE_RUNS``).
    ``timeout``: seconds per variant (None: no limit). ``command_for(variant, profile_name)`` replaces
    the lab's command line (tests use it to run a stand-in child). A finished folder that trained another recipe
    than its variant asks for (``settings_mismatch``) stops the sweep with what differs and the command that
    makes the comparison consistent; with ``set_aside`` it is renamed aside (``set_aside_folder``) and retrained,
    and only it: the folders of the same recipe are reused. ``exercise`` names the command (default: the
    variants' own label).
    """
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    root = Path(runs_root) if runs_root is not None else runs_dir()
    variants = unique(variants)
    check_variants(variants, profile)
    env = dict(os.environ, COURSE_RUNS=str(root), PYTHONUNBUFFERED="1")
    make_command = command_for or (lambda v, p: lab_command(v, p))

    results: list[VariantResult] = []
    stopped = False
    for index, variant in enumerate(variants, start=1):
        run = RunFolder(root / variant.name)
        head = f"[barrido {index}/{len(variants)}] {variant.name} ({variant.label})"
        if stopped:
            results.append(VariantResult(variant, run.root, NOT_RUN, message="no se ejecutó: una variante anterior falló"))
            continue
        if run.is_finished():
            differences = settings_mismatch(variant, profile, run)
            if not differences:
                echo(f"{head}: ya terminada, la reutilizo.")
                results.append(VariantResult(variant, run.root, SKIPPED))
                continue
            if not set_aside:
                raise SweepError(mismatch_message(run, variant, differences, exercise_of(variants, exercise), profile, root))
            aside = set_aside_folder(run)
            echo(f"{head}: entrenó otra receta ({'; '.join(differences)}); la aparto en {aside.name} (no se borra) "
                 "y la entreno con la tuya.")
        what = "continúo la ejecución interrumpida" if run.exists() else "empiezo"
        echo(f"{head}: {what}.")
        cmd = list(make_command(variant, profile.name))
        log_path = root / LOG_DIR / f"{variant.name}.log"
        previous = run.status()
        child_env = dict(env)
        if not os.environ.get("MASTER_PORT"):
            child_env["MASTER_PORT"] = str(free_port())
        start = time.monotonic()
        code, tail, timed_out = run_child(cmd, log_path, env=child_env, show=show, echo=echo, timeout=timeout)
        seconds = time.monotonic() - start
        if code == 0 and run.is_finished():
            echo(f"{head}: terminada en {seconds:.0f} s.")
            results.append(VariantResult(variant, run.root, FINISHED, code, seconds, log_path=log_path))
            continue
        if timed_out:
            message = (
                f"superó el límite de {timeout:.0f} s y se detuvo; vuelve a lanzar el barrido para continuar "
                "desde el último checkpoint"
            )
        else:
            message = failure_message(run, code, tail, previous)
        echo(f"{head}: FALLÓ tras {seconds:.0f} s. {message}")
        echo(f"    Últimas líneas del registro completo ({log_path}):")
        for line in tail[-10:]:
            echo(f"    | {line}")
        results.append(VariantResult(variant, run.root, FAILED, code, seconds, message, log_path))
        stopped = stop_on_failure
    result = SweepResult(profile.name, results)
    echo(result.summary_es())
    return result


# --------------------------------------------------------------------------------------------------
# The notebooks: read what the terminal ran (train here only on ci, or when asked)
# --------------------------------------------------------------------------------------------------


def command_line(exercise: str, profile: Profile, runs_root=None) -> str:
    """The terminal command for an exercise, with the budget the notebook's variants use."""
    budget = recorded_budget(profile, runs_root)
    sets = "".join(f" --set {k}={format_value(v)}" for k, v in budget.items())
    return student_command(f"sweep {exercise}", profile) + sets


def read_or_run(exercise: str, variants: Sequence[Variant], profile: Profile | str | None = None, *,
                entrenar_aqui: bool = False, runs_root=None, echo: Callable[[str], None] = print) -> SweepResult:
    """What an exercise notebook calls: the finished variants are read, nothing is trained twice.

    When some variant has not finished: on the ``ci`` smoke test (minutes) or with ``entrenar_aqui`` the
    sweep runs here; otherwise ``SweepError`` says, in Spanish, which runs are missing and the terminal
    command that makes them (hours on a 5090, and a browser tab must not be able to kill them).
    """
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    root = Path(runs_root) if runs_root is not None else runs_dir()
    variants = unique(variants)
    missing = [v for v, done in plan(variants, profile, root) if not done]
    command = command_line(exercise, profile, root)
    echo(f"En una terminal, este ejercicio se lanza con: {command}")
    other = [(v, d) for v in variants if v not in missing
             for d in [settings_mismatch(v, profile, RunFolder(root / v.name))] if d]
    if other and not (entrenar_aqui or is_smoke_test(profile)):
        v, differences = other[0]
        raise SweepError(mismatch_message(RunFolder(root / v.name), v, differences, exercise, profile, root))
    if other:
        return run_sweep(variants, profile, runs_root=root, echo=echo, set_aside=True, exercise=exercise)
    if not missing:
        echo(f"Las {len(variants)} ejecuciones de {exercise} ya terminaron: las leo, sin entrenar.")
        return SweepResult(profile.name, [VariantResult(v, root / v.name, SKIPPED) for v in variants])
    if entrenar_aqui or is_smoke_test(profile):
        return run_sweep(variants, profile, runs_root=root, echo=echo, exercise=exercise)
    names = ", ".join(v.name for v in missing)
    raise SweepError(
        f"Faltan {len(missing)} de las {len(variants)} ejecuciones de {exercise} ({names}; "
        f"{planned_hours_es(missing, profile, root)}). Lánzalas en una terminal: {command}\n"
        "Continúa donde se quedó si la interrumpes. Cuando termine, vuelve a ejecutar esta celda: solo lee las "
        "carpetas. (Para entrenarlas en este cuaderno, pon ENTRENAR_AQUI = True.)"
    )


# --------------------------------------------------------------------------------------------------
# Command line: the exercises' sweeps from a terminal (on a 5090 each one is hours)
# --------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    """``python -m labs sweep E1|E2|E3 [--profile p] [--set key=value ...]``: run (or resume) one exercise."""
    import argparse

    from labs.training.options import add_set_argument, overrides_from_cli

    parser = argparse.ArgumentParser(prog="python -m labs sweep",
                                     description="Ejecuta (o continúa) las variantes de un ejercicio, una tras otra.")
    parser.add_argument("exercise", type=str.upper, choices=("E1", "E2", "E3"), help="el ejercicio: E1, E2 o E3")
    parser.add_argument("--profile", help=f"{', '.join(PROFILES)} (por defecto: COURSE_PROFILE o autodetección)")
    add_set_argument(parser, "cambiar un ajuste de todas las variantes (el presupuesto: p. ej. max_steps=100); "
                             "se guarda y lo usan los demás ejercicios y los cuadernos")
    parser.add_argument(SET_ASIDE_FLAG, dest="set_aside", action="store_true",
                        help="apartar (sin borrar) las carpetas terminadas que entrenaron otra receta y reentrenar "
                        "solo esas con la tuya")
    parser.add_argument("--show", choices=("course", "all", "none"), default="course",
                        help="qué salida de cada run mostrar (el registro completo queda en runs/_sweep_logs/)")
    args = parser.parse_args(argv)
    try:
        profile = get_profile(args.profile)
        budget = overrides_from_cli(args.set, profile) if args.set else None
        if budget:
            path = save_budget(profile, budget)
            print(f"[barrido] Presupuesto {', '.join(f'{k}={v}' for k, v in budget.items())} guardado en {path}: "
                  "los demás ejercicios y los cuadernos usarán el mismo.")
        variants = saved_variants(args.exercise, profile, budget=budget)  # what the student built in the notebook
        if not profile.use_cpu:
            print(f"[barrido] Tiempo de lo que falta: {planned_hours_es(variants, profile)}.")
        result = run_sweep(variants, profile, show=args.show, set_aside=args.set_aside, exercise=args.exercise)
        result.raise_on_failure()
    except (ValueError, SweepError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    print(f"[barrido] {args.exercise} listo: abre notebooks/{args.exercise}_*.ipynb para ver la comparación "
          "(reutiliza estos runs sin volver a entrenar).")
    return 0
