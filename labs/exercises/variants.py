"""The variants each exercise runs (E1 group size, E2 rewards, E3 beta) and the budgets they run on.

Run names carry the profile name; a variant whose settings are identical to the reference recipe
(``reference_variant``) is that same run, shared between exercises (and, where the exercises' budget is
the lab's, shared with the student's finished L7.1 run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from labs.core.paths import runs_dir
from labs.core.profiles import Profile, get_profile
from labs.core.runfolder import RunFolder
from labs.exercises.variant import Variant, settings_mismatch
from rewards import REWARD_NAMES

# Budget overrides per profile. None on ci: the ci profile already has the smallest budgets that run
# every code path, and with the lab's own budget the reference recipe *is* the L7.1 notebook's finished
# run (``reference_variant``), so the test suite trains it once, not once more for the exercises.
SMOKE_OVERRIDES: dict[str, dict] = {}
LESSON_GROUP_SIZES = (4, 16)
# On ci the larger G is the recipe's own G = 4 (shared with the reference run) and the smaller is 2:
# one extra short run instead of a G = 16 (or 8) one that would multiply the completions of the test suite.
GROUP_SIZES: dict[str, tuple[int, int]] = {"ci": (2, 4)}
E3_BETAS = (0.0, 0.2)  # the lesson: "sube beta a 0.2 y bájalo a 0.0", against the recipe's value
# On ci, beta = 0 (no reference model, no logged KL) and the recipe's beta already run every code path;
# a third smoke run would only add minutes.
E3_BETAS_BY_PROFILE: dict[str, tuple[float, ...]] = {"ci": (0.0,)}
E2_REWARDS = ("format_reward", "soft_format_reward")


def is_smoke_test(profile: Profile) -> bool:
    return profile.name == "ci"


def budget_note(profile: Profile) -> str:
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
    return (
        f"Perfil '{profile.name}': el presupuesto de la lección ({profile.model}, {profile.max_steps} pasos, "
        f"{profile.eval_size} problemas de evaluación). Cada variante tarda horas: el barrido continúa donde se "
        "quedó si lo interrumpes."
    )


def resolve_profile(profile: Profile | str | None) -> Profile:
    return profile if isinstance(profile, Profile) else get_profile(profile)


def base_overrides(profile: Profile) -> dict:
    """Settings every exercise variant of this profile changes (the smoke-test budget on ci)."""
    return dict(SMOKE_OVERRIDES.get(profile.name, {}))


def profile_for(profile: Profile) -> Profile:
    """The profile with the exercises' budget applied."""
    return profile.replace(**base_overrides(profile))


def lab_run_names(profile: Profile) -> tuple[str, ...]:
    """Where lab L7.1 leaves its run on this profile: the command line's and the notebook's default names."""
    return (f"l71-{profile.name}", f"l71-notebook-{profile.name}")


def reference_variant(profile: Profile | str | None = None, runs_root=None) -> Variant:
    """The lesson's recipe (three rewards, the profile's G and beta) on the exercises' budget.

    Its run folder is ``ref-<profile>``, unless that has not finished and the student's own L7.1 run
    (``lab_run_names``) finished with exactly these settings: then that run is the reference, so the
    lesson's recipe is never trained twice (hours on ``rtx5090``; minutes of the test suite on ``ci``).
    """
    profile = resolve_profile(profile)
    p = profile_for(profile)
    label = f"receta de la lección (G={p.num_generations}, beta={p.beta:g}, tres recompensas)"
    ref = Variant(f"ref-{profile.name}", base_overrides(profile), None, label, "L7.1")
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


def shared_with_reference(variant: Variant, profile: Profile, note: str, runs_root=None) -> Variant:
    """The reference run itself when ``variant`` would train exactly the same thing, else ``variant``."""
    ref = reference_variant(profile, runs_root)
    if same_settings(variant, ref, profile):
        return Variant(ref.name, dict(ref.overrides), ref.rewards, f"{variant.label} = {note}", ref.lab)
    return variant


def group_sizes(profile: Profile) -> tuple[int, int]:
    return GROUP_SIZES.get(profile.name, LESSON_GROUP_SIZES)


def group_size_overrides(profile: Profile, num_generations: int, prompts_per_step: int | None = None) -> dict:
    """Batch settings for G = ``num_generations`` with the same prompts per step as ``profile``.

    Completions per step = prompts x G. ``per_device_train_batch_size`` (one micro-batch) is kept when it
    divides that number (else the largest divisor of both), and ``gradient_accumulation_steps`` makes up
    the rest, so ``generation_batch_size = per_device x accumulation`` is divisible by G and
    ``generation_batch_size / G`` equals the prompts per step.
    """
    g = int(num_generations)
    if g < 2:
        raise ValueError("GRPO necesita al menos 2 generaciones por prompt (num_generations >= 2).")
    prompts = int(prompts_per_step or profile.prompts_per_step)
    if prompts < 1:
        raise ValueError("hace falta al menos un prompt por paso")
    completions = prompts * g
    per_device = math.gcd(profile.per_device_train_batch_size, completions)
    return {
        "num_generations": g,
        "per_device_train_batch_size": per_device,
        "gradient_accumulation_steps": completions // per_device,
    }


def e1_variants(profile: Profile | str | None = None, runs_root=None) -> list[Variant]:
    """G small and G large with the same prompts per step (see ``group_size_overrides``)."""
    profile = resolve_profile(profile)
    budget = profile_for(profile)
    out = []
    for g in group_sizes(profile):
        overrides = {**base_overrides(profile), **group_size_overrides(budget, g)}
        v = Variant(f"e1-{profile.name}-g{g}", overrides, None, f"G={g}", "E1")
        out.append(shared_with_reference(v, profile, "la receta de referencia", runs_root))
    return out


def e2_variants(profile: Profile | str | None = None, runs_root=None) -> list[Variant]:
    """The recipe (control) and the recipe without correctness_reward."""
    profile = resolve_profile(profile)
    only_format = Variant(
        f"e2-{profile.name}-solo-formato", base_overrides(profile), E2_REWARDS,
        "solo formato (sin corrección)", "E2",
    )
    ref = reference_variant(profile, runs_root)
    control = Variant(ref.name, dict(ref.overrides), ref.rewards, "con corrección (receta de la lección)", ref.lab)
    return [control, only_format]


def e3_betas(profile: Profile) -> tuple[float, ...]:
    """The betas compared with the recipe's on this profile."""
    return E3_BETAS_BY_PROFILE.get(profile.name, E3_BETAS)


def e3_variants(profile: Profile | str | None = None, runs_root=None) -> list[Variant]:
    """beta 0.0, the recipe's beta and 0.2 (0.2 not on ci), in increasing order."""
    profile = resolve_profile(profile)
    recipe_beta = profile_for(profile).beta
    betas = sorted(set(e3_betas(profile)) | {recipe_beta})
    out = []
    for beta in betas:
        overrides = {**base_overrides(profile), "beta": float(beta)}
        v = Variant(f"e3-{profile.name}-beta{beta:g}", overrides, None, f"beta={beta:g}", "E3")
        out.append(shared_with_reference(v, profile, "la receta de referencia", runs_root))
    return out


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
