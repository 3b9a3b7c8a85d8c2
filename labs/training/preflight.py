"""Pre-flight checks: catch a bad configuration before any model is loaded.

Each check returns Spanish problems that say what is wrong and what to change; ``preflight`` raises
one ``PreflightError`` listing all of them, so a student fixes everything in one go instead of
waiting minutes for a model to load and then reading a stack trace.
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass, field

from labs.core import distributed
from labs.core.paths import GSM8K_DIR
from labs.core.profiles import BUNDLED_MODEL, Profile
from labs.training.knobs import check_knobs
from labs.training.reward_outputs import reward_output_problem

# Keywords TRL passes to every reward function besides the data-set columns.
TRL_REWARD_KWARGS = {"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric"}
# Lowest sampling temperature at which the completions of one prompt still differ often enough to
# give GRPO a within-group signal; below it most groups are identical and every advantage is 0.
MIN_TEMPERATURE = 0.3
REMOVED_KEYWORDS = {
    "max_prompt_length": (
        "`max_prompt_length` ya no existe en TRL (se quitó en 0.28) y GRPOConfig lanza TypeError. "
        "TRL ya no recorta prompts: usa el ajuste del perfil `max_prompt_tokens`, que descarta los "
        "prompts demasiado largos al preparar los datos."
    ),
}


class PreflightError(ValueError):
    """The configuration cannot work; the message lists every problem and its fix."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"La configuración no puede funcionar ({len(problems)} problema(s)):\n{lines}")


def check_batch(profile: Profile, processes: int | None = None) -> list[str]:
    """TRL's rule (``GRPOConfig.__post_init__``): ``generation_batch_size`` = per_device_train_batch_size x
    processes x steps_per_generation (= gradient_accumulation_steps by default) must be a multiple of G.
    ``processes`` defaults to the training processes of this launch (``accelerate launch --num_processes``)."""
    processes = distributed.world_size() if processes is None else processes
    problems = []
    if profile.num_generations < 2:
        problems.append(
            f"num_generations={profile.num_generations}: GRPO compara respuestas dentro de un grupo y "
            "necesita al menos 2 (con 1 la desviación típica no existe y la ventaja es siempre 0). Usa 4 a 16."
        )
        return problems
    g, b, acc = profile.num_generations, profile.per_device_train_batch_size, profile.gradient_accumulation_steps
    total = b * processes * acc
    if total % g == 0:
        return problems
    if processes == 1:
        problems.append(
            f"per_device_train_batch_size x gradient_accumulation_steps = {b} x {acc} = {total} completions por "
            f"paso, que no es múltiplo de num_generations={g}: cada grupo debe entrar entero. Pon "
            f"per_device_train_batch_size a un múltiplo de {g} (por ejemplo {g} o {2 * g})."
        )
    else:
        problems.append(
            f"Con {processes} procesos, per_device_train_batch_size x procesos x gradient_accumulation_steps = "
            f"{b} x {processes} x {acc} = {total} completions por paso, que no es múltiplo de num_generations={g}: "
            "cada grupo de G respuestas debe entrar entero en el lote de generación (TRL lo exige). Cambia "
            f"per_device_train_batch_size o gradient_accumulation_steps para que el producto sea múltiplo de {g} "
            f"(por ejemplo per_device_train_batch_size={g}), o lanza otro número de procesos."
        )
    return problems


def check_sampling(profile: Profile) -> list[str]:
    if profile.temperature < MIN_TEMPERATURE:
        return [
            f"temperature={profile.temperature}: con una temperatura tan baja las {profile.num_generations} "
            "respuestas de un grupo salen casi iguales, todas reciben la misma recompensa y la ventaja es 0 "
            f"(no se aprende nada). Usa al menos {MIN_TEMPERATURE}; lo habitual en GRPO es 0.7 a 1.0."
        ]
    return []


def check_vllm(profile: Profile) -> list[str]:
    if not profile.use_vllm:
        return []
    problems = []  # the fraction's range and the mode's values are in labs.training.knobs
    if profile.vllm_mode == "server" and profile.use_cpu:
        problems.append(
            "vllm_mode='server' necesita GPUs CUDA: TRL pasa los pesos entrenados al servidor vLLM por NCCL "
            "(su motor de transferencia de pesos) y se niega a hacerlo desde la CPU. Sin GPU usa "
            "vllm_mode=colocate (o use_vllm=false)."
        )
    return problems


def check_paths(profile: Profile) -> list[str]:
    problems = []
    name = profile.model
    looks_local = name.startswith((".", "/", "~"))
    if name != BUNDLED_MODEL and looks_local and not os.path.isdir(os.path.expanduser(name)):
        problems.append(f"El modelo '{name}' parece una ruta local pero esa carpeta no existe. Corrige la ruta.")
    for split in ("train", "test"):
        if not (GSM8K_DIR / f"{split}.jsonl").exists():
            problems.append(
                f"Falta {GSM8K_DIR / f'{split}.jsonl'}: la copia de GSM8K viene con el repositorio; "
                "restaura la carpeta data/gsm8k (git checkout -- data)."
            )
    return problems


def check_reward_functions(reward_funcs, columns) -> list[str]:
    """Every named parameter of a reward function must be a TRL keyword or a data-set column."""
    problems = []
    columns = set(columns)
    for func in reward_funcs:
        name = getattr(func, "__name__", repr(func))
        try:
            params = inspect.signature(func).parameters.values()
        except (TypeError, ValueError):
            continue
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            problems.append(
                f"La función de recompensa {name} no acepta **kwargs: TRL le pasa también prompts, "
                "completion_ids, trainer_state y todas las columnas del dataset. Añade **kwargs a su firma."
            )
        for p in params:
            if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) or p.name in TRL_REWARD_KWARGS:
                continue
            if p.name not in columns and p.default is p.empty:
                problems.append(
                    f"La función de recompensa {name} pide el parámetro '{p.name}', pero el dataset no "
                    f"tiene esa columna (columnas: {', '.join(sorted(columns))}). TRL pasa cada columna "
                    "con su nombre exacto: renombra el parámetro o añade la columna."
                )
    return problems


@dataclass
class ProbeTrainerState:
    """What TRL passes as ``trainer_state`` at the first step: ``transformers.TrainerState``'s fields with its
    initial values, built without importing transformers.

    The probe runs in every lab's pre-flight, and L7.2 must import unsloth before transformers, trl and peft
    (``labs.l72.standby``): a real ``TrainerState`` here made L7.2 refuse to start on the card.
    ``tests/test_reward_outputs.py`` checks these fields against the installed ``TrainerState``.
    """

    epoch: float = 0
    global_step: int = 0
    max_steps: int = 0
    logging_steps: int = 500
    eval_steps: int = 500
    save_steps: int = 500
    train_batch_size: int | None = None
    num_train_epochs: int = 0
    num_input_tokens_seen: int = 0
    total_flos: float = 0
    log_history: list = field(default_factory=list)
    best_metric: float | None = None
    best_global_step: int | None = None
    best_model_checkpoint: str | None = None
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True
    is_hyper_param_search: bool = False
    trial_name: str | None = None
    trial_params: dict | None = None
    stateful_callbacks: dict = field(default_factory=dict)


def trainer_state(profile: Profile | None = None) -> ProbeTrainerState:
    """The trainer's state as at the first step of ``profile``: what TRL passes as ``trainer_state``."""
    if profile is None:
        return ProbeTrainerState()
    return ProbeTrainerState(max_steps=profile.max_steps, logging_steps=profile.logging_steps,
                             save_steps=profile.save_steps)


def _sample_batch(columns, profile: Profile | None = None) -> dict:
    """What TRL 1.16's ``GRPOTrainer._calculate_rewards`` passes a reward function (grpo_trainer.py
    L1583-1594 and L1626-1628): prompts, completions and completion_ids, every data-set column but
    ``prompt`` as a list aligned with the completions, ``trainer_state`` (the trainer's
    ``TrainerState``, as :class:`ProbeTrainerState`), ``log_extra(column, values)`` and ``log_metric(name, value)``; here on four example
    completions of one problem (``rewards.examples``)."""
    from rewards.examples import EXAMPLES, GOLD, QUESTION

    picked = EXAMPLES[:4]
    n = len(picked)
    batch = {
        "prompts": [[{"role": "user", "content": QUESTION}]] * n,
        "completions": [[{"role": "assistant", "content": e.text}] for e in picked],
        "completion_ids": [[1, 2, 3]] * n,
        "trainer_state": trainer_state(profile),
        "log_extra": lambda column, values: None,
        "log_metric": lambda name, value: None,
    }
    samples = {"answer": GOLD, "id": "gsm8k-train-00000"}
    for column in columns:
        if column != "prompt":
            batch[column] = [samples.get(column, "")] * n
    return batch


def check_reward_calls(reward_funcs, columns, profile: Profile | None = None) -> list[str]:
    """Call each reward function once, as TRL will, on four example completions of one problem.

    A function that raises, or returns what TRL cannot turn into one reward per completion
    (``reward_output_problem``), fails here with its name, before minutes of model loading, instead of at
    the first training step with a traceback. ``async`` functions are awaited, as TRL does.
    """
    problems = []
    for func in reward_funcs:
        name = getattr(func, "__name__", repr(func))
        batch = _sample_batch(columns, profile)
        n = len(batch["completions"])
        try:
            values = func(**batch)
            if inspect.isawaitable(values):
                values = _run_coroutine(values)
        except Exception as exc:
            problems.append(
                f"La función de recompensa {name} lanzó {type(exc).__name__}: {exc} al probarla con {n} respuestas de "
                "ejemplo (como las llama TRL: completions es una lista de listas de mensajes "
                '[{"role": "assistant", "content": ...}], answer una lista de textos y trainer_state el estado del '
                "trainer, con global_step). Una recompensa no debe lanzar: devuelve 0.0 para la respuesta que no "
                "sepas puntuar."
            )
            continue
        text = reward_output_problem(name, values, n)
        if text:
            problems.append(text)
    return problems


def _run_coroutine(awaitable):
    """Await ``awaitable`` on a loop of its own in a thread (a notebook's kernel already runs a loop here)."""
    import asyncio
    import threading

    result = {}

    async def wait():
        return await awaitable

    def run():
        try:
            result["value"] = asyncio.run(wait())
        except BaseException as exc:  # re-raised in the caller's thread
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result["value"]


def check_config_keywords(keywords) -> list[str]:
    return [REMOVED_KEYWORDS[k] for k in keywords if k in REMOVED_KEYWORDS]


def refuse_removed_keywords(keywords) -> None:
    """Raise ``PreflightError`` if any of ``keywords`` is a GRPOConfig argument TRL removed."""
    problems = check_config_keywords(keywords)
    if problems:
        raise PreflightError(problems)


def preflight(profile: Profile, reward_funcs=(), columns=(), keywords=()) -> None:
    """Run every check; raise ``PreflightError`` listing all problems found.

    The knobs' types and ranges come first and alone: the checks below do arithmetic on them.
    """
    problems = check_config_keywords(keywords) + check_knobs(profile)
    if problems:
        raise PreflightError(problems)
    problems = (
        check_batch(profile)
        + check_sampling(profile)
        + check_vllm(profile)
        + check_paths(profile)
        + (check_reward_functions(reward_funcs, columns) if reward_funcs else [])
    )
    # Only functions whose signature is right are called: a wrong one would only fail again as a TypeError.
    callable_ok = [f for f in reward_funcs or () if not check_reward_functions([f], columns)]
    problems += check_reward_calls(callable_ok, columns, profile)
    if problems:
        raise PreflightError(problems)
