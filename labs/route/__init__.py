"""The student's route on an RTX 5090: which notebook or command comes next, where it runs, how long.

``route(profile)`` lists the steps of the course in order, from notebook 00 to the C2b self-check, each with
where it runs (a terminal for anything that trains for hours, the notebook for what only reads or explains),
its planned hours and disk (``labs.vram.timeplan``: planned, not measured, until someone times a 5090), and
what to do before the next one (shut the kernel down: a vLLM engine keeps its GPU memory until its process
ends). ``render_es(steps)`` prints them for notebook 00; the README's 5090 table quotes the same terminal commands,
in order, without the figures (tests/test_route.py checks it).

The commands name no profile: from the saved choice on every command uses the saved one (and prints it first), so a
copied command never trains a profile the student did not choose; L7.2's command picks ``rtx5090`` itself.

The order is the one ``python -m labs next`` (``make`` on a GPU) follows: the doctor, a first rehearsal (the course's
recipe: it recommends the profile), the saved profile, the student's recipe (L7.1's sections 1-3, saved per profile),
the rehearsal of that recipe, then L7.1, which trains what was rehearsed.
"""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.profiles import PROFILES, Profile, get_profile
from labs.core.spanish import duration_es
from labs.vram.timeplan import LABEL_ES, time_plan

# what outlook_es recommends for the main run before a rehearsal measures anything; route_profile prints its route
RECOMMENDED_BEFORE_MEASURING = "rtx5090-base"
L72_PROFILE = "rtx5090"  # the lead's decision (issue 25 item 3): L7.2 stays on the instruct profile
TERMINAL = "terminal"
NOTEBOOK = "cuaderno"
SHUT_DOWN_ES = (
    "Al acabar, apaga su kernel (Kernel > Shut Down Kernel): un motor vLLM o un modelo cargado retiene la memoria "
    "de la GPU hasta que termina su proceso, y el siguiente entrenamiento no cabría."
)


@dataclass(frozen=True)
class Step:
    where: str  # TERMINAL or NOTEBOOK
    what: str  # the command, or the notebook's file name
    why: str  # Spanish: what it does
    hours: float | None = None  # planned (labs.vram.timeplan); None: minutes, or depends on the connection
    disk_gb: float | None = None  # planned disk it adds
    after: str = ""  # Spanish: what to do before the next step


def _exercise_hours(profile: Profile) -> list[tuple[str, float, float]]:
    """(exercise, planned hours, planned disk) in the order E1, E2, E3, the shared reference counted once."""
    from labs.exercises.variants import planned_variants

    done: set[str] = set()
    out = []
    for name in ("E1", "E2", "E3"):
        new = [v for v in planned_variants(name, profile, runs_root="/nonexistent", budget={}) if v.name not in done]
        done |= {v.name for v in new}
        plans = [time_plan(v.profile(profile)) for v in new]
        peak = max((p.checkpoint_gb - p.final_gb for p in plans), default=0.0)  # one run trains at a time
        out.append((name, sum(p.hours for p in plans), sum(p.final_gb for p in plans) + peak))
    return out


def route(profile: Profile | str | None = "rtx5090") -> list[Step]:
    """The course's steps on ``profile`` (the 5090's by default), in order."""
    from labs.doctor.checks import COURSE_BACKENDS
    from labs.doctor.downloads import downloads_for

    profile = profile if isinstance(profile, Profile) else get_profile(profile)
    l72_profile = get_profile(L72_PROFILE)  # L7.2 teaches Unsloth's mechanics on the lesson's instruct model
    l71, l72 = time_plan(profile), time_plan(l72_profile, "unsloth")
    first = sum(d.bytes / 1e9 for d in downloads_for(profile, ("trl",)) if d.from_hub)
    unsloth = sum(d.bytes / 1e9 for d in downloads_for(l72_profile, COURSE_BACKENDS)
                  if d.from_hub and "unsloth" in d.name.lower())
    steps = [
        Step(TERMINAL, "make setup", "instala la pila de GPU (requirements-gpu.txt) en .venv-gpu (make la elige al ver la GPU); "
             "después, source .venv-gpu/bin/activate"),
        Step(NOTEBOOK, "00_empieza_aqui.ipynb", "el doctor, tu perfil y esta ruta (lo demás, en 00b_apendice.ipynb)"),
        Step(TERMINAL, "python -m labs doctor", "comprueba controlador, torch (sm_120), versiones, disco, hub y wandb"),
        Step(TERMINAL, "python -m labs rehearse", "ensayo de unos 10 minutos de todo el recorrido en tu GPU, antes de las horas de verdad "
             "(aún sin tu receta: con la del curso); termina recomendando el perfil del run principal"),
        Step(TERMINAL, "python -m labs profile --accept", "guarda el perfil recomendado (o --choose <perfil>): desde ahí todos los labs, "
             "cuadernos y barridos lo usan"),
        Step(NOTEBOOK, "L6_de_policy_gradient_a_grpo.ipynb", "la teoría: de policy gradient a GRPO (minutos, sin GPU)"),
        Step(NOTEBOOK, "L7_1_grpo_trl_vllm.ipynb", "secciones 1-3, antes del run: escribes tus recompensas y eliges tu "
             "GRPOConfig; las celdas tras sus comprobaciones los guardan, y es lo que ensaya y entrena lo que sigue "
             "(minutos, sin GPU ni modelo)"),
        Step(TERMINAL, "python -m labs rehearse", "ensaya tu receta, la que acabas de guardar (unos 10 minutos): lo que "
             "entrenará el run de horas, en tu GPU; make lo hace solo cuando tu receta cambió desde el último ensayo"),
        Step(TERMINAL, "python -m labs l71", f"lab L7.1: GRPO con TRL y vLLM, con tus recompensas y tus ajustes; {l71.breakdown_es()}",
             l71.hours, l71.checkpoint_gb + first, f"La primera vez descarga el modelo (unos {_gb(first)} GB, incluidos en el disco de arriba)."),
        Step(NOTEBOOK, "L7_1_grpo_trl_vllm.ipynb", "el resto (secciones 4-11): la receta paso a paso; lee el run de la "
             "terminal sin entrenar",
             after=SHUT_DOWN_ES),
        Step(TERMINAL, "python -m labs vram", "el plan de memoria de las dos rutas (segundos)"),
        Step(TERMINAL, "python -m labs l72", f"lab L7.2: Unsloth con Standby, siempre sobre el modelo "
             f"instruct de la lección ({l72_profile.name}, lo elige la orden) (el run que se califica es el del L7.1); {l72.breakdown_es()}",
             l72.hours, l72.checkpoint_gb + unsloth, f"La primera vez descarga la copia de Unsloth del modelo (como mucho {_gb(unsloth)} GB, incluidos)." if unsloth else ""),
        Step(NOTEBOOK, "L7_2_unsloth_standby.ipynb", "Unsloth paso a paso y la comparación con L7.1; reutiliza el run terminado",
             after=SHUT_DOWN_ES),
        Step(NOTEBOOK, "L7_3_mas_alla_de_una_gpu.ipynb", "cuándo pasar a varias GPU, qué disposición y con qué órdenes (minutos, sin entrenar)"),
    ]
    notebooks = {"E1": "E1_tamano_de_grupo.ipynb", "E2": "E2_reward_hacking.ipynb", "E3": "E3_peso_kl.ipynb"}
    functions = {"E1": "perfil_con_grupo", "E2": "recompensas_sin_correccion", "E3": "perfil_con_beta"}
    for name, hours, disk in _exercise_hours(profile):
        steps.append(Step(NOTEBOOK, notebooks[name], f"hasta tus variantes: escribes {functions[name]} y la celda "
                          "siguiente a su comprobación las guarda (lo que entrena el barrido)"))
        steps.append(Step(TERMINAL, f"python -m labs sweep {name}",
                          f"las ejecuciones de tus variantes de {name}, una tras otra (reanudable)", hours, disk))
        steps.append(Step(NOTEBOOK, notebooks[name], f"el resto: lee las ejecuciones de {name} y las compara",
                          after=SHUT_DOWN_ES if name == "E3" else ""))
    from labs.exercises.variants import profile_for

    e4 = time_plan(profile_for(profile, budget={}))  # one run of the recipe with the exercises' budget
    steps.append(Step(NOTEBOOK, "E4_tu_recompensa.ipynb", "escribes tu recompensa y la compruebas contra los hacks; "
                      "el cuaderno te da la orden de la terminal que la entrena"))
    steps.append(Step(TERMINAL, "python -m labs l71 --lab E4 --rewards ... (la orden exacta sale en el cuaderno E4)",
                      "tu recompensa junto a las tres de la lección, con el presupuesto de los ejercicios (reanudable)",
                      e4.hours, e4.checkpoint_gb))
    steps.append(Step(NOTEBOOK, "C2b_rubrica.ipynb", "autoevaluación con el evaluador del instructor y tus explicaciones"))
    return steps


def _gb(x: float) -> str:
    return f"{x:.1f}".replace(".", ",")


def render_es(steps: list[Step]) -> str:
    lines = []
    for i, s in enumerate(steps, start=1):
        cost = []
        if s.hours is not None:
            cost.append(f"{duration_es(s.hours * 3600)} ({LABEL_ES})")
        if s.disk_gb is not None:
            cost.append(f"disco: hasta {_gb(s.disk_gb)} GB")
        head = f"{i:>2}. [{s.where}] {s.what}"
        lines.append(head + (f"  —  {'; '.join(cost)}" if cost else ""))
        lines.append(f"      {s.why}")
        if s.after:
            lines.append(f"      {s.after}")
    total = sum(s.hours for s in steps if s.hours is not None)
    lines.append(f"\nTotal de los entrenamientos en la GPU: unas {duration_es(total * 3600)} ({LABEL_ES}).")
    return "\n".join(lines)


def route_profile() -> tuple[Profile, str]:
    """The profile notebook 00 prints the route for, and why (Spanish).

    The saved choice (``python -m labs profile``) when there is one, even on a machine without a GPU (the
    route only plans, it loads nothing); else ``COURSE_PROFILE`` when it names a GPU profile; else the
    profile the outlook recommends (``recommended_profile``: the rehearsal's, else the rules' rtx5090-base).
    """
    import os

    from labs.core import profile_choice
    from labs.core.profiles import PROFILE_ENV

    saved = profile_choice.read_choice()
    if saved and "error" not in saved and not PROFILES[saved["profile"]].use_cpu:
        return get_profile(saved["profile"]), f"el perfil que guardaste ({saved['path']})"
    env = os.environ.get(PROFILE_ENV, "").strip().lower()
    if env in PROFILES and not PROFILES[env].use_cpu:
        return get_profile(env), f"{PROFILE_ENV}={env}"
    recommended, source = recommended_profile()
    return get_profile(recommended), (
        f"aún no has guardado un perfil de GPU: es la ruta del perfil que {source} recomienda; "
        "python -m labs profile --accept guarda el recomendado y esta celda imprime la suya"
        + (profile_choice.unusable_note() if saved else ""))


def recommended_profile() -> tuple[str, str]:
    """The GPU profile the outlook recommends for the main run, and who says so (Spanish): the newest GPU
    rehearsal's recommendation (``labs.grading.outlook.recommend``), else the rules' ``RECOMMENDED_BEFORE_MEASURING``."""
    from labs.grading import outlook

    path = outlook.newest_rehearsal()
    record = outlook.read_rehearsal(path) if path else None
    rec = outlook.recommend(record) if record is not None else None
    if rec is not None and rec.profile is not None:
        return rec.profile, "el ensayo"
    return RECOMMENDED_BEFORE_MEASURING, "la rúbrica (sin ensayo todavía)"


def outlook_es(rehearsal: dict | None = None) -> str:
    """Before any training: what each 5090 profile can show for criteria 2 and 3 (Spanish).

    From the rehearsal's record when there is one (``labs.grading.outlook.recommend``); else what the rules
    themselves say before anything is measured, and the command that measures it.
    """
    from labs.core import ceiling
    from labs.core.diagnostics import MIN_DISCORDANT_SHARE, MIN_GAIN
    from labs.grading import outlook

    if rehearsal is None:
        path = outlook.newest_rehearsal()
        rehearsal = outlook.read_rehearsal(path) if path else None
    text = ""
    if rehearsal is not None:
        rec = outlook.recommend(rehearsal)
        if rec.profile is not None:
            return outlook.render_es(rec)
        text = rec.why_es + "\n\n"  # a CPU or unfinished rehearsal: say so, then what the rules say
    best = ceiling.highest_base_with_room(MIN_DISCORDANT_SHARE, MIN_GAIN)
    full = ceiling.LENGTH_FULL_SHARE
    cap = get_profile("rtx5090").max_completion_length
    return text + "\n".join([
        "Sin medidas todavía (el ensayo las toma), esto es lo que dicen las reglas de la rúbrica:",
        f"  [rtx5090] Criterio 2: la longitud media tiene que subir; una longitud plana solo se excusa si las "
        f"respuestas ya llenan el {full * 100:.0f} % de {cap} tokens, y un modelo instruct que ya razona paso a paso "
        f"responde mucho más corto y tiene poco motivo para alargarse: lo más probable es «no cumple».",
        f"  [rtx5090] Criterio 3: solo puede juzgar una mejora si el modelo falla al menos el {(1 - best) * 100:.1f} % de "
        f"los problemas (precisión base hasta el {best * 100:.1f} %); el ensayo mide la suya en unos 200 problemas.",
        "  [rtx5090-base] Criterios 2 y 3: Qwen3-4B-Base con el pase de formato parte de respuestas cortas y con "
        "errores que corregir: precisión y longitud tienen margen para subir (es donde R1-Zero vio crecer la longitud).",
        f"Por eso la ruta recomienda {RECOMMENDED_BEFORE_MEASURING} para el run principal (L7.1, ejercicios, E4) salvo que el ensayo diga "
        "otra cosa; L7.2 sigue en rtx5090. Mídelo: python -m labs rehearse ensaya el perfil guardado o, sin elección, "
        "rtx5090-base con su pase de formato (lo que va a correr); con --profile rtx5090 mide el modelo instruct. Guarda "
        "el perfil con python -m labs profile --accept.",
    ])


def l72_profile(name: str | None = None) -> tuple[Profile, str]:
    """The profile lab L7.2 runs on, and why (Spanish): the instruct ``rtx5090`` wherever a GPU profile applies.

    L7.2 teaches Unsloth's mechanics with Standby on the lesson's model; the graded main run is L7.1's. So a
    saved ``rtx5090-base`` (the main run's profile) sends L7.2 to ``rtx5090``; a name given here or in
    ``COURSE_PROFILE`` is the student's explicit word and is kept; the CPU profiles stay as they are.
    """
    import os

    from labs.core.profiles import PROFILE_ENV, default_profile_name

    if name:
        return get_profile(name), f"--profile {name}"
    chosen, why = default_profile_name()
    profile = get_profile(chosen)
    if profile.use_cpu or profile.name == L72_PROFILE or os.environ.get(PROFILE_ENV, "").strip():
        return profile, why
    return get_profile(L72_PROFILE), (
        f"L7.2 usa siempre {L72_PROFILE}, el modelo instruct de la lección: enseña Unsloth con Standby, y el run "
        f"que se califica es el del L7.1 con tu perfil {profile.name} ({why})")
