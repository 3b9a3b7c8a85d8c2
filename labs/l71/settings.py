"""The GRPO settings a student writes in the L7.1 notebook, saved where ``python -m labs l71`` reads them.

The notebook's ``GRPOConfig(...)`` cell holds the lesson's knobs (``LESSON_KNOBS``); ``save`` writes their
values to ``<runs>/_ajustes/l71-<profile>.json`` (a leading ``_``: the run-folder scans skip it). A later
``python -m labs l71`` of the same profile loads them (``load``) as profile overrides, below any ``--set``
of the command line, and records in run.json where they came from (``settings_from``). So the long terminal run trains the student's configuration,
not a second copy of it.

An edit that cannot take effect is said, in Spanish, with the command that would apply it: a finished
run keeps the settings it trained with; only ``--fresh`` starts one with the new values.
"""

from __future__ import annotations

import json
from pathlib import Path

from labs.core.paths import runs_dir
from labs.core.profiles import Profile, student_command
from labs.core.runfolder import RunFolder, now_iso, read_json, write_json
from labs.training import recipe

# The GRPOConfig keywords of lesson 7.3's call that a profile sets (max_prompt_length is gone in TRL 1.x;
# vLLM's memory share stays with the recipe: the CPU profiles have no GPU to share).
LESSON_KNOBS = (
    "num_generations",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "max_completion_length",
    "learning_rate",
    "beta",
    "logging_steps",
    "max_steps",
)
SOURCE = "cuaderno L7.1"


def settings_path(profile: Profile | str) -> Path:
    name = profile.name if isinstance(profile, Profile) else profile
    return runs_dir() / "_ajustes" / f"l71-{name}.json"


def rest_of_recipe(profile: Profile, output_dir: str) -> dict:
    """The recipe's GRPOConfig keywords other than the lesson's knobs (output, device, logging, vLLM)."""
    return {k: v for k, v in recipe.grpo_config_kwargs(profile, output_dir).items() if k not in LESSON_KNOBS}


def knobs_of(config) -> dict:
    """The lesson's knobs as a GRPOConfig (or any object with those attributes) holds them."""
    return {k: getattr(config, k) for k in LESSON_KNOBS}


def differences(values: dict, profile: Profile) -> dict:
    """``{knob: (profile's value, given value)}`` for every knob that differs from the profile."""
    return {k: (getattr(profile, k), v) for k, v in values.items() if v != getattr(profile, k)}


def command(profile: Profile, fresh: bool = False) -> str:
    return student_command("l71", profile) + (" --fresh" if fresh else "")


def save(config, profile: Profile, run: RunFolder | None = None, echo=print) -> Path:
    """Write the lesson's knobs of ``config`` for ``python -m labs l71``; say what they change and when."""
    values = knobs_of(config)
    changed = differences(values, profile)
    path = write_json(settings_path(profile), {
        "profile": profile.name,
        "saved": now_iso(),
        "source": SOURCE,
        "values": values,
    })
    if changed:
        listed = ", ".join(f"{k}={new!r} (perfil: {old!r})" for k, (old, new) in changed.items())
        echo(f"Ajustes guardados en {path}. Distintos del perfil: {listed}.")
    else:
        echo(f"Ajustes guardados en {path}: son los del perfil '{profile.name}'.")
    if run is not None and run.is_finished() and changed:
        echo(f"El run {run.root.name} ya terminó y entrenó con sus ajustes: estos no lo cambian. Para entrenar "
             f"con los tuyos, en una terminal: {command(profile, fresh=True)}")
    else:
        echo(f"Los usa el próximo {command(profile)} (y este cuaderno, si entrena aquí).")
    return path


def load(profile: Profile, echo=print) -> tuple[dict, dict | None]:
    """The saved knobs that differ from ``profile`` (as overrides) and where they came from (for run.json).

    ``({}, None)`` when nothing is saved for this profile. A file that cannot be used raises
    ``ValueError`` with what is wrong and what to do; the file is left as it is.
    """
    path = settings_path(profile)
    if not path.exists():
        return {}, None
    try:
        record = read_json(path)
        values = record["values"]
        if not isinstance(values, dict):
            raise TypeError("'values' no es un diccionario")
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(
            f"No puedo leer los ajustes guardados en {path} ({exc}). Vuelve a guardarlos desde el cuaderno L7.1 "
            f"o borra el archivo para usar los del perfil '{profile.name}'."
        ) from exc
    unknown = sorted(set(values) - set(LESSON_KNOBS))
    if unknown:
        raise ValueError(
            f"{path} tiene ajustes que este laboratorio no acepta: {', '.join(unknown)}. Acepta: "
            f"{', '.join(LESSON_KNOBS)}. Vuelve a guardarlos desde el cuaderno L7.1 o borra el archivo."
        )
    for key, value in values.items():  # the profile's own type check (an int where an int belongs)
        expected = type(getattr(profile, key))
        if not isinstance(value, (int, float)) or isinstance(value, bool) or (expected is int and not isinstance(value, int)):
            raise ValueError(f"{path}: {key}={value!r} debe ser un número {'entero' if expected is int else ''}."
                             " Corrígelo en el cuaderno L7.1 y vuelve a guardar.")
    overrides = {k: new for k, (_, new) in differences(values, profile).items()}
    source = {"file": str(path), "saved": record.get("saved"), "source": record.get("source", SOURCE),
              "values": overrides}
    if overrides:
        listed = ", ".join(f"{k}={v!r}" for k, v in overrides.items())
        echo(f"[ajustes] Uso tus ajustes del {source['source']} ({path}): {listed}.")
    return overrides, source
