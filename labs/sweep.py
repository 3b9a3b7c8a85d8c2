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
lab continues from its last checkpoint. A finished folder whose ``run.json`` records other settings
than the variant asks for raises ``SweepError`` rather than being reused: a comparison must never mix
runs made with different settings under one name.

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
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from labs.paths import runs_dir
from labs.profiles import Profile, get_profile
from labs.runfolder import RUN_JSON, STATE_FAILED, RunFolder, read_json

LOG_DIR = "_sweep_logs"
TAIL_LINES = 25

# What a sweep did with one variant.
SKIPPED = "skipped"  # already finished: no process started
FINISHED = "finished"  # ran now and finished
FAILED = "failed"  # ran now and did not finish
NOT_RUN = "not_run"  # never started (an earlier failure with stop_on_failure=True)

STATE_ES = {SKIPPED: "reutilizada", FINISHED: "terminada", FAILED: "fallida", NOT_RUN: "no ejecutada"}

# Lines the lab prints for the student: "[run] ...", "[eval] ...", "[qué observar] ...", "ERROR: ...";
# the course's tags are lower-case words, unlike the libraries' "[INFO]" or "[W1129 12:17:01 utils.cpp:68]".
_COURSE_LINE = re.compile(r"^\s*(\[[a-záéíóúüñ ]{2,24}\]|ERROR\b|AVISO\b)")
# Profile settings that say nothing about what was trained: never compared with a finished run.
_IGNORED_SETTINGS = {"description"}


class SweepError(RuntimeError):
    """A sweep cannot go on as asked (in Spanish: students read it)."""


@dataclass
class Variant:
    """One run of the L7.1 recipe with some settings changed.

    ``name`` is the run folder name (it must contain the profile name); ``overrides`` are profile
    settings (``labs.profiles.Profile`` fields) as on ``--set``; ``rewards`` the reward function names
    (``None``: the lesson's three); ``label`` how tables and plots call it; ``lab`` the tag written in
    run.json.
    """

    name: str
    overrides: dict = field(default_factory=dict)
    rewards: tuple[str, ...] | None = None
    label: str = ""
    lab: str = "E1"

    def __post_init__(self):
        if isinstance(self.rewards, str):
            self.rewards = (self.rewards,)
        elif self.rewards is not None:
            self.rewards = tuple(self.rewards)
        if not self.label:
            self.label = self.name

    def profile(self, base: Profile) -> Profile:
        """The profile this variant trains with."""
        return base.replace(**self.overrides) if self.overrides else base


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
    """A setting as ``--set`` writes it (``labs.profiles.parse_override`` reads it back)."""
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
    return cmd


# --------------------------------------------------------------------------------------------------
# checks before anything runs
# --------------------------------------------------------------------------------------------------


def _plain(value):
    """JSON-comparable form (tuples as lists), as run.json stores settings."""
    return json.loads(json.dumps(value))


def recorded_rewards(record: dict) -> list[str] | None:
    names = record.get("reward_functions")
    if not isinstance(names, list):
        return None
    return [n.get("name") if isinstance(n, dict) else n for n in names]


def settings_mismatch(variant: Variant, base: Profile, run: RunFolder) -> list[str]:
    """Settings in which the run folder's run.json differs from what ``variant`` asks for ([] if none)."""
    try:
        record = read_json(run.path(RUN_JSON))
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    differences = []
    stored = record.get("profile") or {}
    wanted = _plain(variant.profile(base).as_dict())
    for key, value in wanted.items():
        if key in _IGNORED_SETTINGS or key not in stored:
            continue
        if _plain(stored[key]) != value:
            differences.append(f"{key}: la carpeta tiene {stored[key]!r}, la variante pide {value!r}")
    if variant.rewards is not None:
        names = recorded_rewards(record)
        if names is not None and names != list(variant.rewards):
            differences.append(f"recompensas: la carpeta tiene {names}, la variante pide {list(variant.rewards)}")
    elif "reward_functions" in record:
        from rewards import REWARD_NAMES

        names = recorded_rewards(record)
        if names is not None and names != list(REWARD_NAMES):
            differences.append(f"recompensas: la carpeta tiene {names}, la variante pide {list(REWARD_NAMES)}")
    return differences


def check_variants(variants: Sequence[Variant], profile: Profile) -> None:
    """Names unique and tagged with the profile; overrides that the profile knows."""
    seen: dict[str, Variant] = {}
    for v in variants:
        if profile.name not in v.name:
            raise SweepError(
                f"El nombre de la variante '{v.name}' no contiene el perfil '{profile.name}': así una ejecución "
                "de un perfil podría confundirse con la de otro en la misma carpeta de ejecuciones."
            )
        v.profile(profile)  # an unknown setting raises ProfileError here, before anything runs
        if v.name in seen and (seen[v.name].overrides != v.overrides or seen[v.name].rewards != v.rewards):
            raise SweepError(f"Dos variantes se llaman '{v.name}' con ajustes distintos.")
        seen[v.name] = v


def unique(variants: Iterable[Variant]) -> list[Variant]:
    """Variants in order, each name once (a run shared by two exercises runs once)."""
    out, names = [], set()
    for v in variants:
        if v.name not in names:
            names.add(v.name)
            out.append(v)
    return out


def plan(variants: Sequence[Variant], profile: Profile | str | None = None, runs_root=None) -> list[tuple[Variant, bool]]:
    """(variant, already finished) for each variant, without running anything."""
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    root = Path(runs_root) if runs_root is not None else runs_dir()
    return [(v, RunFolder(root / v.name).is_finished()) for v in unique(variants)]


# --------------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------------


def _course_segments(line: str) -> list[str]:
    """The lab's own messages inside one output line (progress bars put several pieces on one line)."""
    return [seg.strip() for seg in line.split("\r") if _COURSE_LINE.match(seg)]


def failure_message(run: RunFolder, returncode: int | None, tail: Sequence[str], previous: dict | None = None) -> str:
    """Why a child failed: status.json's Spanish message, else its last ERROR line, else the exit code.

    ``previous`` is status.json as it was before the child started: a failure recorded by an earlier
    attempt is not this child's reason.
    """
    status = run.status() or {}
    if status.get("state") == STATE_FAILED and status != previous:
        text = status.get("message_es") or status.get("message") or status.get("error")
        if text:
            kind = status.get("kind")
            return f"[{kind}] {text}" if kind else str(text)
    for line in reversed(tail):
        if line.strip().startswith("ERROR"):
            return line.strip()
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"señal {-returncode}"
        if -returncode == signal.SIGKILL:
            return (
                f"el sistema mató el proceso ({name}); casi siempre es por falta de memoria RAM: cierra otros "
                "entrenamientos o cuadernos que tengan un motor vLLM abierto y vuelve a lanzar el barrido"
            )
        return f"el proceso terminó por una señal ({name})"
    if returncode == 0:
        return "el proceso terminó sin error pero la carpeta no dice 'finished' (mira status.json y el registro)"
    last = next((line.strip() for line in reversed(tail) if line.strip()), "")
    if last:
        return f"el proceso terminó con código {returncode}; su última línea: {last[:300]}"
    return f"el proceso terminó con código {returncode} sin escribir nada (mira el registro)"


def _die_with_parent() -> None:
    """In the child, before exec: get SIGTERM when the parent dies (Linux; a no-op elsewhere).

    The child runs in its own session (so a timeout can stop its whole process group), which also means
    a killed notebook kernel would leave it training on its own; a second sweep would then start another
    process on the same run folder. With this, a dead parent stops the child, and the next sweep resumes
    the run from its last checkpoint.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _terminate(proc: subprocess.Popen) -> None:
    """Stop the child and everything it started (it runs in its own process group)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_child(
    cmd: Sequence[str],
    log_path: Path,
    *,
    env: dict | None = None,
    show: str = "course",
    echo: Callable[[str], None] = print,
    timeout: float | None = None,
) -> tuple[int | None, list[str], bool]:
    """Run ``cmd``, copying its output to ``log_path`` and (filtered by ``show``) to ``echo``.

    Returns (exit code, last lines of output, timed out). The child gets its own process group, so a
    timeout or Ctrl+C stops it together with anything it started.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    timed_out = False
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} $ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
            start_new_session=True, text=True, encoding="utf-8", errors="replace", bufsize=1,
            preexec_fn=_die_with_parent,
        )
        deadline = None if timeout is None else time.monotonic() + timeout
        watchdog = None
        if deadline is not None:
            import threading

            def watch():
                nonlocal timed_out
                while proc.poll() is None:
                    if time.monotonic() > deadline:
                        timed_out = True
                        _terminate(proc)
                        return
                    time.sleep(0.2)

            watchdog = threading.Thread(target=watch, daemon=True)
            watchdog.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                log.flush()  # the log is something to `tail -f` while the child runs
                line = line.rstrip("\n")
                last = line.split("\r")[-1].strip()
                if last:
                    tail.append(last)
                if show == "all":
                    echo(last)
                elif show == "course":
                    for segment in _course_segments(line):
                        echo(f"    {segment}")
            proc.wait()
        except BaseException:  # KeyboardInterrupt in a notebook: do not leave a vLLM engine behind
            _terminate(proc)
            raise
        finally:
            if watchdog is not None:
                watchdog.join(timeout=30)
    return (None if timed_out else proc.returncode), list(tail), timed_out


def free_port() -> int:
    """A TCP port the operating system reports free right now.

    TRL's colocate mode starts a one-process torch.distributed group and, when ``MASTER_PORT`` is not set,
    tries 29500 first; its check binds 127.0.0.1 only, so a port held on the IPv6 wildcard by another
    training on the same machine passes the check and the child then fails with EADDRINUSE (seen on a
    shared CPU machine). Each child therefore gets its own free port (a ``MASTER_PORT`` the user set is
    respected).
    """
    import socket

    for family in (socket.AF_INET6, socket.AF_INET):  # the IPv6 wildcard covers IPv4 too (dual stack)
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind(("", 0))
                return int(s.getsockname()[1])
        except OSError:
            continue
    raise SweepError("No encuentro ningún puerto TCP libre en esta máquina para el proceso de entrenamiento.")


CommandFor = Callable[[Variant, str], Sequence[str]]


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
) -> SweepResult:
    """Run ``variants`` one after another, each in its own process; skip the ones already finished.

    ``profile``: a Profile or a name (default: ``COURSE_PROFILE`` or autodetection). ``runs_root``: the
    runs folder (default ``labs.paths.runs_dir()``; the children get it as ``COURSE_RUNS``).
    ``timeout``: seconds per variant (None: no limit). ``command_for(variant, profile_name)`` replaces
    the lab's command line (tests use it to run a stand-in child).
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
            if differences:
                raise SweepError(
                    f"La carpeta {run.root} ya terminó, pero con otros ajustes que la variante '{variant.name}':\n- "
                    + "\n- ".join(differences)
                    + "\nUsa otro nombre para la variante o borra esa carpeta."
                )
            echo(f"{head}: ya terminada, la reutilizo.")
            results.append(VariantResult(variant, run.root, SKIPPED))
            continue
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


def replace(variant: Variant, **changes) -> Variant:
    """A copy of ``variant`` with some fields changed."""
    return dataclasses.replace(variant, **changes)


# --------------------------------------------------------------------------------------------------
# Command line: the exercises' sweeps from a terminal (on a 5090 each one is hours)
# --------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    """``python -m labs sweep E1|E2|E3 [--profile p]``: run (or resume) one exercise's variants."""
    import argparse

    from labs import exercises

    builders = {"E1": exercises.e1_variants, "E2": exercises.e2_variants, "E3": exercises.e3_variants}
    parser = argparse.ArgumentParser(prog="python -m labs sweep",
                                     description="Ejecuta (o continúa) las variantes de un ejercicio, una tras otra.")
    parser.add_argument("exercise", type=str.upper, choices=sorted(builders), help="el ejercicio: E1, E2 o E3")
    parser.add_argument("--profile", help="cpu, ci o rtx5090 (por defecto: COURSE_PROFILE o autodetección)")
    parser.add_argument("--show", choices=("course", "all", "none"), default="course",
                        help="qué salida de cada run mostrar (el registro completo queda en runs/_sweep_logs/)")
    args = parser.parse_args(argv)
    try:
        profile = get_profile(args.profile)
        result = run_sweep(builders[args.exercise](profile), profile, show=args.show)
        result.raise_on_failure()
    except (ValueError, SweepError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    print(f"[barrido] {args.exercise} listo: abre notebooks/{args.exercise}_*.ipynb para ver la comparación "
          "(reutiliza estos runs sin volver a entrenar).")
    return 0
