"""What both paths of L7.2 share: the lab label, the start, the VRAM plans and the run records.

:func:`start` applies the profile and runs every check before a model is loaded, importing none of trl,
transformers and peft (Unsloth's path imports unsloth next, and it must come first); :func:`print_vram_plans`
prints both routes' memory plans (on a GPU profile); :func:`record_run`, :func:`update_run_json` and
:func:`finish_resources` write ``run.json`` and ``resources.json`` as L7.1 does, plus L7.2's fields.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import NamedTuple

from labs.training import preflight
from labs import l71, vram
from labs.core import resources
from labs.core.profiles import Profile, get_profile
from labs.core.resources import ResourceMonitor
from labs.core.runfolder import RUN_JSON, RunFolder, read_json, write_json
from labs.l72.backend import Backend, choose_backend
from labs.l72.memory import MemoryFraction, _version_tuple

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


# On a CPU profile nothing goes to a GPU: a 32 GB card's plan there was 40 lines the student could not use.
CPU_PLAN_NOTE_ES = ("[vram] Perfil de CPU: aquí nada va a una GPU, así que no hay plan de memoria de GPU. El de la "
                    "GPU del curso se ve con: python -m labs vram --profile rtx5090")


def print_vram_plans(profile: Profile, card_gib: float | None = None) -> list:
    """Both routes' VRAM plans (labs.vram), printed before anything is loaded; on a CPU profile, one line saying
    how to see the GPU's plan (and no plans)."""
    if profile.use_cpu:
        print(CPU_PLAN_NOTE_ES)
        return []
    # The TRL route with LoRA: L7.1's route on the GPU profile.
    plans = [vram.plan(profile, "trl", card_gib, lora=True), vram.plan(profile, "unsloth", card_gib)]
    print("[vram] Plan de memoria de las dos rutas, antes de cargar nada:\n")
    print("\n\n".join(p.render_es() for p in plans))
    return plans


class L72Start(NamedTuple):
    profile: Profile
    reward_funcs: list
    run: RunFolder
    backend: Backend


def start(profile: Profile | str | None = None, run_name: str | None = None, fresh: bool = False,
          **overrides) -> L72Start:
    """Everything an L7.2 run does before a model is loaded; the lab, the notebook's demo and the rehearsal call it.

    In order: the profile (with ``backend="unsloth"``; :func:`profile_for_l72`), the pre-flight checks with
    the reward functions' probe (``l71.prepare``), on a GPU profile what Unsloth's path needs beyond them
    (:func:`check_unsloth_path`), the run folder, and last the machine: the doctor's checks (not for a
    finished run, which is only read) and the back-end (``choose_backend``), where a machine without CUDA or
    Unsloth stops. None of it imports trl, transformers or peft: on the GPU path ``import unsloth`` comes next
    and must come first (``labs.l72.standby``; tests/test_unsloth_lab.py runs this in a fresh process).
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
    l71.prepare(profile, reward_funcs, trains=False)  # the pre-flight checks; the machine's come last
    if not profile.use_cpu:
        check_unsloth_path(profile)
    run = l71.new_run(profile, run_name, fresh, LAB)
    if not run.is_finished():
        from labs.doctor import require_runnable

        require_runnable(profile)
    return L72Start(profile, reward_funcs, run, choose_backend(profile))


# --------------------------------------------------------------------------------------------------
# Checks Unsloth's GPU path needs beyond L7.1's, before anything loads
# --------------------------------------------------------------------------------------------------


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_4bit_vllm_plugin(profile: Profile, vllm_version: str | None, plugin_installed: bool) -> list[str]:
    """vLLM 0.28 moved bitsandbytes out of its tree: 4-bit + vLLM then needs ``vllm-bnb-plugin``.

    Found in unsloth_zoo 2026.10.9 (``load_vllm`` raises without it) and in the vLLM 0.31.0 wheel (no
    bitsandbytes module). Checked before loading, because a failed load under Standby costs a restart.
    """
    if not profile.load_in_4bit or vllm_version is None or _version_tuple(vllm_version) < (0, 28, 0):
        return []
    if plugin_installed:
        return []
    return [
        f"load_in_4bit=True con vLLM {vllm_version} necesita el paquete vllm-bnb-plugin (vLLM 0.28 sacó "
        "bitsandbytes de su código). Instálalo con `pip install vllm-bnb-plugin` o pon load_in_4bit=False "
        "(bf16: más memoria; mira `python -m labs vram --path unsloth --set load_in_4bit=false`)."
    ]


def check_unsloth_path(profile: Profile) -> None:
    """What the GPU path needs beyond L7.1's checks; raise ``PreflightError`` before anything loads."""
    problems = check_4bit_vllm_plugin(profile, package_version("vllm"),
                                      importlib.util.find_spec("vllm_bnb_plugin") is not None)
    if profile.format_pass:
        problems.append(
            "format_pass=True no está disponible en la ruta Unsloth de L7.2: el pase de formato entrena con TRL "
            "sin parchear y tendría que ir antes de importar unsloth. Ponlo a False (el perfil rtx5090 ya lo "
            "tiene así)."
        )
    if problems:
        raise preflight.PreflightError(problems)


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
