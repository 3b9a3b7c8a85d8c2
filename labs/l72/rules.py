"""The rules L7.2's two Unsloth calls must follow, from the lesson; a broken rule says why, never what to type.

``FastLanguageModel.from_pretrained`` and ``get_peft_model`` are judged as Unsloth receives them: the recorded
arguments are bound to their parameters (a model name by position counts), Unsloth 2026.10.9's defaults fill
what the call leaves out (``tests/test_l72_checks.py`` holds them against the pinned wheel), and each rule reads
the profile the call was made for. Any value inside a rule passes; other harmless keywords pass too, except one
that looks like a misspelt parameter (``**kwargs`` would swallow it silently).
"""

from __future__ import annotations

import difflib
import numbers

from labs.core.profiles import LORA_TARGETS, Profile
from labs.l72 import model_ids

# Unsloth 2026.10.9 (unsloth/models/loader.py, llama.py): the leading parameters, in order, and the defaults of
# those the rules read.
POSITIONAL = {
    "from_pretrained": ("model_name", "max_seq_length", "dtype", "load_in_4bit", "load_in_8bit", "load_in_16bit",
                        "full_finetuning", "token"),
    "get_peft_model": ("model", "r", "target_modules", "lora_alpha", "lora_dropout", "bias"),
}
DEFAULTS = {
    "from_pretrained": {"model_name": "unsloth/Llama-3.2-1B-Instruct", "max_seq_length": 2048, "load_in_4bit": True,
                        "load_in_8bit": False, "load_in_16bit": False, "load_in_fp8": False,
                        "fast_inference": False, "max_lora_rank": 64, "gpu_memory_utilization": 0.5},
    "get_peft_model": {"r": 16, "target_modules": list(LORA_TARGETS), "lora_alpha": 16,
                       "use_gradient_checkpointing": "unsloth", "random_state": 3407},
}
OTHER_PARAMETERS = {  # named parameters no rule reads, to tell a misspelt keyword from a harmless extra one
    "from_pretrained": ("device_map", "rope_scaling", "fix_tokenizer", "trust_remote_code", "use_gradient_checkpointing",
                        "revision", "float8_kv_cache", "random_state", "disable_log_stats"),
    "get_peft_model": ("layers_to_transform", "layers_pattern", "max_seq_length", "use_rslora", "modules_to_save",
                       "init_lora_weights", "loftq_config", "qat_scheme"),
}
VLLM_MAX_LORA_RANK = 512  # the largest rank vLLM reserves for (vllm.config.lora.MaxLoRARanks)
ALPHA_SCALES = (1, 2)  # lora_alpha / r: 1 in the lesson (and rtx5090), 2 in Unsloth's recipe (rtx5090-base)


def bind(call: str, args: tuple, kwargs: dict) -> tuple[dict, list[str]]:
    """The arguments by parameter name, as Python would bind them, and the problems binding them."""
    names = POSITIONAL[call]
    if len(args) > len(names):
        return {}, [f"{call} recibe {len(args)} argumentos sin nombre: pasa los ajustes por su nombre."]
    bound = dict(zip(names, args))
    twice = sorted(set(bound) & set(kwargs))
    if twice:
        return {}, [f"{call} recibe {', '.join(twice)} dos veces (por posición y por nombre)."]
    bound.update(kwargs)
    return bound, []


def _misspelt(call: str, bound: dict) -> list[str]:
    known = set(POSITIONAL[call]) | set(DEFAULTS[call]) | set(OTHER_PARAMETERS[call])
    problems = []
    for key in sorted(set(bound) - known):
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.85)
        if close:
            problems.append(f"{call} no tiene el argumento {key} (¿{close[0]}?): Unsloth lo ignoraría sin avisar.")
    return problems


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


PRECISION_FLAGS = ("load_in_4bit", "load_in_8bit", "load_in_16bit", "load_in_fp8")


def precision_flags_conflict(values: dict) -> bool:
    """Unsloth 2026.10.9's own rule (``_precision_flags_conflict`` in unsloth/models/loader.py, which raises "Can
    only load in 4bit or 8bit or 16bit, not a combination!"), with its arithmetic: ``int()`` of the first three
    flags (so ``load_in_4bit=2`` alone counts twice, and ``None`` or ``"no"`` raise as they do there) and
    ``load_in_fp8 != False`` (so ``0`` is off, and ``None``, ``"no"`` or ``"block"`` are on)."""
    return (int(values["load_in_4bit"]) + int(values["load_in_8bit"]) + int(values["load_in_16bit"])
            + int(values["load_in_fp8"] != False)) >= 2  # noqa: E712 - Unsloth's comparison, 0 == False included


def _flag_on(flag: str, value) -> bool:
    return value != False if flag == "load_in_fp8" else int(value) != 0  # noqa: E712 - as precision_flags_conflict


def precision_flag_errors(values: dict) -> list[str]:
    """The precision flags' problems, in Spanish: a value Unsloth's ``int()`` cannot take, or more than one flag on."""
    bad = []
    for flag in PRECISION_FLAGS[:3]:
        try:
            int(values[flag])
        except (TypeError, ValueError):
            bad.append(f"{flag}={values[flag]!r}: Unsloth suma las banderas de precisión con int() y con ese valor "
                       "falla antes de cargar; usa True o False.")
    if bad:
        return bad
    if precision_flags_conflict(values):
        on = [f"{flag}={values[flag]!r}" for flag in PRECISION_FLAGS if _flag_on(flag, values[flag])]
        return [f"{', '.join(on)}: Unsloth carga los pesos con una sola precisión y, con más de una activada (o una "
                "que vale más de 1), se niega a cargar (\"Can only load in 4bit or 8bit or 16bit\")."]
    return []


def from_pretrained_errors(values: dict, profile: Profile) -> list[str]:
    problems = precision_flag_errors(values)
    name = values["model_name"]
    if not isinstance(name, str) or not model_ids.same_model(name, profile.unsloth_model):
        known = model_ids.unsloth_table().knows(name) if isinstance(name, str) else None
        if known is False and "qwen3" in name.lower():
            problems.append(f"model_name={name!r}: Unsloth no conoce ese modelo; ese id no existe (mira la celda de "
                            "los nombres de modelo, más arriba).")
        else:
            problems.append(f"model_name={name!r} no es el modelo que entrena este perfil.")
    length = values["max_seq_length"]
    if not _is_int(length) or length < profile.max_prompt_tokens + profile.max_completion_length:
        problems.append(f"max_seq_length={length!r} no alcanza para el prompt más largo que deja pasar el perfil "
                        "más la respuesta más larga que genera.")
    if values["load_in_4bit"] is not profile.load_in_4bit:
        problems.append(f"load_in_4bit={values['load_in_4bit']!r}: no es la precisión de los pesos que planifica "
                        "este perfil.")
    if values["fast_inference"] is not True:
        problems.append(f"fast_inference={values['fast_inference']!r}: sin vLLM dentro del proceso no hay "
                        "generación rápida, ni pesos compartidos, ni Standby.")
    rank = values["max_lora_rank"]
    if not _is_int(rank) or not profile.lora_r <= rank <= VLLM_MAX_LORA_RANK:
        problems.append(f"max_lora_rank={rank!r}: vLLM debe reservar sitio para un adaptador del rango que entrena "
                        "este perfil (y vLLM no reserva más de 512).")
    share = values["gpu_memory_utilization"]
    if not isinstance(share, numbers.Real) or isinstance(share, bool) or not 0 < share < 1:
        problems.append(f"gpu_memory_utilization={share!r}: es una fracción de la memoria de la GPU, entre 0 y 1 "
                        "(con Standby, Unsloth elige la suya).")
    return problems


def get_peft_model_errors(values: dict, profile: Profile, model) -> list[str]:
    problems = []
    if "model" not in values or values["model"] is not model:
        problems.append("get_peft_model debe recibir el modelo que tu función recibe.")
    r, alpha = values["r"], values["lora_alpha"]
    if r != profile.lora_r or not _is_int(r):
        problems.append(f"r={r!r} no es el rango que planifica este perfil (su plan de VRAM y su learning rate "
                        "cuentan con él).")
    elif not _is_int(alpha) or alpha not in [s * r for s in ALPHA_SCALES]:
        problems.append(f"lora_alpha={alpha!r}: la escala del adaptador, lora_alpha / r, no es ninguna de las dos "
                        "que usa el curso.")
    targets = values["target_modules"]
    if isinstance(targets, str) or not hasattr(targets, "__iter__") or set(targets) != set(LORA_TARGETS):
        problems.append("target_modules: deben ser todas las proyecciones lineales de cada capa, las de la atención "
                        "y las del MLP, y ninguna otra cosa.")
    if values["use_gradient_checkpointing"] != "unsloth":
        problems.append(f"use_gradient_checkpointing={values['use_gradient_checkpointing']!r}: no es el "
                        "checkpointing de Unsloth, el que guarda los bordes de capa en la RAM del host.")
    if values["random_state"] != profile.seed:
        problems.append(f"random_state={values['random_state']!r}: no es la semilla del run de este perfil (el "
                        "adaptador inicial no sería el del lab).")
    return problems


def errors(call: str, args: tuple, kwargs: dict, profile: Profile, model=None) -> list[str]:
    """Spanish problems with one recorded call under ``profile``, [] if it follows every rule."""
    bound, problems = bind(call, args, kwargs)
    if problems:
        return problems
    problems = _misspelt(call, bound)
    values = {**DEFAULTS[call], **bound}
    if call == "from_pretrained":
        return problems + from_pretrained_errors(values, profile)
    return problems + get_peft_model_errors(values, profile, model)
