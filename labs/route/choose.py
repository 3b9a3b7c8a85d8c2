"""``python -m labs profile``: show, choose or forget the profile every lab uses (``labs.core.profile_choice``).

- no option: the profile ``get_profile()`` returns here and why;
- ``--accept``: save what the newest rehearsal recommended (``labs.grading.outlook.recommend``);
- ``--choose NAME``: save NAME;
- ``--forget``: remove the saved choice (back to the automatic one).
"""

from __future__ import annotations

import argparse
import sys

from labs.core import profile_choice
from labs.core.profiles import PROFILES, ProfileError, default_profile_name, get_profile
from labs.grading import outlook

# What RUBRIC asks of an instruct run, said where the student chooses (issue 25 item 2).
INSTRUCT_NOTE_ES = (
    "Con rtx5090 (el modelo instruct de la lección) el criterio 2 exige igualmente que la longitud media suba "
    "(Kendall, p < 0.05); solo se excusa una longitud plana si los primeros pasos ya llenan el 80 % de "
    "max_completion_length, y las respuestas de un instruct quedan muy por debajo."
)


def show() -> int:
    name, why = default_profile_name()
    print(f"Perfil en uso: {name} ({why}).")
    if name in PROFILES:
        print(f"  {get_profile(name).description}")
    record = profile_choice.read_choice()
    if record is None:
        print(f"No hay elección guardada. Tras el ensayo: python -m labs profile --accept, o {profile_choice.CHOOSE_COMMAND}.")
    return 0


def save(name: str, why: str, source: str) -> int:
    path = profile_choice.save_choice(name, why=why, source=source)
    print(f"Guardado: desde ahora los labs, los cuadernos y los barridos usan el perfil {name.strip().lower()} "
          f"({path}). COURSE_PROFILE y --profile siguen mandando sobre esta elección.")
    if name.strip().lower() == outlook.hr.INSTRUCT_PROFILE:
        print(INSTRUCT_NOTE_ES)
    if not PROFILES[name.strip().lower()].use_cpu:
        print("En una máquina sin GPU CUDA esta elección no se aplica: allí los labs siguen en cpu y lo dicen.")
    now, why_now = default_profile_name()
    print(f"Aquí, ahora: {now} ({why_now}).")
    return 0


def accept() -> int:
    path = outlook.newest_rehearsal()
    if path is None:
        print("No encuentro ningún ensayo en la carpeta de runs: ejecuta primero python -m labs rehearse "
              f"(o elige a mano con {profile_choice.CHOOSE_COMMAND}).", file=sys.stderr)
        return 2
    rec = outlook.recommend(outlook.read_rehearsal(path))
    print(outlook.render_es(rec).split("\nPara guardarlo:")[0])
    if rec.profile is None:
        print(f"No hay recomendación que aceptar ({path}). Elige a mano con {profile_choice.CHOOSE_COMMAND}.",
              file=sys.stderr)
        return 2
    return save(rec.profile, rec.why_es, f"ensayo {path}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labs profile",
        description="Muestra, guarda u olvida el perfil que usan todos los labs (se guarda en la carpeta de runs).")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--choose", metavar="PERFIL", help=f"guardar este perfil ({', '.join(sorted(PROFILES))})")
    group.add_argument("--accept", action="store_true", help="guardar el perfil que recomendó el último ensayo")
    group.add_argument("--forget", action="store_true", help="borrar la elección guardada")
    args = parser.parse_args(argv)
    try:
        if args.choose:
            return save(args.choose, "", "manual")
        if args.accept:
            return accept()
        if args.forget:
            removed = profile_choice.forget_choice()
            print("Elección borrada." if removed else "No había ninguna elección guardada.")
            return show()
        return show()
    except (ProfileError, ValueError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
