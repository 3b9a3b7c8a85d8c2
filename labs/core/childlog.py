"""A child process started from a notebook cell writes its whole output to a log file; the cell says where.

A notebook cell that ran ``python -m labs l71`` in a child used to echo the child's lines (dozens of them) into
the cell. Now the child's stdout and stderr go to ``<runs>/_logs/<name>.log`` (one file per kind of child,
appended with a dated header per start, so an interrupted run's log is kept), and the cell prints one line when
the child starts (what runs, where its log is), one when it ends (the result) and, when it fails, the last lines
of the log with its path (:func:`failure_es`). :func:`free_port` gives each training child its own
``MASTER_PORT``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from labs.core.paths import runs_dir

LOG_DIR = "_logs"  # beside the run folders; "_" so that no lab takes it for a run
TAIL_LINES = 15


def log_path(name: str) -> Path:
    """``<runs>/_logs/<name>.log``, its folder made."""
    path = runs_dir() / LOG_DIR / f"{name}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def command_text(cmd: Sequence[str]) -> str:
    """The command as one line, a ``-c`` script shown as ``<código>``."""
    return " ".join("<código>" if "\n" in arg else arg for arg in cmd)


def open_log(path: Path, cmd: Sequence[str]) -> TextIO:
    """The log opened for appending, with a header naming the time and the command (a ``-c`` script as
    ``<código>``)."""
    log = open(path, "a", encoding="utf-8")
    log.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} $ {command_text(cmd)}\n")
    log.flush()
    return log


def write(log: TextIO, line: str) -> None:
    """One line of the child's output into its log, flushed (the log is something to ``tail -f``), except
    transformers' ``[INFO] Running in WANDB offline mode``: English noise on the first line a student follows
    (issue 52), which ``labs.core.quiet`` drops in the kernel but a child prints at its import."""
    from labs.core.quiet import WANDB_OFFLINE_LINE

    if line.strip() == WANDB_OFFLINE_LINE:
        return
    log.write(line)
    log.flush()


def failure_es(what: str, returncode: int | None, path: Path, tail: Sequence[str], n: int = TAIL_LINES) -> str:
    """What a cell says when a child failed: the exit code, the last ``n`` lines of its output, the log's path."""
    lines = [line for line in tail if line.strip()][-n:]
    shown = "\n".join(f"    | {line}" for line in lines) or "    (no escribió nada)"
    return (f"{what} terminó con código {returncode}. Últimas líneas de su registro:\n{shown}\n"
            f"Registro completo: {path}")


def free_port() -> int:
    """A TCP port the operating system reports free right now (``OSError`` if none).

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
    raise OSError("no free TCP port")
