"""What the course decides about E1-E3's runs: the values compared (G, beta), the budgets, the shared reference
run, and the plan of the runs (``planned_variants``: hours, disk). The variants' settings
that train are the student's, built in each notebook (``labs.exercises.student``).

Run names carry the profile name; a variant whose settings are identical to the reference recipe
(``reference_variant``) is that same run, shared between exercises (and, where the exercises' budget is
the lab's, shared with the student's finished L7.1 run).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from labs.core.paths import runs_dir
from labs.core.profiles import Profile, get_profile
from labs.core.runfolder import REFERENCE_PREFIX, RunFolder, write_json
from labs.core.spanish import duration_es
from labs.exercises.variant import Variant, settings_mismatch
from rewards import REWARD_NAMES

# Budget overrides per profile. None on ci: the ci profile already has the smallest budgets that run
# every code path, and with the lab's own budget the reference recipe *is* the L7.1 notebook's finished
# run (``reference_variant``), so the test suite trains it once, not once more for the exercises.
SMOKE_OVERRIDES: dict[str, dict] = {}
# The exercises' default budget on a 5090: 250 steps per variant instead of the lesson's 500. The rule
# (``budget_steps``, checked by a test against labs.vram.timeplan): the most steps, in whole checkpoints
# (save_steps), at which the longest exercise, E1 (its G=16 variant generates twice the reference's
# completions per step), plus the shared reference run fits in ``EXERCISE_HOURS`` planned hours, one
# evening. 250 steps still give the trend tests and the hacking detector hundreds of logged points. With
# another budget the reference is no longer the student's 500-step L7.1 run, so it runs once (planned
# about 1.3 h) and E1, E2 and E3 share it. ``python -m labs sweep E1 --set max_steps=N`` changes it.
BUDGETS: dict[str, dict] = {"rtx5090": {"max_steps": 250}, "rtx5090-base": {"max_steps": 250}}
EXERCISE_HOURS = 5.0
BUDGET_FILE = "_sweep_logs/presupuesto-{profile}.json"  # under the runs folder: the budget a sweep used
LESSON_GROUP_SIZES = (4, 16)
# On ci the larger G is the recipe's own G = 4 (shared with the reference run) and the smaller is 2:
# one extra short run instead of a G = 16 (or 8) one that would multiply the completions of the test suite.
GROUP_SIZES: dict[str, tuple[int, int]] = {"ci": (2, 4)}
E3_BETAS = (0.0, 0.2)  # the lesson: "sube beta a 0.2 y bájalo a 0.0", against the recipe's value
# On ci, beta = 0 (no reference model, no logged KL) and the recipe's beta already run every code path;
# a third smoke run would only add minutes.
E3_BETAS_BY_PROFILE: dict[str, tuple[float, ...]] = {"ci": (0.0,)}
# The planned E2 run's rewards (route, rehearsal); the trained one is the student's list.
PLANNED_E2_REWARDS = ("format_reward", "soft_format_reward")


def is_smoke_test(profile: Profile) -> bool:
    return profile.name == "ci"


def budget_note(profile: Profile, runs_root=None) -> str:
    """What the numbers of this profile can and cannot say, in Spanish."""
    if is_smoke_test(profile):
        return (
            f"Perfil '{profile.name}': esto es una PRUEBA DE HUMO. Cada variante entrena "
            f"{profile_for(profile).max_steps} pasos y evalúa {profile_for(profile).eval_size} problemas, solo para "
            "comprobar que todo el código corre de principio a fin. Los números de abajo se calculan de verdad, "
            "pero con tan pocos pasos no dicen nada sobre la pregunta del ejercicio: para contestarla usa el "
            "perfil 'rtx5090' (o, como mínimo, 'cpu')."
        )
    if profile.use_cpu:
        return (
            f"Perfil '{profile.name}': presupuesto reducido de CPU ({profile.model}, {profile.max_steps} pasos, "
            f"{profile.eval_size} problemas de evaluación). Las tendencias orientan, pero con tan pocos pasos y "
            "problemas la mayoría de diferencias no serán significativas; las conclusiones, con 'rtx5090'."
        )
    budget = profile_for(profile, runs_root=runs_root)
    recorded = recorded_budget(profile, runs_root)
    source = (
        f"el que guardó tu último barrido ({', '.join(f'{k}={v}' for k, v in recorded.items())})" if recorded
        else f"el de los ejercicios: {budget.max_steps} pasos en lugar de los {profile.max_steps} de la lección, para que "
        f"cada ejercicio, con la ejecución de referencia que comparten, quepa en unas {EXERCISE_HOURS:g} h"
    )
    return (
        f"Perfil '{profile.name}' ({profile.model}): presupuesto {source}; {budget.eval_size} problemas de "
        "evaluación. Cada variante tarda horas: lánzalas en una terminal (python -m labs sweep E1|E2|E3), que "
        "continúa donde se quedó si la interrumpes; este cuaderno solo lee las carpetas."
    )


def budget_steps(profile: Profile, hours: float = EXERCISE_HOURS) -> int:
    """The rule behind ``BUDGETS``: most steps (whole checkpoints) for E1 plus the reference in ``hours``."""
    from labs.vram.timeplan import time_plan

    best, steps = profile.save_steps, profile.save_steps
    while steps <= profile.max_steps:
        p = profile.replace(max_steps=steps)
        runs = [p] + [p.replace(**_planned_group_settings(p, g)) for g in group_sizes(profile)]
        if sum(time_plan(r).hours for r in runs) > hours:
            break
        best, steps = steps, steps + profile.save_steps
    return best


def planned_hours(variants: Sequence[Variant], profile: Profile, runs_root=None) -> float:
    """Planned hours (labs.vram.timeplan) of the variants not finished yet; 0 on the CPU profiles."""
    if profile.use_cpu:
        return 0.0
    from labs.vram.timeplan import time_plan

    root = Path(runs_root) if runs_root is not None else runs_dir()
    return sum(time_plan(v.profile(profile)).hours for v in variants if not RunFolder(root / v.name).is_finished())


def planned_hours_es(variants: Sequence[Variant], profile: Profile, runs_root=None) -> str:
    from labs.vram.timeplan import LABEL_ES

    return f"unas {duration_es(planned_hours(variants, profile, runs_root) * 3600)} ({LABEL_ES})"


def budget_path(profile: Profile, runs_root=None) -> Path:
    root = Path(runs_root) if runs_root is not None else runs_dir()
    return root / BUDGET_FILE.format(profile=profile.name)


def recorded_budget(profile: Profile, runs_root=None) -> dict:
    """The ``--set`` budget the last ``python -m labs sweep`` of this profile used ({} if none)."""
    try:
        return dict(json.loads(budget_path(profile, runs_root).read_text(encoding="utf-8")))
    except (FileNotFoundError, ValueError, TypeError):
        return {}


def save_budget(profile: Profile, budget: dict, runs_root=None) -> Path:
    """Remember a sweep's ``--set`` budget, so the other exercises and the notebooks use the same one."""
    return write_json(budget_path(profile, runs_root), dict(budget))


def resolve_profile(profile: Profile | str | None) -> Profile:
    return profile if isinstance(profile, Profile) else get_profile(profile)


def recipe_overrides(profile: Profile) -> dict:
    """The student's saved knobs (the L7.1 notebook, ``labs.l71.settings``) that differ from ``profile``: every
    exercise run starts from the student's recipe, as the L7.1 run does, so a variant differs from its reference
    only in its one change."""
    from labs.l71 import settings

    overrides, _ = settings.load(profile, echo=lambda _: None)
    return overrides


def base_overrides(profile: Profile, budget: dict | None = None, runs_root=None) -> dict:
    """Settings every exercise variant of this profile changes: the student's saved recipe (``recipe_overrides``),
    the exercises' budget (``BUDGETS``), then ``budget`` (a sweep's ``--set``), or when it is None the budget the
    last sweep recorded."""
    extra = recorded_budget(profile, runs_root) if budget is None else budget
    return {**recipe_overrides(profile), **SMOKE_OVERRIDES.get(profile.name, {}), **BUDGETS.get(profile.name, {}),
            **extra}


def profile_for(profile: Profile, budget: dict | None = None, runs_root=None) -> Profile:
    """The profile with the exercises' budget applied."""
    return profile.replace(**base_overrides(profile, budget, runs_root))


def lab_run_names(profile: Profile) -> tuple[str, ...]:
    """Where lab L7.1 leaves its run on this profile: the name the terminal and the notebook share, and the
    notebook's own name in earlier versions of the course (a student's finished run there still counts)."""
    return (f"l71-{profile.name}", f"l71-notebook-{profile.name}")


def reference_variant(profile: Profile | str | None = None, runs_root=None, budget: dict | None = None) -> Variant:
    """The student's recipe (saved knobs and reward functions: ``base_overrides``; the profile's and the course's
    when nothing is saved) on the exercises' budget.

    Its run folder is ``ref-<profile>``, unless that has not finished and the student's own L7.1 run
    (``lab_run_names``) finished with exactly these settings: then that run is the reference, so the
    lesson's recipe is never trained twice (hours on ``rtx5090``; minutes of the test suite on ``ci``).
    """
    profile = resolve_profile(profile)
    p = profile_for(profile, budget, runs_root)
    label = f"tu receta (G={p.num_generations}, beta={p.beta:g}, tus recompensas guardadas)"
    ref = Variant(f"{REFERENCE_PREFIX}{profile.name}", base_overrides(profile, budget, runs_root), None, label, "L7.1")
    root = Path(runs_root) if runs_root is not None else runs_dir()
    if RunFolder(root / ref.name).is_finished():
        return ref
    for name in lab_run_names(profile):
        folder = RunFolder(root / name)
        candidate = Variant(name, dict(ref.overrides), None, f"{label}, tu ejecución del L7.1", "L7.1")
        if folder.exists() and folder.is_finished() and not settings_mismatch(candidate, profile, folder):
            return candidate
    return ref


def _reward_names(variant: Variant) -> tuple[str, ...]:
    return tuple(REWARD_NAMES) if variant.rewards is None else tuple(variant.rewards)


def same_settings(a: Variant, b: Variant, profile: Profile) -> bool:
    return a.profile(profile).as_dict() == b.profile(profile).as_dict() and _reward_names(a) == _reward_names(b)


def shared_with_reference(variant: Variant, profile: Profile, note: str, runs_root=None, budget=None) -> Variant:
    """The reference run itself when ``variant`` would train exactly the same thing, else ``variant``."""
    ref = reference_variant(profile, runs_root, budget)
    if same_settings(variant, ref, profile):
        return Variant(ref.name, dict(ref.overrides), ref.rewards, f"{variant.label} = {note}", ref.lab)
    return variant


def group_sizes(profile: Profile) -> tuple[int, int]:
    return GROUP_SIZES.get(profile.name, LESSON_GROUP_SIZES)


def _planned_group_settings(profile: Profile, g: int) -> dict:
    """For the plan only (hours, disk): G = ``g`` with the same prompts per step. The
    batch split the runs train with is the student's (E1's ``perfil_con_grupo``, ``labs.exercises.student``)."""
    completions = profile.prompts_per_step * g
    micro = profile.per_device_train_batch_size if completions % profile.per_device_train_batch_size == 0 else 1
    return {"num_generations": g, "per_device_train_batch_size": micro, "gradient_accumulation_steps": completions // micro}


def planned_variants(exercise: str, profile: Profile | str | None = None, runs_root=None, budget: dict | None = None) -> list[Variant]:
    """The runs the course plans for an exercise (their names, G, beta, rewards), before the student builds them.

    What the route and the rehearsal's estimates use; what the sweep trains is
    the student's (``labs.exercises.student``), saved from the exercise's notebook.
    """
    profile = resolve_profile(profile)
    base = profile_for(profile, budget, runs_root)
    common = base_overrides(profile, budget, runs_root)
    if exercise == "E2":
        ref = reference_variant(profile, runs_root, budget)
        return [Variant(ref.name, dict(ref.overrides), ref.rewards, "con corrección (tu receta)", ref.lab),
                Variant(f"e2-{profile.name}-solo-formato", common, PLANNED_E2_REWARDS, "solo formato (sin corrección)", "E2")]
    if exercise == "E1":
        planned = [(f"e1-{profile.name}-g{g}", _planned_group_settings(base, g), f"G={g}") for g in group_sizes(profile)]
    else:
        planned = [(f"e3-{profile.name}-beta{b:g}", {"beta": float(b)}, f"beta={b:g}") for b in e3_beta_values(profile, base)]
    return [shared_with_reference(Variant(name, {**common, **settings}, None, label, exercise), profile,
                                  "la receta de referencia", runs_root, budget) for name, settings, label in planned]


def e3_betas(profile: Profile) -> tuple[float, ...]:
    """The betas compared with the recipe's on this profile."""
    return E3_BETAS_BY_PROFILE.get(profile.name, E3_BETAS)


def e3_beta_values(profile: Profile, budgeted: Profile) -> list[float]:
    """Every beta E3 runs on this profile, the recipe's included, in increasing order."""
    return sorted(set(e3_betas(profile)) | {budgeted.beta})


def settings_table(variants: Sequence[Variant], profile: Profile | str | None = None) -> list[dict]:
    """The batch settings each variant trains with (E1 shows how they change with G)."""
    profile = resolve_profile(profile)
    rows = []
    for v in variants:
        p = v.profile(profile)
        rows.append(
            {
                "variante": v.label,
                "carpeta": v.name,
                "G (num_generations)": p.num_generations,
                "per_device_train_batch_size": p.per_device_train_batch_size,
                "gradient_accumulation_steps": p.gradient_accumulation_steps,
                "generation_batch_size": p.generation_batch_size,
                "prompts por paso": p.prompts_per_step,
                "beta": p.beta,
                "recompensas": ", ".join(_reward_names(v)),
                "pasos": p.max_steps,
            }
        )
    return rows
