"""E1-E3's variants as the student builds them, saved so that the sweep trains exactly those.

Each exercise notebook asks for one function that turns the base configuration into a variant: E1
``perfil_con_grupo(perfil, G)`` (G answers per prompt, whole groups, the same prompts per step), E2
``recompensas_sin_correccion(recompensas)`` (the reward list without correctness), E3
``perfil_con_beta(perfil, beta)``. ``e1_variants`` / ``e2_variants`` / ``e3_variants`` call it on the exercises'
profile (``variants.profile_for``) for the values the course compares (``group_sizes``, ``e3_beta_values``),
keep only what it changed, and save that to ``runs/_sweep_logs/variantes-<E>-<profile>.json``.
``python -m labs sweep E1|E2|E3`` and the notebook's sweep cell read the same file (``saved_variants``), and
each run's run.json names the function and the file (``variant_from``). Nothing here writes a variant's
settings: a variant equal to the lesson's recipe is the shared reference run (``shared_with_reference``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from labs.core import pending
from labs.core.paths import runs_dir
from labs.core.profiles import Profile, get_profile
from labs.core.runfolder import write_json
from labs.exercises.variant import SweepError, Variant
from labs.exercises.variants import (
    base_overrides, e3_beta_values, group_sizes, profile_for, reference_variant, resolve_profile, shared_with_reference,
)
from rewards import REWARD_NAMES

SAVED = "_sweep_logs/variantes-{exercise}-{profile}.json"  # under the runs folder
NOTEBOOKS = {"E1": "E1_tamano_de_grupo.ipynb", "E2": "E2_reward_hacking.ipynb", "E3": "E3_peso_kl.ipynb"}
# function name -> (the exercise, as the notebook titles it; a tiny valid input), for ``ejercicios_hechos``: the
# variant functions and each notebook's comparison, so a cell that needs one unwritten names it in Spanish
EXERCISES = {
    "perfil_con_grupo": ("«tus variantes: G respuestas por prompt, grupos enteros» (E1)", lambda: (get_profile("ci"), 2)),
    "recompensas_sin_correccion": ("«tu variante: las recompensas sin corrección» (E2)", lambda: (list(REWARD_NAMES),)),
    "perfil_con_beta": ("«tus variantes: el peso de la KL» (E3)", lambda: (get_profile("ci"), 0.0)),
    "comparar_e1": ("«tu comparación, con pandas» (E1)",
                    lambda: (_frame(frac_reward_zero_std=[0.5, 0.4, 0.3, 0.2], grad_norm=[1.0, 2.0, 1.5, 0.5]),)),
    "comparar_e2": ("«tu comparación, con pandas» (E2)",
                    lambda: (_frame(**{"rewards/format_reward/mean": [0.1, 0.3, 0.2, 0.4],
                                       "rewards/soft_format_reward/mean": [0.1, 0.2, 0.1, 0.2]}),)),
    "comparar_e3": ("«tu comparación, con pandas» (E3)",
                    lambda: (_frame(**{"kl": [0.01, 0.02, None, None], "completions/mean_length": [90.0, 80, 70, 95]}),)),
}


def _frame(**columns):
    """A tiny metrics table (two variants, two steps) for ``ejercicios_hechos``' call of a comparison."""
    import pandas as pd

    return pd.DataFrame({"variante": ["a", "a", "b", "b"], "step": [1, 2, 1, 2], **columns})


FUNCTIONS = {"E1": "perfil_con_grupo", "E2": "recompensas_sin_correccion", "E3": "perfil_con_beta"}


def ejercicios_hechos(*functions) -> bool:
    """``labs.core.pending.ejercicios_hechos`` for E1-E3's functions: says in Spanish which exercise to finish."""
    return pending.ejercicios_hechos(*functions, table=EXERCISES)


def saved_path(exercise: str, profile: Profile, runs_root=None) -> Path:
    root = Path(runs_root) if runs_root is not None else runs_dir()
    return root / SAVED.format(exercise=exercise, profile=profile.name)


def _changes(base: Profile, variant, function: str) -> dict:
    """The settings ``variant`` (what the student's function returned) changes in ``base``."""
    if not isinstance(variant, Profile):
        raise SweepError(f"`{function}` debe devolver un perfil (el de partida con sus cambios); devuelve "
                         f"{type(variant).__name__}. Termina su ejercicio: su grader.check debe pasar.")
    before, after = dataclasses.asdict(base), dataclasses.asdict(variant)
    return {key: value for key, value in after.items() if value != before[key]}


def _save_and_build(exercise: str, profile: Profile, built: list[dict], runs_root, budget) -> list[Variant]:
    path = saved_path(exercise, profile, runs_root)
    write_json(path, {"exercise": exercise, "profile": profile.name, "function": FUNCTIONS[exercise],
                      "notebook": NOTEBOOKS[exercise], "variants": built})
    return variants_from(exercise, profile, built, runs_root, budget)


def e1_variants(profile, perfil_con_grupo, runs_root=None, budget: dict | None = None) -> list[Variant]:
    """The student's G variants (one per ``group_sizes``), saved for the sweep."""
    profile = resolve_profile(profile)
    base = profile_for(profile, budget, runs_root)
    built = [{"name": f"e1-{profile.name}-g{g}", "label": f"G={g}", "rewards": None,
              "settings": _changes(base, perfil_con_grupo(base, g), "perfil_con_grupo")} for g in group_sizes(profile)]
    return _save_and_build("E1", profile, built, runs_root, budget)


def e2_variants(profile, recompensas_sin_correccion, runs_root=None, budget: dict | None = None) -> list[Variant]:
    """The lesson's recipe (control) and the student's reward list, saved for the sweep."""
    profile = resolve_profile(profile)
    names = recompensas_sin_correccion(list(REWARD_NAMES))
    if not names or isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise SweepError("`recompensas_sin_correccion` debe devolver una lista de nombres de funciones de recompensa. "
                         "Termina su ejercicio: su grader.check debe pasar.")
    built = [{"name": f"e2-{profile.name}-solo-formato", "label": "solo formato (sin corrección)",
              "rewards": list(names), "settings": {}}]
    return _save_and_build("E2", profile, built, runs_root, budget)


def e3_variants(profile, perfil_con_beta, runs_root=None, budget: dict | None = None) -> list[Variant]:
    """The student's beta variants (E3's betas and the recipe's, increasing), saved for the sweep."""
    profile = resolve_profile(profile)
    base = profile_for(profile, budget, runs_root)
    built = [{"name": f"e3-{profile.name}-beta{b:g}", "label": f"beta={b:g}", "rewards": None,
              "settings": _changes(base, perfil_con_beta(base, b), "perfil_con_beta")} for b in e3_beta_values(profile, base)]
    return _save_and_build("E3", profile, built, runs_root, budget)


def variants_from(exercise: str, profile, built: list[dict], runs_root=None, budget: dict | None = None) -> list[Variant]:
    """The runs of what the student built, on the exercises' budget; E2 adds the recipe as its control."""
    profile = resolve_profile(profile)
    built_by = f"{FUNCTIONS[exercise]} (cuaderno {exercise}; {saved_path(exercise, profile, runs_root)})"
    out = []
    for b in built:
        v = Variant(b["name"], {**base_overrides(profile, budget, runs_root), **b["settings"]}, b["rewards"],
                    b["label"], exercise, built_by)
        out.append(shared_with_reference(v, profile, "la receta de referencia", runs_root, budget))
    if exercise == "E2":
        ref = reference_variant(profile, runs_root, budget)
        out.insert(0, Variant(ref.name, dict(ref.overrides), ref.rewards, "con corrección (tu receta)", ref.lab))
    return out


def saved_variants(exercise: str, profile, runs_root=None, budget: dict | None = None) -> list[Variant]:
    """What the student built in the exercise's notebook (``e1_variants`` ...), read back for the sweep."""
    profile = resolve_profile(profile)
    path = saved_path(exercise, profile, runs_root)
    try:
        built = json.loads(path.read_text(encoding="utf-8"))["variants"]
    except FileNotFoundError:
        title = EXERCISES[FUNCTIONS[exercise]][0]
        raise SweepError(
            f"Aún no hay variantes tuyas de {exercise} en el perfil '{profile.name}' ({path}). Abre "
            f"notebooks/{NOTEBOOKS[exercise]}, termina el ejercicio {title} y ejecuta la celda siguiente a su "
            "comprobación: guarda tus variantes, y este barrido entrena exactamente esas."
        ) from None
    return variants_from(exercise, profile, built, runs_root, budget)
