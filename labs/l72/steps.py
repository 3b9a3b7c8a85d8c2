"""What both paths of L7.2 share: the lab label, the start, the VRAM plans and the run records.

:func:`start` applies the profile and runs every check before a model is loaded; :func:`print_vram_plans`
prints both routes' memory plans; :func:`record_run`, :func:`update_run_json` and
:func:`finish_resources` write ``run.json`` and ``resources.json`` as L7.1 does, plus L7.2's fields.
"""

from __future__ import annotations

from labs.training import preflight
from labs import l71, vram
from labs.core import resources
from labs.core.profiles import Profile, get_profile
from labs.core.resources import ResourceMonitor
from labs.core.runfolder import RUN_JSON, RunFolder, read_json, write_json
from labs.l72.backend import Backend
from labs.l72.memory import MemoryFraction

LAB = "L7.2"

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


def print_vram_plans(profile: Profile, card_gib: float | None = None) -> list:
    """Both routes' VRAM plans (labs.vram), printed before anything is loaded."""
    # The TRL route with LoRA: L7.1's route on the GPU profile, and what the CPU stand-in of L7.2 runs.
    plans = [vram.plan(profile, "trl", card_gib, lora=True), vram.plan(profile, "unsloth", card_gib)]
    print("[vram] Plan de memoria de las dos rutas, antes de cargar nada:\n")
    print("\n\n".join(p.render_es() for p in plans))
    if profile.use_cpu:
        print("\n[vram] Perfil de CPU: aquí nada va a una GPU (la memoria es la RAM del host). Son los planes de "
              "las dos rutas en una tarjeta de 32 GB con los ajustes de este perfil.")
    return plans


def start(profile: Profile | str | None = None, run_name: str | None = None, fresh: bool = False, **overrides):
    """Profile (with ``backend="unsloth"``; :func:`profile_for_l72`), reward functions and run folder of an L7.2 run.

    Everything here is checked before a model is loaded: removed GRPOConfig keywords, the pre-flight
    checks and the doctor's environment checks (``l71.prepare``).
    """
    from rewards import reward_functions

    preflight.refuse_removed_keywords(overrides)
    if not isinstance(profile, Profile):
        profile = get_profile(profile)
    profile, why = profile_for_l72(profile)
    if why:
        print(f"[perfil] {why}")
    profile = profile.replace(backend="unsloth", **overrides)
    reward_funcs = reward_functions()
    l71.prepare(profile, reward_funcs)
    return profile, reward_funcs, l71.new_run(profile, run_name, fresh, LAB)


def record_run(run: RunFolder, profile: Profile, reward_funcs, base_model: str, base_label: str, backend: Backend,
               fraction: MemoryFraction) -> None:
    """run.json, as L7.1 writes it, plus the back-end that ran and the memory fraction in force."""
    l71.write_run_json(run, profile, LAB, reward_funcs, base_model, {
        "base_label": base_label,
        "backend_used": backend.name,
        "backend_reason_es": backend.reason_es,
        "vllm_memory_fraction": fraction.as_dict(),
    })


def update_run_json(run: RunFolder, **fields) -> None:
    record = read_json(run.path(RUN_JSON))
    record.update(fields)
    write_json(run.path(RUN_JSON), record)


def finish_resources(run: RunFolder, monitor: ResourceMonitor, backend: Backend) -> dict:
    return resources.record(run, monitor, LAB, backend_used=backend.name)
