"""What one variant of the L7.1 recipe is, and the checks a list of them passes before anything runs.

A variant is a run folder name plus the profile settings and reward functions it changes. Two variants
with one name must train the same thing (``check_variants``), and a finished run folder is reused only
when its run.json records the settings the variant asks for (``settings_mismatch``): a comparison must
never mix runs made with different settings under one name. ``labs.exercises.variants`` defines the
variants of each exercise; ``labs.exercises.sweep`` runs them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from labs.core.profiles import Profile
from labs.core.runfolder import RUN_JSON, RunFolder, read_json

# Profile settings that say nothing about what was trained: never compared with a finished run.
_IGNORED_SETTINGS = {"description"}


class SweepError(RuntimeError):
    """A sweep cannot go on as asked (in Spanish: students read it)."""


@dataclass
class Variant:
    """One run of the L7.1 recipe with some settings changed.

    ``name`` is the run folder name (it must contain the profile name); ``overrides`` are profile
    settings (``labs.core.profiles.Profile`` fields) as on ``--set``; ``rewards`` the reward function names
    (``None``: the lesson's three); ``label`` how tables and plots call it; ``lab`` the tag written in
    run.json.
    """

    name: str
    overrides: dict = field(default_factory=dict)
    rewards: tuple[str, ...] | None = None
    label: str = ""
    lab: str = "E1"
    built_by: str = ""

    def __post_init__(self):
        if isinstance(self.rewards, str):
            self.rewards = (self.rewards,)
        elif self.rewards is not None:
            self.rewards = tuple(self.rewards)
        if not self.label:
            self.label = self.name

    def profile(self, base: Profile) -> Profile:
        """The profile this variant trains with."""
        return base.replace(**self.overrides) if self.overrides else base


def _plain(value):
    """JSON-comparable form (tuples as lists), as run.json stores settings."""
    return json.loads(json.dumps(value))


def recorded_rewards(record: dict) -> list[str] | None:
    names = record.get("reward_functions")
    if not isinstance(names, list):
        return None
    return [n.get("name") if isinstance(n, dict) else n for n in names]


def settings_mismatch(variant: Variant, base: Profile, run: RunFolder) -> list[str]:
    """Settings in which the run folder's run.json differs from what ``variant`` asks for ([] if none)."""
    try:
        record = read_json(run.path(RUN_JSON))
    except (FileNotFoundError, json.JSONDecodeError):
        return []
    differences = []
    stored = record.get("profile") or {}
    wanted = _plain(variant.profile(base).as_dict())
    for key, value in wanted.items():
        if key in _IGNORED_SETTINGS or key not in stored:
            continue
        if _plain(stored[key]) != value:
            differences.append(f"{key}: la carpeta tiene {stored[key]!r}, la variante pide {value!r}")
    differences += reward_mismatch(variant, record)
    return differences


def trained_rewards(variant: Variant) -> list:
    """The reward functions ``variant`` trains: its names (the lesson's three when None), each the student's saved
    function of that name when there is one (``labs.l71.student_rewards.pick``, as ``python -m labs l71`` does)."""
    from labs.l71 import student_rewards
    from rewards import reward_functions

    saved, _ = student_rewards.load(echo=lambda _: None)
    names = list(variant.rewards) if variant.rewards is not None else None
    return student_rewards.pick(saved, names) if saved is not None else reward_functions(names)


def reward_mismatch(variant: Variant, record: dict) -> list[str]:
    """How the reward functions a folder trained (names and the sources' SHA-256) differ from the variant's."""
    from labs.l71 import recipe_identity

    if not {"recipe", "reward_sources", "reward_functions"} & set(record):
        return []  # a folder that recorded no reward functions: nothing to compare
    recorded = recipe_identity.of_record(record)
    if recorded is None:
        names = recorded_rewards(record)
        wanted = [f.__name__ for f in trained_rewards(variant)]
        if names is not None and names != wanted:
            return [f"recompensas: la carpeta tiene {names}, la variante pide {wanted}"]
        return []
    wanted = recipe_identity.reward_hashes(trained_rewards(variant))
    have = {"rewards": recorded["rewards"]}
    out = recipe_identity.differences_es(have, {"rewards": wanted}, "la carpeta", "la variante")
    if not out and list(recorded["rewards"]) != list(wanted):
        out = [f"recompensas: la carpeta tiene {list(recorded['rewards'])}, la variante pide {list(wanted)}"]
    return out


def check_variants(variants: Sequence[Variant], profile: Profile) -> None:
    """Names unique and tagged with the profile; overrides that the profile knows."""
    seen: dict[str, Variant] = {}
    for v in variants:
        if profile.name not in v.name:
            raise SweepError(
                f"El nombre de la variante '{v.name}' no contiene el perfil '{profile.name}': así una ejecución "
                "de un perfil podría confundirse con la de otro en la misma carpeta de ejecuciones."
            )
        v.profile(profile)  # an unknown setting raises ProfileError here, before anything runs
        if v.name in seen and (seen[v.name].overrides != v.overrides or seen[v.name].rewards != v.rewards):
            raise SweepError(f"Dos variantes se llaman '{v.name}' con ajustes distintos.")
        seen[v.name] = v


def unique(variants: Iterable[Variant]) -> list[Variant]:
    """Variants in order, each name once (a run shared by two exercises runs once)."""
    out, names = [], set()
    for v in variants:
        if v.name not in names:
            names.add(v.name)
            out.append(v)
    return out


def replace(variant: Variant, **changes) -> Variant:
    """A copy of ``variant`` with some fields changed."""
    return dataclasses.replace(variant, **changes)
