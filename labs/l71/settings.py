"""The GRPO settings a student writes in the L7.1 notebook, saved where ``python -m labs l71`` reads them.

The notebook's ``GRPOConfig(...)`` cell holds the lesson's knobs (``LESSON_KNOBS``); ``save`` writes their
values to ``<runs>/_ajustes/l71-<profile>.json`` (a leading ``_``: the run-folder scans skip it). A later
``python -m labs l71`` of the same profile loads them (``load``) as profile overrides, below any ``--set``
of the command line, and records in run.json where they came from (``settings_from``). So the long terminal run trains the student's configuration,
not a second copy of it.

An edit that cannot take effect is said, in Spanish, with the command that would apply it: a finished
run keeps the settings it trained with; only ``--fresh`` starts one with the new values.

The student chooses the values; ``problems`` holds the lesson's rules for them (whole groups, the learning rate's
band for LoRA or for all the weights, a KL weight, a completion length the VRAM plan fits, a run with a curve to
read) and says, for each value that breaks one, the reason, never the value to type. The notebook's check,
``save`` and ``load`` (so ``python -m labs l71``) apply the same rules. The reward functions the student writes
in section 1 are saved beside these settings (``labs.l71.student_rewards``).
"""

from __future__ import annotations

import json
import math
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
    # what L6 teaches the student to choose: how the loss is averaged, how the group is sampled, how the
    # advantage is scaled and how far one step may move the policy (TRL 1.15/1.16 GRPOConfig names)
    "loss_type",
    "temperature",
    "scale_rewards",
    "epsilon",
)
TEXT_KNOBS = {  # the knobs that take a name, and the names the lesson teaches (TRL accepts more)
    "loss_type": ("grpo", "dr_grpo", "dapo"),
    "scale_rewards": ("group", "batch", "none"),
}
SOURCE = "cuaderno L7.1"

# The lesson's rules for the values the student chooses (``problems``).
LR_BANDS = {  # use_lora -> (lowest, highest) learning rate of RL with GRPO
    False: (1e-7, 3e-5),  # all the weights: the lesson's ~1e-6 (a 135M model on the CPU profiles trains at 1e-5 to 2.5e-5)
    True: (2e-6, 5e-5),  # LoRA: ~10x the full fine-tune rate (LoRA Without Regret; Unsloth's GRPO notebook: 5e-6)
}
BETA_HIGHEST = 0.5  # E3 compares 0.2 with the lesson's 0.04; far above, the KL pins the model to the reference
SHORTEST_COMPLETION = 16  # <think>, some reasoning, </think>, <answer>N</answer>
CPU_LONGEST_COMPLETION = 256  # on a CPU every new token is a forward pass of the whole model
FEWEST_LOGGED_STEPS = 2  # a curve needs at least two points (the ci smoke profile's two steps)
TEMPERATURE_HIGHEST = 1.5  # above, sampling flattens towards uniform tokens: the group's answers stop being answers
EPSILON_HIGHEST = 0.5  # above, one step may move a token's probability by half or more: the clip no longer holds it


def fewest_logged_points(profile: Profile) -> int:
    """The fewest logged metrics rows a run may leave: what the rubric's trend tests need
    (``labs.core.stats.MIN_TREND_POINTS``), or, on a profile whose own recipe logs fewer (the ci smoke test),
    that many (never under ``FEWEST_LOGGED_STEPS``)."""
    from labs.core.stats import MIN_TREND_POINTS

    own = profile.max_steps // max(1, profile.logging_steps)
    return max(FEWEST_LOGGED_STEPS, min(MIN_TREND_POINTS, own))


def _is_number(value, integer: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return False
    return math.isfinite(value)


def _lr_es(x: float) -> str:
    return f"{x:.0e}".replace("e-0", "e-")


def problems(values: dict, profile: Profile, processes: int = 1) -> dict[str, str]:
    """``{knob: Spanish reason}`` for each lesson knob in ``values`` whose value breaks the lesson's rule on ``profile``.

    ``values`` holds the ``LESSON_KNOBS`` (missing ones are the profile's). The reasons say which rule and
    why, never which value to write.
    """
    v = {**{k: getattr(profile, k) for k in LESSON_KNOBS}, **values}
    out = _type_problems(v, profile)
    if out:
        return out
    G, micro, accumulation = v["num_generations"], v["per_device_train_batch_size"], v["gradient_accumulation_steps"]
    if G < 2:
        out["num_generations"] = ("GRPO compara las respuestas de un mismo prompt con su media y su desviación: con menos "
                                  "de dos por grupo no hay nada que comparar y la ventaja es siempre 0.")
    for key in ("per_device_train_batch_size", "gradient_accumulation_steps"):
        if v[key] < 1:
            out[key] = f"{key} cuenta completions o micro-lotes: tiene que ser al menos 1."
    if not out and (micro * accumulation * processes) % G:
        out["per_device_train_batch_size"] = (
            "Cada paso genera per_device_train_batch_size × gradient_accumulation_steps completions (por proceso), y "
            "se reparten en grupos de num_generations respuestas del mismo prompt: con estos tres valores un grupo "
            "quedaría partido y TRL lo rechaza. Cámbialos para que los grupos queden enteros.")
    low, high = LR_BANDS[bool(profile.use_lora)]
    lr = v["learning_rate"]
    if not low <= lr <= high:
        what = ("adaptadores LoRA (empiezan en cero y mueven un subespacio pequeño: quieren unas 10 veces el LR de "
                "entrenar todos los pesos)" if profile.use_lora else "todos los pesos del modelo")
        side = ("demasiado alto: en RL un LR de ajuste supervisado hace colapsar la política en pocos pasos" if lr > high
                else "demasiado bajo: las curvas saldrían planas en los pasos del run")
        out["learning_rate"] = (f"El perfil {profile.name} entrena {what}; tu learning_rate es {side}. La banda de "
                                f"la lección para este caso va de {_lr_es(low)} a {_lr_es(high)}.")
    beta = v["beta"]
    if not 0 < beta <= BETA_HIGHEST:
        out["beta"] = ("Este lab enseña el término KL frente al modelo de referencia y lo registra en sus curvas: con un "
                       "peso cero TRL no calcula la KL ni carga la referencia." if beta <= 0 else
                       f"Un peso de la KL por encima de {BETA_HIGHEST} ata la política a la referencia y no deja "
                       "aprender nada en los pasos del run.")
    out.update(_l6_problems(v))
    out.update(_length_problem(v, profile))
    steps, logging = v["max_steps"], v["logging_steps"]
    if steps < 1 or logging < 1:
        out["max_steps" if steps < 1 else "logging_steps"] = "max_steps y logging_steps cuentan pasos: al menos 1."
    elif steps // logging < (fewest := fewest_logged_points(profile)):
        out["logging_steps"] = (f"Con estos max_steps y logging_steps el run registra menos de {fewest} puntos de "
                                "métricas: la rúbrica mira la tendencia de las curvas y con menos puntos no la puede "
                                "juzgar.")
    return out


def _type_problems(v: dict, profile: Profile) -> dict[str, str]:
    out = {}
    for key in LESSON_KNOBS:
        if key in TEXT_KNOBS:
            if not isinstance(v[key], str):
                out[key] = (f"{key} se escribe con su nombre entre comillas, uno de {', '.join(map(repr, TEXT_KNOBS[key]))} "
                            f"(tu valor: {v[key]!r}).")
            continue
        integer = isinstance(getattr(profile, key), int)
        if not _is_number(v[key], integer):
            out[key] = f"{key} debe ser un número{' entero' if integer else ''} (tu valor: {v[key]!r})."
    return out


def _l6_problems(v: dict) -> dict[str, str]:
    """The rules of what L6 teaches: which loss, how to sample the group, how to scale it, how far to clip."""
    out = {}
    if v["loss_type"] not in TEXT_KNOBS["loss_type"]:
        out["loss_type"] = ("L6 enseña tres maneras de promediar la pérdida de las respuestas del grupo: 'grpo' (por "
                            "longitud de cada respuesta), 'dr_grpo' (por una constante) y 'dapo' (por los tokens del "
                            "lote). TRL tiene otras que cambian también el recorte o el nivel del cociente, y este lab "
                            f"no las enseña (tu valor: {v['loss_type']!r}).")
    if v["scale_rewards"] not in TEXT_KNOBS["scale_rewards"]:
        out["scale_rewards"] = ("La ventaja de L6 se escala por la desviación del grupo ('group'), la del lote ('batch') "
                                f"o no se escala ('none'); TRL no conoce otra (tu valor: {v['scale_rewards']!r}).")
    temperature = v["temperature"]
    if temperature <= 0:
        out["temperature"] = ("Con temperatura 0 (o menos) vLLM elige siempre el token más probable: las respuestas de un "
                              "grupo salen iguales, su recompensa también, y la ventaja es 0 para todas: no se aprende nada.")
    elif temperature > TEMPERATURE_HIGHEST:
        out["temperature"] = (f"Por encima de {TEMPERATURE_HIGHEST} el muestreo se acerca a elegir tokens al azar: las "
                              "respuestas dejan de ser texto y ninguna del grupo cobra recompensa que comparar.")
    epsilon = v["epsilon"]
    if epsilon <= 0:
        out["epsilon"] = ("epsilon es el margen del recorte del cociente de probabilidades (L6): con 0 o menos no deja "
                          "ningún margen y el gradiente de cada token se anula en cuanto la política se mueve.")
    elif epsilon > EPSILON_HIGHEST:
        out["epsilon"] = (f"Con un margen de recorte por encima de {EPSILON_HIGHEST} un paso puede cambiar la probabilidad "
                          "de un token a más del doble o a menos de la mitad: el recorte ya no frena nada (L6 explica "
                          "para qué está).")
    return out


def _length_problem(v: dict, profile: Profile) -> dict:
    length = v["max_completion_length"]
    if length < SHORTEST_COMPLETION:
        return {"max_completion_length": (
            f"Con menos de {SHORTEST_COMPLETION} tokens no cabe una respuesta con <think>, un razonamiento, </think> "
            "y <answer>N</answer>: todas saldrían cortadas y cobrarían 0 de formato.")}
    if profile.use_cpu:
        if length > CPU_LONGEST_COMPLETION:
            return {"max_completion_length": (
                f"En CPU cada token nuevo es una pasada del modelo entero: con más de {CPU_LONGEST_COMPLETION} tokens "
                "por respuesta un paso tardaría muchos minutos.")}
        return {}
    from labs.vram.planner import plan

    keys = ("num_generations", "per_device_train_batch_size", "gradient_accumulation_steps", "max_completion_length")
    planned = plan(profile.replace(**{k: v[k] for k in keys}), suggest=False)
    if not planned.fits:
        return {"max_completion_length": (
            f"Con esta longitud máxima (y este micro-lote) el plan de VRAM no cabe en {planned.card_gib:.0f} GiB: la "
            "caché KV de vLLM y las activaciones crecen con los tokens de cada respuesta. Míralo con python -m labs "
            "vram y elige una longitud que quepa.")}
    return {}


def problems_es(found: dict[str, str]) -> str:
    return "\n".join(f"  - {key}: {reason}" for key, reason in found.items())


def broken_batch(profile: Profile) -> dict:
    """A micro-batch (and, if needed, an accumulation) that breaks the whole-groups rule on ``profile``.

    The L7.1 notebook's demonstration of the pre-flight check: ``num_generations + 2`` fills whole groups on some
    profiles (on rtx5090, 10 x 4 = 40 completions, five groups of 8), so the demonstration computes one that does not.
    """
    G, accumulation = profile.num_generations, profile.gradient_accumulation_steps
    if accumulation % G == 0:  # any micro-batch fills whole groups: the accumulation must change too
        accumulation += 1
    micro = next(b for b in range(profile.per_device_train_batch_size + 1, profile.per_device_train_batch_size + G + 1)
                 if (b * accumulation) % G)
    return {"per_device_train_batch_size": micro, "gradient_accumulation_steps": accumulation}


def settings_path(profile: Profile | str) -> Path:
    name = profile.name if isinstance(profile, Profile) else profile
    return runs_dir() / "_ajustes" / f"l71-{name}.json"


def saved_elsewhere(profile: Profile | str) -> list[str]:
    """The profiles other than ``profile`` with saved settings (their files in ``_ajustes``)."""
    name = profile.name if isinstance(profile, Profile) else profile
    folder = settings_path(name).parent
    found = sorted(p.name[len("l71-"):-len(".json")] for p in folder.glob("l71-*.json")) if folder.is_dir() else []
    return [n for n in found if n != name]


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
    found = problems(values, profile)
    if found:
        raise ValueError("No guardo estos ajustes: rompen reglas de la lección (nada se ha escrito).\n"
                         + problems_es(found) + "\nCámbialos en tu GRPOConfig y vuelve a ejecutar.")
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
        others = saved_elsewhere(profile)
        if others:
            echo(f"[ajustes] No hay ajustes guardados para el perfil '{profile.name}' ({path.name}); los hay de "
                 f"{', '.join(repr(n) for n in others)}, que aquí no se usan (cada perfil tiene su modelo, su memoria "
                 f"y sus reglas): entreno los del perfil '{profile.name}'. Para usar los tuyos con este perfil, "
                 "guárdalos desde el cuaderno L7.1 (sección 3) con este perfil.")
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
    wrong = _type_problems({**{k: getattr(profile, k) for k in LESSON_KNOBS}, **values}, profile)
    if wrong:  # the profile's own type check (an int where an int belongs, a name where a name belongs)
        key = next(iter(wrong))
        text = wrong[key] if key in TEXT_KNOBS else (
            f"{key}={values[key]!r} debe ser un número{' entero' if isinstance(getattr(profile, key), int) else ''}.")
        raise ValueError(f"{path}: {text} Corrígelo en el cuaderno L7.1 y vuelve a guardar.")
    found = problems(values, profile)
    if found:
        raise ValueError(
            f"Los ajustes guardados en {path} rompen reglas de la lección:\n{problems_es(found)}\nCámbialos en tu "
            f"GRPOConfig del cuaderno L7.1 (sección 3) y vuelve a guardarlos, o lanza con --sin-ajustes para usar los "
            f"del perfil '{profile.name}' (el archivo no se toca)."
        )
    overrides = {k: new for k, (_, new) in differences(values, profile).items()}
    source = {"file": str(path), "saved": record.get("saved"), "source": record.get("source", SOURCE),
              "values": overrides}
    if overrides:
        listed = ", ".join(f"{k}={v!r}" for k, v in overrides.items())
        echo(f"[ajustes] Uso tus ajustes del {source['source']} ({path}): {listed}.")
    return overrides, source
