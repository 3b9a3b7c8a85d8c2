"""Profiles: every knob a lab reads, in one frozen object per machine class.

A lab never hard-codes a model name, a batch size or a step count: it asks for a profile and reads
it. ``get_profile()`` picks one in this order:

1. the ``name`` argument, if given;
2. the ``COURSE_PROFILE`` environment variable;
3. the profile saved with ``python -m labs profile --choose <name>`` (``labs.core.profile_choice``; a saved
   GPU profile applies only where a CUDA GPU is visible, otherwise ``cpu``);
4. ``rtx5090`` when a CUDA GPU is visible, ``cpu`` otherwise.

An unknown name raises ``ProfileError`` listing the valid ones. To change a single knob for one run,
use ``profile.replace(max_steps=50)`` (or ``--set max_steps=50`` on the command line) rather than
editing the table (`labs.core.profile_table`).
"""


from __future__ import annotations

import dataclasses
import os

from labs.core.profile_table import (  # noqa: F401  re-exported: labs import profiles from here
    BUNDLED_MODEL,
    CI,
    CPU,
    GSM8K_TRAIN_SIZE,
    LORA_TARGETS,
    PROFILES,
    PROFILE_ENV,
    Profile,
    ProfileError,
    RTX5090,
    RTX5090_BASE,
)



def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def default_profile_name() -> tuple[str, str]:
    """The profile the labs will use, and why (the doctor prints the reason)."""
    from labs.core import profile_choice

    env = os.environ.get(PROFILE_ENV, "").strip()
    if env:
        return env, f"{PROFILE_ENV}={env}"
    saved = profile_choice.saved_default(cuda_available)
    if saved is not None:
        return saved
    broken = profile_choice.unusable_note()
    if cuda_available():
        return "rtx5090", "se ve una GPU CUDA" + (
            broken or f" y no has elegido perfil (elígelo con {profile_choice.CHOOSE_COMMAND})")
    return "cpu", "no se ve ninguna GPU CUDA" + broken


def student_command(subcommand: str, profile: Profile | str, picks: str | None = None) -> str:
    """``python -m labs <subcommand>`` for a student to copy, naming ``--profile`` only when the command would not
    pick ``profile`` by itself here: ``picks``, by default ``default_profile_name`` (COURSE_PROFILE, the saved
    choice, the automatic one). A printed command thus never names a profile the student did not choose
    (issue 33: a student on ``rtx5090-base`` copied ``--profile rtx5090`` and trained the other model)."""
    name = profile.name if isinstance(profile, Profile) else profile
    picks = default_profile_name()[0] if picks is None else picks
    flag = "" if name == picks else f" --profile {name}"
    return f"python -m labs {subcommand}{flag}"


def get_profile(name: str | None = None, **overrides) -> Profile:
    """Return the profile called ``name`` (or the default one), with ``overrides`` applied."""
    if name is None:
        name, _ = default_profile_name()
    key = name.strip().lower()
    if key not in PROFILES:
        raise ProfileError(
            f"No existe el perfil '{name}'. Perfiles válidos: {', '.join(sorted(PROFILES))}. "
            f"Elige uno con {PROFILE_ENV}=<nombre> o con --profile <nombre>."
        )
    profile = PROFILES[key]
    return profile.replace(**overrides) if overrides else profile


def parse_override(text: str, profile: Profile = CPU) -> tuple[str, object]:
    """Parse ``key=value`` from the command line into the field's own type."""
    if "=" not in text:
        raise ProfileError(f"'{text}' no tiene la forma clave=valor (por ejemplo max_steps=50).")
    key, raw = (part.strip() for part in text.split("=", 1))
    fields = {f.name: f for f in dataclasses.fields(profile)}
    if key not in fields:
        raise ProfileError(f"El perfil no tiene el ajuste '{key}'. Ajustes válidos: {', '.join(fields)}.")
    current = getattr(profile, key)
    try:
        if isinstance(current, bool):
            if raw.lower() not in {"true", "false", "1", "0", "yes", "no"}:
                raise ValueError(raw)
            value: object = raw.lower() in {"true", "1", "yes"}
        elif isinstance(current, int):
            value = int(raw)
        elif isinstance(current, float):
            value = float(raw)
        elif isinstance(current, tuple):
            value = tuple(x.strip() for x in raw.split(",") if x.strip())
        else:
            value = raw
    except ValueError:
        raise ProfileError(
            f"'{raw}' no es un valor válido para {key} (se espera {type(current).__name__})."
        ) from None
    return key, value
