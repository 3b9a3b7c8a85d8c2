"""``python -m labs <subcommand> [options]``: one entry point for every course command.

Each subcommand is a module with ``main(argv) -> int``; add a line to ``SUBCOMMANDS`` to add one.
Modules are imported only when chosen, so ``doctor`` works even where a lab's imports would fail.
"""

from __future__ import annotations

import importlib
import sys

SUBCOMMANDS: dict[str, str] = {
    "doctor": "labs.doctor",
    "notebooks": "labs.assign",
    "profile": "labs.route.choose",
    "l71": "labs.l71",
    "l72": "labs.l72",
    "next": "labs.route.next_step",
    "grade": "labs.grading",
    "rehearse": "labs.rehearsal",
    "sweep": "labs.exercises.sweep",
    "vram": "labs.vram",
}


def usage() -> str:
    return ("Uso: python -m labs <subcomando> [opciones]\n"
            f"Subcomandos disponibles: {', '.join(sorted(SUBCOMMANDS))}\n"
            "Ayuda de cada uno: python -m labs <subcomando> --help")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"Subcomando desconocido: '{name}'.\n{usage()}", file=sys.stderr)
        return 2
    from labs.route.announce import PROFILE_COMMANDS, profile_line_es

    if name in PROFILE_COMMANDS and not {"-h", "--help"} & set(rest):
        print(profile_line_es(rest, name), flush=True)
    module = importlib.import_module(SUBCOMMANDS[name])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
