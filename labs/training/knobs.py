"""The valid type and range of every profile knob: one table that drives both the check and its test.

``check_knobs(profile)`` runs before any folder is created or model loaded (``labs.training.preflight``)
and returns one Spanish problem per knob out of range, naming the knob, the value and the valid range.
Without it a typo such as ``--set learning_rate=-1`` was found by torch after the model, the vLLM
engine and a whole base evaluation had been paid for.

Each ``Knob`` row says what a value must be; ``bad_values`` derives, from the same row, values just
outside it, so tests/test_preflight_table.py refuses every one of them without a second table.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from labs.core.profiles import Profile

# TRL 1.16's GRPOConfig.loss_type values the course's recipe can run as it is configured: 'luspo'
# needs importance_sampling_level='sequence' and 'vespo' needs the importance-sampling correction off
# (grpo_trainer.py, GRPOTrainer.__init__ raises for both with the course's other settings).
LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo")


@dataclass(frozen=True)
class Knob:
    """One profile field: its type, and for numbers the lowest/highest value (``open`` = excluded)."""

    name: str
    kind: type  # bool, int, float, str or tuple (of non-empty strings)
    low: float | None = None
    low_open: bool = False
    high: float | None = None
    high_open: bool = False
    choices: tuple = ()
    hint_es: str = ""

    def range_es(self) -> str:
        """The valid range in Spanish, e.g. 'un número > 0' or 'un entero entre 1 y 65535'."""
        what = {bool: "true o false", int: "un entero", float: "un número", str: "un texto no vacío",
                tuple: "una lista de nombres separados por comas"}[self.kind]
        if self.choices:
            return "uno de: " + ", ".join(repr(c) for c in self.choices)
        if self.low is not None and self.high is not None:
            left = "(" if self.low_open else "["
            right = ")" if self.high_open else "]"
            return f"{what} en {left}{_show(self.low)}, {_show(self.high)}{right}"
        if self.low is not None:
            return f"{what} {'>' if self.low_open else '>='} {_show(self.low)}"
        return what

    def problem(self, value) -> str | None:
        """Spanish text if ``value`` is not valid for this knob, else None."""
        if not self._valid(value):
            hint = f" {self.hint_es}" if self.hint_es else ""
            return f"{self.name}={value!r} no es válido: debe ser {self.range_es()}.{hint}"
        return None

    def _valid(self, value) -> bool:
        if self.kind is bool:
            return isinstance(value, bool)
        if self.kind is str:
            ok = isinstance(value, str) and bool(value.strip())
            return ok and (not self.choices or value in self.choices)
        if self.kind is tuple:
            ok = isinstance(value, tuple) and all(isinstance(v, str) and v.strip() for v in value)
            return ok and (not self.choices or set(value) <= set(self.choices))
        if isinstance(value, bool) or not isinstance(value, (int, float) if self.kind is float else int):
            return False
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        if self.high is not None and (value >= self.high if self.high_open else value > self.high):
            return False
        return True

    def bad_values(self) -> list:
        """Values this row must refuse: one of the wrong type, and each one just past a bound."""
        wrong_type = {bool: 1, int: 2.5, float: "0.1", str: 3, tuple: "q_proj"}[self.kind]
        bad = [wrong_type]
        if self.kind is str and not self.choices:
            bad.append("  ")
        if self.choices and self.kind is str:
            bad.append("otro")
        if self.kind in (int, float):
            step = 1 if self.kind is int else 1e-9 * max(1.0, abs(self.low or 0), abs(self.high or 0))
            if self.low is not None:
                bad.append(self.low if self.low_open else self.low - step)
            if self.high is not None:
                bad.append(self.high if self.high_open else self.high + step)
            if self.kind is float:
                bad.append(math.nan)
        return bad


def _show(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


POSITIVE_INT = dict(kind=int, low=1)

KNOBS: tuple[Knob, ...] = (
    Knob("name", str),
    Knob("description", str),
    # --- model and back-end ---
    Knob("model", str, hint_es="Es un id del hub (Qwen/Qwen3-4B-Instruct-2507), una carpeta local o bundled:..."),
    Knob("backend", str, choices=("trl", "unsloth")),
    Knob("use_cpu", bool),
    Knob("bf16", bool),
    Knob("gradient_checkpointing", bool),
    # --- data ---
    Knob("data_source", str, choices=("bundled", "hub"),
         hint_es="'bundled' lee data/gsm8k (viene con el repositorio); 'hub' prueba primero openai/gsm8k."),
    Knob("train_size", **POSITIVE_INT),
    Knob("eval_size", **POSITIVE_INT),
    Knob("max_prompt_tokens", **POSITIVE_INT),
    Knob("data_seed", int, low=0),
    # --- GRPO ---
    Knob("num_generations", int, low=2,
         hint_es="GRPO compara respuestas dentro de un grupo y necesita al menos 2 (con 1 la desviación típica "
                 "no existe y la ventaja es siempre 0). Usa 4 a 16."),
    Knob("max_completion_length", **POSITIVE_INT),
    Knob("per_device_train_batch_size", **POSITIVE_INT, hint_es="Cuenta completions, no prompts."),
    Knob("gradient_accumulation_steps", **POSITIVE_INT),
    Knob("learning_rate", float, low=0.0, low_open=True,
         hint_es="En RL, ~1e-6 si se entrenan todos los pesos y ~1e-5 con LoRA."),
    Knob("beta", float, low=0.0, hint_es="0 quita la KL y el modelo de referencia; el curso usa 0.04."),
    Knob("loss_type", str, choices=LOSS_TYPES),
    Knob("temperature", float, low=0.0, low_open=True,
         hint_es="Por debajo de 0.3 las respuestas de un grupo salen casi iguales y la ventaja es 0; lo habitual "
                 "en GRPO es una temperatura de 0.7 a 1.0."),
    Knob("scale_rewards", str, choices=("group", "batch", "none")),  # TRL 1.15/1.16 (True/False are its aliases)
    Knob("epsilon", float, low=0.0, low_open=True, high=1.0, high_open=True,
         hint_es="El recorte del cociente de probabilidades va de 1 - epsilon a 1 + epsilon; TRL usa 0.2."),
    Knob("max_steps", **POSITIVE_INT),
    Knob("logging_steps", **POSITIVE_INT),
    Knob("save_steps", **POSITIVE_INT),
    Knob("save_total_limit", **POSITIVE_INT, hint_es="Con 2, un checkpoint roto deja otro del que continuar."),
    Knob("keep_checkpoints", bool),
    Knob("seed", int, low=0),
    # --- rewards ---
    Knob("reward_timeout_s", float, low=0.0, low_open=True,
         hint_es="Segundos que puede tardar una llamada a una función de recompensa antes de parar el run."),
    # --- vLLM ---
    Knob("use_vllm", bool),
    Knob("vllm_mode", str, choices=("colocate", "server")),
    Knob("vllm_gpu_memory_utilization", float, low=0.0, low_open=True, high=1.0, high_open=True,
         hint_es="Es la fracción de la memoria (de la GPU, o de la RAM con vLLM en CPU) reservada para vLLM, entre "
                 "0 y 1; en modo colocate el entrenamiento necesita el resto: empieza por 0.3."),
    Knob("vllm_importance_sampling_correction", bool),
    Knob("vllm_server_host", str),
    Knob("vllm_server_port", int, low=1, high=65535, hint_es="TRL usa 8000."),
    # --- format pass ---
    Knob("format_pass", bool),
    Knob("format_pass_examples", **POSITIVE_INT),
    Knob("format_pass_epochs", **POSITIVE_INT),
    Knob("format_pass_learning_rate", float, low=0.0, low_open=True),
    # --- LoRA / Unsloth ---
    Knob("use_lora", bool),
    Knob("lora_r", **POSITIVE_INT),
    Knob("lora_alpha", **POSITIVE_INT),
    Knob("lora_targets", tuple),
    Knob("load_in_4bit", bool),
    Knob("max_seq_length", **POSITIVE_INT),
    Knob("unsloth_model", str),
    # --- evaluation and logging ---
    Knob("eval_max_new_tokens", **POSITIVE_INT),
    Knob("report_to", tuple, choices=("wandb", "tensorboard", "trackio")),
)

BY_NAME = {k.name: k for k in KNOBS}


def unchecked_fields() -> list[str]:
    """Profile fields without a row (tests/test_preflight_table.py keeps this empty)."""
    return [f.name for f in dataclasses.fields(Profile) if f.name not in BY_NAME]


def check_knobs(profile: Profile) -> list[str]:
    """One Spanish problem per knob whose value has the wrong type or lies outside its range."""
    problems = []
    for knob in KNOBS:
        text = knob.problem(getattr(profile, knob.name, None))
        if text:
            problems.append(text)
    return problems
