"""What L7.2 trains: the student's recipe, changed only where Unsloth's route needs it, by one stated rule.

L7.2 is L7.1's recipe on another engine. It trains the saved reward functions (``labs.l71.student_rewards``, else
the course's) and every lesson knob of the saved recipe (``labs.l71.settings``: loss type, temperature, beta,
batch, ...). What the engine changes follows ``RULE_ES``:

- **LoRA.** L7.2 always trains a LoRA adapter (Unsloth's route; on a CPU, PEFT's). A recipe that trains all the
  weights gets LoRA and its learning rate times ``LORA_LR_FACTOR``, kept inside the lesson's LoRA band
  (``labs.l71.settings.LR_BANDS``): LoRA's adapters start at zero and move a small subspace. A recipe that
  already trains LoRA keeps its rate.
- **The model, on the base route.** rtx5090-base's L7.2 runs rtx5090's instruct model, its LoRA rank and its
  Unsloth copy (``profile_for_l72``); the knobs stay the student's.
- **What the student sets** on L7.2's command line (``--set``) is their choice and wins.

``plan`` builds L7.2's profile and reward functions from the saved recipe; ``record`` is what ``run.json`` keeps as
``l72_recipe`` (the L7.1 recipe's id and each change with its reason); L7.2's comparison reports those changes as
the engine's and any other difference as unexplained (``labs.l72.compare``).
"""

from __future__ import annotations

from typing import NamedTuple

from labs.core.profiles import Profile, get_profile

KEY = "l72_recipe"  # where run.json keeps the record
LORA_LR_FACTOR = 10  # LoRA wants ~10x the full fine-tune's rate (LoRA Without Regret; the lesson's LR note)
# what the base route's switch to the instruct model changes (profile_for_l72)
ENGINE_FIELDS = ("model", "unsloth_model", "lora_r", "lora_alpha", "load_in_4bit", "format_pass",
                 "format_pass_examples", "format_pass_epochs", "format_pass_learning_rate")
RULE_ES = ("L7.2 entrena tu receta del L7.1 (tus recompensas y tus ajustes) con otro motor; solo cambia lo que el "
           "motor pide: siempre un adaptador LoRA (si tu receta entrena todos los pesos, su learning_rate por "
           f"{LORA_LR_FACTOR}, dentro de la banda de LoRA de la lección) y, en la ruta base, el modelo instruct con "
           "su LoRA. Lo que pongas con --set en la orden de L7.2 manda.")


# L7.2 teaches Unsloth and Standby's memory mechanics; the graded main run is L7.1. On the base-model route
# (rtx5090-base, whose LoRA format pass cannot run after `import unsloth`) L7.2 runs the instruct profile.
L72_PROFILE_FOR = {"rtx5090-base": "rtx5090"}


def profile_for_l72(profile: Profile) -> tuple[Profile, str | None]:
    """The profile L7.2 runs for ``profile``, and the Spanish sentence saying why when it is another one.

    The fields in which the two named profiles differ (model, format pass, LoRA, learning rate, ...) take
    the instruct profile's values; anything else set on ``profile`` (``--set max_steps=...``) is kept.
    """
    target_name = L72_PROFILE_FOR.get(profile.name)
    if target_name is None:
        return profile, None
    own, target = get_profile(profile.name).as_dict(), get_profile(target_name)
    changed = [k for k, v in target.as_dict().items() if own.get(k) != v and k in profile.__dataclass_fields__]
    switched = profile.replace(**{k: getattr(target, k) for k in changed})
    shown = [k for k in changed if k not in ("name", "description")]
    why = (f"L7.2 corre con el perfil '{target_name}' aunque el elegido sea '{profile.name}': este lab enseña "
           "Unsloth y la memoria de Standby (el run principal que se evalúa es el de L7.1), y el pase de formato "
           f"de '{profile.name}' no puede correr después de `import unsloth`. Cambian: "
           + ", ".join(f"{k}={getattr(switched, k)!r}" for k in shown) + ".")
    return switched, why


class L72Plan(NamedTuple):
    profile: Profile  # what L7.2 trains
    reward_funcs: list
    recipe_profile: Profile  # the L7.1 recipe it starts from (saved knobs applied)


def recipe_source(profile: Profile) -> Profile:
    """The L7.1 profile whose saved recipe L7.2 trains: ``profile``'s own, or on the base route the saved choice
    that L7.2 moved to ``profile`` (the student saved rtx5090-base's recipe; L7.2 runs rtx5090)."""
    from labs.core import profile_choice

    choice = profile_choice.read_choice()
    chosen = choice.get("profile") if choice and "error" not in choice else None
    if chosen and L72_PROFILE_FOR.get(chosen) == profile.name:
        return get_profile(chosen)
    return profile


def lora_rate(recipe: Profile) -> float:
    """The learning rate L7.2's LoRA trains at: the recipe's if it already trains LoRA, else ``LORA_LR_FACTOR`` times
    it, inside the lesson's LoRA band."""
    from labs.l71.settings import LR_BANDS

    if recipe.use_lora:
        return recipe.learning_rate
    low, high = LR_BANDS[True]
    return float(f"{min(high, max(low, recipe.learning_rate * LORA_LR_FACTOR)):.3g}")


def apply_rule(recipe: Profile, target: Profile) -> Profile:
    """The recipe (its knobs, data and budget as they are) on L7.2's engine: ``target``'s name and model fields (the
    instruct model on the base route), a LoRA adapter always, and LoRA's learning rate."""
    # use_lora stays the recipe's: it decides the format pass (shared with L7.1, cached), while GRPO on L7.2's engine
    # always trains an adapter (Unsloth's route; FallbackLab passes PEFT's): ``record`` says so as the change "lora"
    engine = {f: getattr(target, f) for f in ENGINE_FIELDS}
    return recipe.replace(**engine, name=target.name, description=target.description,
                          learning_rate=lora_rate(recipe), backend="unsloth")


def plan(profile: Profile, overrides: dict | None = None, saved: bool = True) -> L72Plan:
    """L7.2's profile and reward functions for ``profile`` (the one L7.2 was asked for, before the base route's switch).

    ``saved``: ``profile`` is a course profile whose saved recipe L7.2 trains (``recipe_source``, its saved knobs).
    False: ``profile`` already is the recipe (the rehearsal passes the saved recipe on its budget). ``overrides``
    (``--set``) come last. Says, when the base route moves L7.2 to the instruct model, why.
    """
    from labs.l71 import recipe_identity

    recipe = recipe_identity.saved_profile(recipe_source(profile)) if saved else profile
    target, why = profile_for_l72(recipe)
    if why:
        print(f"[perfil] {why}")
    l72 = apply_rule(recipe, target)
    if overrides:
        l72 = l72.replace(**overrides)
    return L72Plan(l72, recipe_identity.saved_rewards(), recipe)


def _why_es(key: str, recipe: Profile, l72: Profile) -> str:
    if key == "learning_rate" and l72.learning_rate == lora_rate(recipe) and not recipe.use_lora:
        return f"tu receta entrena todos los pesos; con LoRA, {LORA_LR_FACTOR} veces su ritmo (regla de L7.2)"
    if key in ENGINE_FIELDS:
        return f"la ruta base: L7.2 corre con el modelo instruct de {l72.name} (regla de L7.2)"
    return "no la pide la regla de L7.2: la pusiste con --set o la cambió el ensayo"


def record(l72: Profile, reward_funcs, recipe: Profile | None = None) -> dict:
    """What ``run.json`` keeps as ``l72_recipe``: the L7.1 recipe's identity, the rule, and each change from it."""
    from labs.l71 import recipe_identity
    from labs.l71.settings import LESSON_KNOBS

    if recipe is None:
        recipe = recipe_identity.saved_profile(recipe_source(l72))
    changes = {}
    for key in (*LESSON_KNOBS, *ENGINE_FIELDS):
        before, after = getattr(recipe, key), getattr(l72, key)
        if before != after:
            changes[key] = {"receta": before, "l72": after, "por_que": _why_es(key, recipe, l72)}
    if not recipe.use_lora:
        changes["lora"] = {"receta": "todos los pesos", "l72": f"adaptador LoRA r={l72.lora_r}, alpha={l72.lora_alpha}",
                           "por_que": "L7.2 entrena siempre un adaptador LoRA (regla de L7.2)"}
    if not l72.use_cpu and l72.loss_type == "dr_grpo" and l72.scale_rewards == "group":
        # unsloth/models/rl.py (2026.10.9): with loss_type "dr_grpo" a scale_rewards of True or "group" becomes False,
        # and no value keeps the group's scaling; the CPU path (PEFT) trains it as asked
        changes["scale_rewards"] = {"receta": "group", "l72": "none", "por_que": (
            "Unsloth, con loss_type='dr_grpo', quita siempre el escalado por la desviación del grupo (lo propone el "
            "artículo de Dr. GRPO) y no deja mantenerlo")}
    return {"recipe": recipe_identity.of_run(recipe, reward_funcs), "rule_es": RULE_ES, "changes": changes}


def changes_es(record_: dict) -> list[str]:
    """Each change of ``record`` in Spanish: ``key: receta → L7.2 (why)``."""
    return [f"{k}: {c['receta']!r} → {c['l72']!r} ({c['por_que']})" for k, c in (record_.get("changes") or {}).items()]
