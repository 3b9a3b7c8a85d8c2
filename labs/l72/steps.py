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
# what L7.2 trains (the student's recipe) and the base route's switch (re-exported here)
from labs.l72 import recipe_rule
from labs.l72.recipe_rule import L72_PROFILE_FOR, profile_for_l72  # noqa: F401

LAB = "L7.2"


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
          saved: bool = True, **overrides) -> L72Start:
    """Everything an L7.2 run does before a model is loaded; the lab, the notebook's demo and the rehearsal call it.

    In order: the profile, the student's recipe on Unsloth's engine (``labs.l72.recipe_rule.plan``: the saved
    knobs and reward functions, LoRA by the stated rule; ``saved=False`` when ``profile`` already is the recipe, as
    the rehearsal's budget and the notebook's demo are), the pre-flight checks with
    the reward functions' probe (``l71.prepare``), on a GPU profile what Unsloth's path needs beyond them
    (:func:`check_unsloth_path`), the run folder, and last the machine: the doctor's checks (not for a
    finished run, which is only read) and the back-end (``choose_backend``), where a machine without CUDA or
    Unsloth stops. None of it imports trl, transformers or peft: on the GPU path ``import unsloth`` comes next
    and must come first (``labs.l72.standby``; tests/test_unsloth_lab.py runs this in a fresh process).
    """
    preflight.refuse_removed_keywords(overrides)
    if not isinstance(profile, Profile):
        profile = get_profile(profile)
    profile, reward_funcs, _ = recipe_rule.plan(profile, overrides, saved=saved)
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
        recipe_rule.KEY: recipe_rule.record(profile, reward_funcs),
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
