"""``python -m labs next``: the route's next terminal step on a GPU machine, run for the student (what ``make`` runs there).

The route (``labs.route.route``) goes doctor, rehearsal, saved profile, the recipe (sections 1-3 of the L7.1 notebook),
then L7.1. Which of them comes next is read from the run area, never guessed from a default: with no saved profile and
no rehearsal it is the rehearsal (it tries the recommended profile in ten minutes and ends recommending one); with a
rehearsal but no saved profile it is the student's own choice, so nothing trains and the command to save it is printed;
with a saved profile but no saved recipe, the notebook's sections to finish are named and nothing trains (never the
course's recipe in the student's place); with a recipe that changed since the last rehearsal, the rehearsal again (it
tries what the long run will train), and it says what changed; then lab L7.1 on that profile (a finished run returns
at once, an unfinished one continues from its checkpoint).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from labs.core import profile_choice
from labs.grading import outlook

ACCEPT_COMMAND = "python -m labs profile --accept"
BUDGET_KNOBS = ("max_steps", "max_completion_length")  # what the rehearsal's budget shrinks (labs.rehearsal.budget)
HELP_ES = (
    "Uso: python -m labs next [opciones del paso]\n"
    "Ejecuta el siguiente paso de terminal de la ruta (lo que hace make en una máquina con GPU): el ensayo si aún no "
    "hay ninguno; si ya lo hay y no has guardado perfil, solo te dice cómo guardarlo; sin tu receta guardada (secciones "
    "1-3 del cuaderno L7.1), solo te dice qué secciones faltan; si tu receta cambió desde el último ensayo, la ensaya; "
    "después, el lab L7.1 con ella. Las opciones pasan al paso."
)


def rehearsal_changes_es(rehearsal: Path, profile_name: str) -> list[str] | None:
    """How the saved recipe differs from the one the rehearsal at ``rehearsal`` (its ``rehearsal.json``) tried, beyond
    the rehearsal's budget (Spanish lines; [] when it is the same); None when the rehearsal left no L7.1 run to read."""
    from labs.core.profiles import get_profile
    from labs.core.runfolder import RUN_JSON, read_json
    from labs.l71 import recipe_identity

    try:
        rehearsed = recipe_identity.of_record(read_json(Path(rehearsal).parent / "l71" / RUN_JSON))
    except (OSError, ValueError):
        return None
    if rehearsed is None:
        return None
    saved = recipe_identity.saved(get_profile(profile_name))
    lines = recipe_identity.differences_es(rehearsed, saved, "el ensayo", "tu receta")
    return [line for line in lines if line.split(":")[0] not in BUDGET_KNOBS]


def next_step(root: Path | str | None = None) -> tuple[list[str], str]:
    """(the ``python -m labs`` arguments of the next step, empty when the student must act first; why, in Spanish)."""
    record = profile_choice.read_choice(root)
    rehearsal = outlook.newest_rehearsal(root)
    if record is not None and "error" not in record:
        from labs.core.profiles import get_profile
        from labs.l71 import recipe_identity

        name = record["profile"]
        missing = recipe_identity.missing_sections_es(get_profile(name), root)
        if missing:
            return [], (f"guardaste el perfil {name}, pero aún no tu receta: termina en el cuaderno L7.1 "
                        f"{' y '.join(missing)} y vuelve a ejecutar make. No entreno nada hasta entonces: el run de "
                        "horas entrena lo que tú elijas, no la receta del curso en tu lugar")
        changed = rehearsal_changes_es(rehearsal, name) if rehearsal is not None else None
        if changed and rehearsal is not None:
            return ["rehearse"], (f"tu receta cambió desde el último ensayo ({rehearsal.parent.name}: "
                                  + "; ".join(changed) + "): toca ensayarla, unos 10 minutos, antes del run de horas; "
                                  "después, make sigue con el L7.1")
        return ["l71"], (f"guardaste el perfil {name} ({record['path']}) y tu receta (secciones 1-3 del cuaderno "
                         "L7.1): toca el lab L7.1 con ellos")
    broken = f" La elección guardada no vale ({record['error']})." if record else ""
    failed = rehearsal_failure(rehearsal)
    if failed is not None:
        # a failed rehearsal recommends nothing worth saving: the next step is the rehearsal again, once fixed
        return ["rehearse"], (f"el último ensayo ({rehearsal}) falló: {failed} Toca repetirlo; si vuelve a fallar, "
                              f"corrige lo que dice su mensaje antes de volver a ejecutar make.{broken}")
    if rehearsal is not None:
        return [], (f"ya hay un ensayo ({rehearsal}) y no has guardado perfil.{broken} Guarda el recomendado con "
                    f"{ACCEPT_COMMAND} (o elige con {profile_choice.CHOOSE_COMMAND}) y vuelve a ejecutar make")
    return ["rehearse"], ("aún no hay ensayo ni perfil guardado: toca el ensayo de unos 10 minutos, que termina "
                          f"recomendando el perfil del run principal.{broken}")


def rehearsal_failure(path: Path | None) -> str | None:
    """Why the rehearsal at ``path`` failed, in Spanish; None when there is none or it passed."""
    if path is None:
        return None
    try:
        record = outlook.read_rehearsal(path)
    except ValueError as exc:
        return str(exc)
    if record.get("status") != "failed" and not record.get("failure"):  # the rehearsal writes both when it fails
        return None
    failure = record.get("failure") or {}
    return failure.get("message_es") or "su registro no dice por qué."


def main(argv: list[str] | None = None) -> int:
    argv = list(argv or [])
    if {"-h", "--help"} & set(argv):
        print(HELP_ES)
        return 0
    step, why = next_step()
    if not step:
        print(f"[ruta] {why}.")
        return 0
    print(f"[ruta] siguiente paso: python -m labs {' '.join(step + argv)} ({why}).", flush=True)
    # A child process, not an import: the route sits below the lab commands it starts (tests/test_layout.py).
    code = subprocess.call([sys.executable, "-m", "labs", *step, *argv])
    if code != 0:  # make stops here, and says why in the student's language
        print(f"[ruta] El paso python -m labs {' '.join(step + argv)} falló (código de salida {code}): su mensaje "
              "está arriba. Corrígelo y vuelve a ejecutar make, que repite este paso.", file=sys.stderr)
    return code
