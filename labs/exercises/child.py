"""One child process of a sweep: start it, stream its output, stop it, and say why it failed.

Each variant runs in a fresh process (see ``labs.exercises.sweep`` for why). The child gets its own
session, so a timeout or Ctrl+C stops it together with anything it started, and it dies with its
parent, so a killed notebook kernel never leaves a training running on its own. Its full output goes
to a log file; on screen only the lab's own tagged lines (or everything, or nothing).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from labs.core import childlog
from labs.core.runfolder import STATE_FAILED, RunFolder
from labs.exercises.variant import SweepError

TAIL_LINES = 25

# Lines the lab prints for the student: "[run] ...", "[eval] ...", "[paso 3/150] ...", "[qué observar] ...", "ERROR: ...";
# the course's tags are lower-case words, unlike the libraries' "[INFO]" or "[W1129 12:17:01 utils.cpp:68]".
_COURSE_LINE = re.compile(r"^\s*(\[[a-záéíóúüñ][a-záéíóúüñ0-9/ ]{1,23}\]|ERROR\b|AVISO\b)")


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
                childlog.write(log, line)  # flushed: the log is something to `tail -f` while the child runs
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
    """A free TCP port for a child's torch.distributed group (``labs.core.childlog.free_port`` says why)."""
    from labs.core import childlog

    try:
        return childlog.free_port()
    except OSError:
        raise SweepError("No encuentro ningún puerto TCP libre en esta máquina para el proceso de entrenamiento.") from None
