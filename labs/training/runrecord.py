"""What a run trains with, compared at every resume with what ``run.json`` recorded when it started.

``run.json`` is written once, when a run starts. Resuming with another learning rate or an edited reward
function would mix two recipes in one run (the optimizer and scheduler state come from the checkpoint)
while the record claimed one. ``check_resume`` compares, before any model loads, the knobs of the
profile, the ``GRPOConfig`` values, the reward functions (names and, for a student's own, the SHA-256 of
their source) and the base model; a difference raises ``RecipeChanged`` listing each one and the two
ways out. With ``accept=True`` the change is kept: ``run.json`` keeps the original record and gains,
under ``"changes"``, what changed and from which step (the grading report shows it).
"""

from __future__ import annotations

import json

from labs.core.runfolder import RUN_JSON, RunFolder, now_iso, read_json, write_json
from labs.training import checkpoints

# Knobs that change how a run is kept or watched, not what it trains.
NOT_RECIPE = {"description", "keep_checkpoints", "reward_timeout_s", "report_to", "output_dir"}
CHANGES = "changes"


class RecipeChanged(ValueError):
    """A resume would train with other settings than the run recorded; the message is for students."""

    def __init__(self, differences: list[str], step: int):
        self.differences = differences
        lines = "\n".join(f"  - {d}" for d in differences)
        where = f"hasta el checkpoint-{step}" if step else "hasta ahora"
        super().__init__(
            f"Este run ya empezó con otra receta: los pasos {where} se entrenaron con lo que dice run.json, y "
            f"continuar ahora mezclaría dos recetas en un run ({len(differences)} diferencia(s)):\n{lines}\n"
            "Dos salidas: (1) continuar con lo registrado: vuelve a lanzar con los ajustes y las funciones de "
            "run.json (sin esos --set, con el código de la función como estaba); (2) empezar un run nuevo con "
            "--fresh (fresh=True en el cuaderno), que deja este como está. Si de verdad quieres continuar con el "
            "cambio, --accept-changes (accept_changes=True) lo acepta y lo apunta en run.json con el paso desde "
            "el que rige."
        )


def _plain(value):
    """JSON's view of a value: tuples become lists, as they do in run.json."""
    return json.loads(json.dumps(value))


def reward_identity(sources: list[dict]) -> dict:
    """``{name: source SHA-256 or None}``: a course function by name, a student's also by its source."""
    return {s["name"]: s.get("source_sha256") for s in sources}


def recipe_of(profile, grpo_config: dict, reward_sources: list[dict]) -> dict:
    """The parts of ``run.json`` a resume must match."""
    return {
        "profile": {k: v for k, v in _plain(profile.as_dict()).items() if k not in NOT_RECIPE},
        "grpo_config": {k: v for k, v in _plain(grpo_config).items() if k not in NOT_RECIPE},
        "rewards": reward_identity(reward_sources),
    }


def recorded_recipe(record: dict, as_trained: bool = False) -> dict:
    """The recipe in force now: the one recorded at the start, with every accepted change applied.

    A notebook that changed a ``GRPOConfig`` value in its own cell left, in ``grpo_config_changes``, the
    profile's value beside the one used: before the trainer exists (``as_trained=False``) the profile's
    value is what a resume must match; once it exists, the value used.
    """
    grpo = {k: v for k, v in record.get("grpo_config", {}).items() if k not in NOT_RECIPE}
    if not as_trained:
        for key, pair in record.get("grpo_config_changes", {}).items():
            if key in grpo:
                grpo[key] = pair["perfil"]
    recipe = {
        "profile": {k: v for k, v in record.get("profile", {}).items() if k not in NOT_RECIPE},
        "grpo_config": grpo,
        "rewards": reward_identity(record.get("reward_sources", [])),
    }
    for change in record.get(CHANGES, []):
        for part in ("profile", "grpo_config"):
            for key, pair in change.get(part, {}).items():
                recipe[part][key] = pair["ahora"]
        if "rewards" in change:
            recipe["rewards"] = dict(change["rewards"]["ahora"])
    return recipe


def differences(recorded: dict, now: dict) -> dict:
    """``{"profile": {key: (old, new)}, "grpo_config": {...}, "rewards": (old, new) or absent}``."""
    out = {}
    for part in ("profile", "grpo_config"):
        old, new = recorded[part], now[part]
        diff = {k: (old[k], new[k]) for k in old.keys() & new.keys() if old[k] != new[k]}
        if diff:
            out[part] = diff
    if recorded["rewards"] != now["rewards"]:
        out["rewards"] = (recorded["rewards"], now["rewards"])
    return out


def _short(sha):
    return f"{sha[:12]}…" if isinstance(sha, str) else "sin código registrado"


def describe_es(diff: dict) -> list[str]:
    """One Spanish line per difference."""
    lines = []
    profile = diff.get("profile", {})
    for key, (old, new) in sorted(profile.items()):
        lines.append(f"{key}: en run.json {old!r}, ahora {new!r}")
    for key, (old, new) in sorted(diff.get("grpo_config", {}).items()):
        if key not in profile:  # the same knob, seen in GRPOConfig too
            lines.append(f"{key} (GRPOConfig): en run.json {old!r}, ahora {new!r}")
    if "rewards" in diff:
        old, new = diff["rewards"]
        for name in sorted(old.keys() - new.keys()):
            lines.append(f"función de recompensa {name}: estaba en run.json y ahora no se usa")
        for name in sorted(new.keys() - old.keys()):
            lines.append(f"función de recompensa {name}: nueva, no estaba en run.json")
        for name in sorted(old.keys() & new.keys()):
            if old[name] != new[name]:
                lines.append(f"función de recompensa {name}: su código cambió (SHA-256 en run.json "
                             f"{_short(old[name])}, ahora {_short(new[name])})")
    return lines


def resume_step(run: RunFolder) -> int:
    """The step a resume continues from: the newest checkpoint whose files are whole (0 if none)."""
    folder, _ = checkpoints.newest_usable(run.checkpoints)
    return checkpoints.step_of(folder) if folder is not None else 0


def trainer_config(record: dict, args) -> dict:
    """The recorded recipe with ``GRPOConfig`` read from a built trainer's ``args`` instead."""
    recorded = recorded_recipe(record, as_trained=True)
    used = {k: _plain(getattr(args, k)) for k in recorded["grpo_config"] if hasattr(args, k)}
    return {**recorded, "grpo_config": {**recorded["grpo_config"], **used}}


def check_resume(run: RunFolder, now: dict | None = None, accept: bool = False, write: bool = True,
                 args=None) -> dict:
    """Refuse (``RecipeChanged``) or, with ``accept``, record a resume that changes the recipe.

    ``now``: the recipe from the profile and reward functions (before any model loads); or ``args``: a
    trainer's ``GRPOConfig`` (a notebook builds its own), compared with the values the run used.
    Returns the differences (empty when the resume trains with the recorded recipe). ``write`` is False
    on the processes of an ``accelerate launch`` that do not write the run folder.
    """
    record = read_json(run.path(RUN_JSON))
    if args is not None:
        diff = differences(recorded_recipe(record, as_trained=True), trainer_config(record, args))
    else:
        diff = differences(recorded_recipe(record), now)
    if not diff:
        return diff
    step = resume_step(run)
    if not accept:
        raise RecipeChanged(describe_es(diff), step)
    if write:
        change = {"step": step, "at": now_iso(), "lines_es": describe_es(diff)}
        for part in ("profile", "grpo_config"):
            if part in diff:
                change[part] = {k: {"antes": old, "ahora": new} for k, (old, new) in diff[part].items()}
        if "rewards" in diff:
            change["rewards"] = {"antes": diff["rewards"][0], "ahora": diff["rewards"][1]}
        record.setdefault(CHANGES, []).append(change)
        write_json(run.path(RUN_JSON), record)
    return diff


def check_base_model(run: RunFolder, base_model: str, accept: bool = False, write: bool = True) -> bool:
    """The model GRPO starts from must be the one the run started from (compared by its last path part:
    a format pass's cache key, or a hub id's name, so a moved cache folder is not a change). True if it
    differs and ``accept`` recorded it; ``RecipeChanged`` if it differs without ``accept``."""
    from pathlib import PurePath

    record = read_json(run.path(RUN_JSON))
    recorded = record.get("base_model")
    for change in record.get(CHANGES, []):
        recorded = change.get("base_model", {}).get("ahora", recorded)
    if recorded is None or PurePath(str(recorded)).name == PurePath(str(base_model)).name:
        return False
    line = f"modelo de partida: en run.json {recorded!r}, ahora {base_model!r}"
    step = resume_step(run)
    if not accept:
        raise RecipeChanged([line], step)
    if write:
        record.setdefault(CHANGES, []).append({"step": step, "at": now_iso(), "lines_es": [line],
                                               "base_model": {"antes": recorded, "ahora": base_model}})
        write_json(run.path(RUN_JSON), record)
    return True
