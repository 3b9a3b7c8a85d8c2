"""The student's recipe as one identity: the lesson's knobs a run trains with, and its reward functions' sources.

The L7.1 notebook saves two things (``labs.l71.settings``: the ``GRPOConfig`` knobs; ``labs.l71.student_rewards``:
the section-1 functions). Together, on one profile, they are *the recipe*: L7.1 trains it, E1-E3's reference and
variants train it with their one change, the rehearsal tries it, L7.2 compares against the L7.1 run that trained
it. ``of_run`` is what one run trains, recorded as ``recipe`` in every ``run.json`` (``labs.l71.lab.write_run_json``);
``saved`` is the student's recipe as saved now; ``differences_es`` says, in Spanish, how two recipes differ.

The identity (``id``) is a short SHA-256 of the profile name, the knobs' values and each reward function's source
hash (``None`` for a course function of ``rewards/``): two runs with one id trained the same recipe.
"""

from __future__ import annotations

import hashlib
import json

from labs.core.profiles import Profile
from labs.l71.settings import LESSON_KNOBS

KEY = "recipe"  # where run.json keeps it
_DEFAULT_KNOBS = {k: f.default for k, f in Profile.__dataclass_fields__.items()
                  if k in ("loss_type", "temperature", "scale_rewards", "epsilon")}


def _plain(value):
    return json.loads(json.dumps(value))


def identity(profile_name: str, knobs: dict, rewards: dict) -> dict:
    """``{"id", "profile", "settings", "rewards"}`` for these knob values and ``{reward name: source sha or None}``."""
    body = {"profile": profile_name, "settings": {k: knobs[k] for k in LESSON_KNOBS}, "rewards": dict(rewards)}
    digest = hashlib.sha256(json.dumps(_plain(body), sort_keys=True).encode()).hexdigest()[:12]
    return {"id": digest, **_plain(body)}


def reward_hashes(reward_funcs) -> dict:
    """``{name: SHA-256 of the source}`` for a student's function, ``None`` for one of the course's (``rewards/``)."""
    from labs.training.runrecord import reward_identity
    from rewards import REWARD_NAMES
    from rewards.own import describe_reward_functions

    return reward_identity(describe_reward_functions(reward_funcs, REWARD_NAMES))


def of_run(profile: Profile, reward_funcs) -> dict:
    """The recipe a run with ``profile`` (its knobs as trained) and ``reward_funcs`` trains."""
    return identity(profile.name, {k: getattr(profile, k) for k in LESSON_KNOBS}, reward_hashes(reward_funcs))


def of_record(record: dict) -> dict | None:
    """The recipe a ``run.json`` records (an older one without ``recipe``: rebuilt from its profile and rewards)."""
    stored = record.get(KEY)
    if isinstance(stored, dict) and "id" in stored and set(LESSON_KNOBS) <= set(stored.get("settings") or {}):
        return stored
    # a run.json from before a knob joined the lesson's: it trained TRL's default there (the profile's default)
    profile = {**_DEFAULT_KNOBS, **(record.get("profile") or {})}
    if isinstance(stored, dict) and "id" in stored:
        return identity(stored.get("profile"), {**profile, **stored.get("settings", {})}, stored.get("rewards") or {})
    if not all(k in profile for k in LESSON_KNOBS) or "name" not in profile:
        return None
    from labs.training.runrecord import reward_identity

    sources = record.get("reward_sources")
    if isinstance(sources, list):
        rewards = reward_identity(sources)
    else:
        names = record.get("reward_functions") or []
        rewards = {n.get("name") if isinstance(n, dict) else n: None for n in names}
    return identity(profile["name"], profile, rewards)


def saved_rewards():
    """The reward functions the recipe trains: the student's saved ones, else the course's three."""
    from labs.l71 import student_rewards
    from rewards import reward_functions

    funcs, _ = student_rewards.load(echo=lambda _: None)
    return funcs if funcs is not None else reward_functions(None)


def saved_profile(profile: Profile) -> Profile:
    """``profile`` with the student's saved knobs applied (``labs.l71.settings``)."""
    from labs.l71 import settings

    overrides, _ = settings.load(profile, echo=lambda _: None)
    return profile.replace(**overrides) if overrides else profile


def missing_sections_es(profile: Profile, root=None) -> list[str]:
    """The L7.1 notebook's sections whose part of the recipe is not saved yet for ``profile`` (Spanish; [] if saved).
    ``root``: the run area (default ``runs_dir()``)."""
    from pathlib import Path

    from labs.l71 import settings, student_rewards

    out = []
    rewards, knobs = student_rewards.reward_file(), settings.settings_path(profile)
    if root is not None:  # the same files under another run area
        rewards, knobs = Path(root) / rewards.parent.name / rewards.name, Path(root) / knobs.parent.name / knobs.name
    if not rewards.exists():
        out.append("la sección 1 (tus funciones de recompensa: la celda que las guarda)")
    if not knobs.exists():
        out.append("la sección 3 (tu GRPOConfig: la celda que guarda tus ajustes)")
    return out


def saved(profile: Profile) -> dict:
    """The student's recipe as saved now on ``profile``: saved knobs (else the profile's) and saved rewards."""
    return of_run(saved_profile(profile), saved_rewards())


def _short(sha) -> str:
    return f"tuya (SHA-256 {sha[:12]}…)" if isinstance(sha, str) else "la del curso (rewards/)"


def differences_es(have: dict, want: dict, have_label: str = "la carpeta", want_label: str = "tu receta") -> list[str]:
    """One Spanish line per knob or reward function in which recipe ``have`` differs from ``want``."""
    lines = []
    if have.get("profile") != want.get("profile"):
        lines.append(f"perfil: {have_label} {have.get('profile')!r}, {want_label} {want.get('profile')!r}")
    for key in LESSON_KNOBS:
        a, b = have.get("settings", {}).get(key), want.get("settings", {}).get(key)
        if a != b:
            lines.append(f"{key}: {have_label} {a!r}, {want_label} {b!r}")
    old, new = have.get("rewards", {}), want.get("rewards", {})
    for name in [n for n in old if n not in new]:
        lines.append(f"recompensas: {name} está en {have_label}, no en {want_label}")
    for name in [n for n in new if n not in old]:
        lines.append(f"recompensas: {name} está en {want_label}, no en {have_label}")
    for name in [n for n in new if n in old and old[n] != new[n]]:
        lines.append(f"recompensas: {name} de {have_label} es {_short(old[name])}; la de {want_label}, {_short(new[name])}")
    return lines
