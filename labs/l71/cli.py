"""``python -m labs l71``: the whole L7.1 lab from a terminal (long runs belong there, not in a browser tab)."""

from __future__ import annotations

import argparse
import json
import sys

from labs.core import distributed
from labs.core.profiles import get_profile
from labs.l71 import settings, student_rewards
from labs.l71.lab import LAB, run_lab
from labs.training import models, recipe
from labs.training.options import add_run_arguments, overrides_from_cli, report_failure


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labs l71",
        description="Laboratorio L7.1: GRPO en GSM8K con GRPOTrainer de TRL y vLLM en modo colocate.",
    )
    add_run_arguments(parser)
    parser.add_argument(
        "--rewards",
        help="funciones de recompensa separadas por comas (por defecto las tres de la lección); una tuya se "
        "escribe modulo:funcion o archivo.py:funcion",
    )
    parser.add_argument("--lab", default=LAB, help="etiqueta del laboratorio en run.json (L7.1, E1, E2, E3)")
    parser.add_argument(
        "--accept-changes", action="store_true",
        help="continuar un run sin terminar con ajustes o funciones de recompensa distintos de los de su run.json; "
        "el cambio queda apuntado en run.json con el paso desde el que rige",
    )
    parser.add_argument("--variante-de", help="qué función tuya construyó esta variante y dónde se guardó "
                        "(lo pone python -m labs sweep; queda en run.json como variant_from)")
    parser.add_argument("--sin-ajustes", action="store_true",
                        help="no usar los ajustes guardados desde el cuaderno L7.1 (runs/_ajustes/)")
    parser.add_argument(student_rewards.COURSE_FLAG, dest="recompensas_del_curso", action="store_true",
                        help="entrenar las recompensas del curso (rewards/, más estrictas) en vez de las tuyas guardadas "
                        "desde la sección 1 del cuaderno L7.1 (runs/_ajustes/l71-recompensas.py)")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    finally:
        distributed.shutdown()  # under accelerate: close the process group before the interpreter exits


def _run(args) -> int:
    try:
        profile = get_profile(args.profile)
        # every lab label trains the student's recipe (labs.l71.recipe_identity): L7.1 itself, and E1-E3's
        # reference and variants with their one change on top (--set and --rewards win over what is saved)
        saved, settings_from = ({}, None) if args.sin_ajustes else settings.load(profile)
        overrides = {**saved, **overrides_from_cli(args.set, profile)}  # --set wins over the notebook's settings
        names = [n.strip() for n in args.rewards.split(",")] if args.rewards else None
        funcs = None  # by name, unless the student saved functions of those names (then those train)
        if not args.recompensas_del_curso:
            say = print if distributed.is_main_process() else (lambda _: None)
            saved_funcs, _ = student_rewards.load(echo=say)
            if saved_funcs is None:
                if names is None:
                    student_rewards.course_note(echo=say)
            else:
                funcs = student_rewards.pick(saved_funcs, names)
        path = run_lab(
            profile, run_name=args.run_name, fresh=args.fresh, reward_names=names, lab=args.lab,
            accept_changes=args.accept_changes, settings_from=settings_from, variant_from=args.variante_de,
            reward_funcs=funcs, **overrides,
        )
    except Exception as exc:  # noqa: BLE001 - report_failure re-raises what is not a known failure
        code = report_failure(exc, (ValueError, models.ModelNotAvailable),  # profile, pre-flight, data, rewards
                              (recipe.RunFailed,), "el entrenamiento se detuvo. ")
        if code is None:
            raise
        return code
    if distributed.is_main_process():
        print(json.dumps({"run_dir": str(path)}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
