"""``python -m labs doctor``: look at this machine, print the table, exit 1 if a lab cannot run."""

from __future__ import annotations

import argparse
import json

from labs.core.profiles import PROFILES
from labs.doctor.checks import errors, evaluate
from labs.doctor.probe import probe
from labs.doctor.report import format_report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m labs doctor",
        description="Comprueba que esta máquina puede ejecutar los labs del curso y dice cómo arreglar lo que falte.",
    )
    parser.add_argument("--profile", help=f"perfil a comprobar ({', '.join(PROFILES)}); por defecto, el que usarían los labs")
    parser.add_argument("--json", action="store_true", help="imprime lo observado (el registro del sondeo) en JSON")
    parser.add_argument("--no-hub", action="store_true", help="no intenta conectar con el hub de Hugging Face")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    record = probe(check_hub=not args.no_hub)
    checks = evaluate(record, args.profile)
    if args.json:
        print(json.dumps(record.to_dict(), ensure_ascii=False, indent=2))
    else:
        print(format_report(checks, args.profile or record.profile.get("name")))
    return 1 if errors(checks) else 0
