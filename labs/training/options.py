"""The options every lab's command line shares: profile, run folder, fresh start, ``--set`` overrides.

``python -m labs l71``, ``l72`` and ``sweep`` read the same flags, so a student learns them once.
"""

from __future__ import annotations

import argparse
import sys

from labs.core.profiles import PROFILES, Profile, parse_override
from labs.training import preflight


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every lab's command line shares: profile, run folder, fresh start, overrides."""
    names = ", ".join(PROFILES)
    parser.add_argument("--profile", help=f"{names} (por defecto: COURSE_PROFILE o autodetección)")
    parser.add_argument("--run-name", help="nombre de la carpeta del run (mismo nombre = continuar)")
    parser.add_argument("--fresh", action="store_true", help="empezar un run nuevo en otra carpeta")
    add_set_argument(parser)


def add_set_argument(parser: argparse.ArgumentParser, help: str = "cambiar un ajuste del perfil") -> None:
    """``--set key=value``, repeatable; ``overrides_from_cli`` reads it (``python -m labs sweep`` uses it too)."""
    parser.add_argument("--set", action="append", default=[], metavar="clave=valor", help=help)


def overrides_from_cli(items, profile: Profile) -> dict:
    """``--set key=value`` items as typed profile overrides; a keyword TRL removed is refused first."""
    overrides = {}
    for item in items:
        preflight.refuse_removed_keywords([item.split("=", 1)[0].strip()])
        key, value = parse_override(item, profile)
        overrides[key] = value
    return overrides


def report_failure(exc: BaseException, usage_errors: tuple, run_errors: tuple, run_prefix: str = "") -> int | None:
    """Print what a lab's command line caught and return its exit code; None when it is not ours to catch.

    2: the command cannot start as given (profile, pre-flight, data, environment): change the command.
    1: training started and stopped (the run folder's status.json says why): fix and relaunch to continue.
    """
    if isinstance(exc, usage_errors):
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    if isinstance(exc, run_errors):
        print(f"ERROR: {run_prefix}{exc}", file=sys.stderr)
        return 1
    if type(exc).__name__ == "EnvironmentNotReady":  # labs.doctor's message is already a whole sentence
        print(str(exc), file=sys.stderr)
        return 2
    return None
