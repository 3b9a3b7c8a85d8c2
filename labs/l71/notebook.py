"""The L7.1 notebook's first decision: is there already a run of this profile, and what to do with it.

The notebook and ``python -m labs l71`` share one run folder per profile (``runs/l71-<profile>``), so a run
is never trained twice. ``open_run`` returns the ``Lab`` the notebook's cells walk through:

* a finished run (from the terminal or an earlier session): read-only, the cells show its data, its
  evaluation and its curves without loading a model;
* an unfinished run or no run on a GPU profile (hours): ``RunNotReady`` with the terminal command, unless
  the student asks to train here (``entrenar_aqui=True``, which continues from the last checkpoint);
* on the CPU profiles (minutes) the notebook trains or continues the run itself.
"""

from __future__ import annotations

from labs.core.profiles import Profile, get_profile, student_command
from labs.core.spanish import duration_es
from labs.l71 import settings, student_rewards
from labs.l71.lab import Lab, new_run


# What a section 5-10 cell prints while section 4 opened no run (``listo`` is False): never silence.
ESPERA_ES = ("Esta celda espera a la sección 4: termina lo que dice allí (el ejercicio por escribir, o la orden que "
             "lanza el run) y vuelve a ejecutar el cuaderno.")


class RunNotReady(RuntimeError):
    """The run is not finished and should be trained in a terminal; the message says how, in Spanish."""


def terminal_command(profile: Profile) -> str:
    """The terminal command that trains ``profile``'s L7.1 run (``--profile`` only when it is not the one in use)."""
    return student_command("l71", profile)


def _planned(profile: Profile) -> str:
    if profile.use_cpu:
        return ""
    from labs.vram.timeplan import LABEL_ES, time_plan

    return f" (unas {duration_es(time_plan(profile).hours * 3600)}, {LABEL_ES})"


class NotOpened:
    """Section 4's ``lab`` while an exercise the run needs is unwritten: the run folder's path; nothing loaded or trained."""

    read_only = True
    opened = False  # the cells after section 4 skip their work (``listo = lab.opened``)

    def __init__(self, profile: Profile):
        self.profile = profile
        self.run = new_run(profile)


def open_run(profile: Profile | str | None = None, entrenar_aqui: bool = False, echo=print, listo: bool = True,
             avisar: bool = False):
    """The Lab for this profile's shared run folder, read-only when it already finished (see the module).

    It trains the reward functions the notebook saved in section 1 (``labs.l71.student_rewards``), as
    ``python -m labs l71`` does; the course's when none are saved. ``listo=False`` (an exercise the run needs is
    unwritten: ``labs.l71.pending``) opens nothing and returns a ``NotOpened``. ``avisar=True`` (the notebook) says
    ``RunNotReady``'s message (what to do) and returns a ``NotOpened`` instead of raising: no traceback in a Run All.
    """
    try:
        return _open(profile, entrenar_aqui, echo, listo)
    except RunNotReady as exc:
        if not avisar:
            raise
        echo(str(exc))
        return NotOpened(profile if isinstance(profile, Profile) else get_profile(profile))


def other_recipe_es(profile: Profile, run) -> str | None:
    """When the finished run ``run`` trained another recipe than the one saved now: what differs and the command that
    retrains (Spanish); None when it trained the saved recipe."""
    from labs.core.runfolder import RUN_JSON, read_json
    from labs.l71 import recipe_identity

    try:
        have = recipe_identity.of_record(read_json(run.path(RUN_JSON)))
    except (OSError, ValueError):
        return None
    lines = recipe_identity.differences_es(have or {}, recipe_identity.saved(profile), run.root.name,
                                           "tu receta guardada") if have else []
    if not lines:
        return None
    return (f"Ojo: {run.root.name} entrenó otra receta que la que tienes guardada ({'; '.join(lines)}). Lo que leen "
            f"las celdas siguientes es esa otra. Para entrenar la tuya, en una terminal: {terminal_command(profile)} "
            "--fresh (empieza de cero con tu receta).")


def _open(profile, entrenar_aqui, echo, listo):
    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    if not listo:
        return NotOpened(profile)
    run = new_run(profile)
    status = run.status() or {}
    command = terminal_command(profile)
    if run.is_finished():
        echo(f"Ya hay un run terminado en {run.root} ({status.get('step')} pasos): el cuaderno lo lee, sin "
             "cargar el modelo ni entrenar. Para empezar otro: " + command + " --fresh")
        other = other_recipe_es(profile, run)
        if other:
            echo(other)
        return Lab(profile)  # only read: run.json says which functions trained it
    funcs, _ = student_rewards.load(echo=echo)
    if funcs is None:
        student_rewards.course_note(echo=echo)
    # the saved knobs too, as the terminal's run: run.json's profile and recipe then say what the notebook trains
    overrides, source = settings.load(profile, echo=echo)
    here = entrenar_aqui or profile.use_cpu
    if run.exists():
        where = f"Hay un run sin terminar en {run.root} (paso {status.get('step', 0)} de {profile.max_steps})."
        if not here:
            raise RunNotReady(
                f"{where} Termínalo en una terminal con {command}: continúa desde su último checkpoint{_planned(profile)}. "
                "Cuando termine, vuelve a ejecutar este cuaderno: leerá el run sin entrenar. (Para continuarlo aquí, "
                "pon ENTRENAR_AQUI = True; el entrenamiento queda atado a esta pestaña del navegador.)"
            )
        echo(f"{where} Lo continúo aquí desde su último checkpoint.")
        return Lab(profile, reward_funcs=funcs, settings_from=source, **overrides)
    if not here:
        raise RunNotReady(
            f"Aún no hay ningún run del perfil '{profile.name}' en {run.root}. Lánzalo en una terminal: {command}"
            f"{_planned(profile)}. Cuando termine, vuelve a ejecutar este cuaderno: leerá el run sin entrenar. "
            "(Para entrenar aquí, pon ENTRENAR_AQUI = True.)"
        )
    echo(f"No hay ningún run del perfil '{profile.name}': lo entreno aquí, en {run.root} (es el mismo que haría {command}).")
    return Lab(profile, reward_funcs=funcs, settings_from=source, **overrides)
