"""L7.2's GRPOTrainer: the recipe's GRPOConfig with the values Unsloth would swap pinned, TRL's extra
reference adapter removed, and what the trainer really used written to ``run.json``.

Three facts about the pinned GPU stack (Unsloth 2026.10.9 over TRL 1.15.0; see tests/test_gpu_wheels.py,
which reads them from the wheels):

* Unsloth's ``GRPOConfig`` wrapper replaces the defaults of keywords the caller leaves out with its own
  (``optim="adamw_8bit"``, ``weight_decay=0.001``, ``warmup_steps=0.1`` ...) and, for an explicit
  ``loss_type="dapo"``, turns ``mask_truncated_completions=None`` into ``True`` and ``epsilon_high=None``
  into ``0.28``. L7.1 trains with TRL's defaults, so :func:`grpo_config_kwargs` passes those values
  explicitly (:data:`COURSE_VALUES`; ``None`` would be overwritten, hence ``epsilon_high=0.2``, which is
  what TRL's ``None`` means: the same as ``epsilon``).
* Given a model that is already a PEFT model and ``beta != 0``, TRL 1.15 adds a second adapter ``"ref"``;
  Unsloth's rewrite meant to remove that block misses TRL 1.15's wording (:func:`drop_reference_adapter`).
* So that ``run.json`` never claims a value the trainer did not use, :func:`record_trainer_settings`
  writes ``trainer.args`` itself (``trainer_args``) beside what was asked (``grpo_config``).
"""

from __future__ import annotations

import enum
import math

from labs.core.profiles import Profile
from labs.core.runfolder import RUN_JSON, RunFolder, read_json, write_json
from labs.training import reasoning, recipe

# TRL's value of every GRPOConfig keyword that Unsloth's wrapper would otherwise swap and that the
# recipe (labs.training.recipe.grpo_config_kwargs) does not already pass. These are TRL 1.15/1.16 and
# transformers 5.17/5.19 defaults with torch >= 2.8, i.e. what L7.1 trains with.
COURSE_VALUES = {
    "optim": "adamw_torch_fused",  # Unsloth: adamw_8bit
    "weight_decay": 0.0,  # Unsloth: 0.001
    "warmup_steps": 0,  # Unsloth: 0.1 (10 % of the steps at a rising learning rate)
    "logging_nan_inf_filter": True,  # Unsloth: False
    "torch_empty_cache_steps": None,  # Unsloth: 250 (None stays None: no later rule replaces it)
    "mask_truncated_completions": False,  # Unsloth with loss_type="dapo": True
    "epsilon_high": 0.2,  # Unsloth with loss_type="dapo": 0.28; TRL's None means "= epsilon" (0.2)
}

# Unsloth swaps these too, but they change nothing in what L7.2 trains (tests/test_gpu_wheels.py checks
# that every swap is either pinned above or listed here).
SWAPS_WITHOUT_EFFECT = {
    "per_device_eval_batch_size": "the course runs no trainer evaluation (eval_strategy='no')",
    "eval_accumulation_steps": "the course runs no trainer evaluation (eval_strategy='no')",
    "include_num_input_tokens_seen": "Unsloth's False is transformers' 'no' (the default)",
    "generation_kwargs": "Unsloth's {} and TRL's None both add no generation keywords",
    "router_aux_loss_coef": "Qwen3-4B is dense (no router logits): TRL's None resolves to 0.0, Unsloth's value",
}

# trainer.args fields recorded beside the recipe's keywords: the ones above and those Unsloth sets itself.
EXTRA_RECORDED = ("epsilon", "lr_scheduler_type", "max_grad_norm", "adam_beta1", "adam_beta2", "scale_rewards",
                  "top_k", "top_p", "use_vllm", "vllm_mode", "vllm_enable_sleep_mode", "steps_per_generation",
                  "generation_batch_size", "gradient_checkpointing_kwargs", *SWAPS_WITHOUT_EFFECT)
NOT_COMPARED = ("output_dir", "logging_dir")  # differ between any two runs

REFERENCE_ADAPTER = "ref"


def grpo_config_kwargs(profile: Profile, output_dir: str) -> dict:
    """The recipe's GRPOConfig keywords (as L7.1) plus TRL's values where Unsloth would swap its own in."""
    kwargs = recipe.grpo_config_kwargs(profile, output_dir)
    # Unsloth forces use_vllm=True on its GPU path; its default for this one is False, TRL's True.
    kwargs.setdefault("vllm_importance_sampling_correction", profile.vllm_importance_sampling_correction)
    for key, value in COURSE_VALUES.items():
        kwargs.setdefault(key, value)
    # TRL's None means "= epsilon": the recipe's own epsilon, which the student may have chosen (COURSE_VALUES
    # holds TRL's default for the recipe's default)
    kwargs["epsilon_high"] = profile.epsilon
    return kwargs


def drop_reference_adapter(model, show=print) -> bool:
    """Delete the ``"ref"`` adapter TRL adds to a PEFT model; return whether there was one.

    Why: L7.2 hands GRPOTrainer Unsloth's model, already a PEFT model with its LoRA ``"default"``. With
    ``beta != 0`` TRL 1.15 (``grpo_trainer.py``, the ``elif is_peft_model(model) and args.beta != 0.0``
    block) then adds ``"ref"``, a copy of ``"default"``, to compute the KL reference. Unsloth means to
    comment that block out, but its pattern expects older TRL wording and matches nothing in TRL 1.15.
    On every rollout Unsloth sends the live adapter to vLLM, keeping every ``.lora_A.``/``.lora_B.`` key,
    and vLLM 0.31 rejects ``...lora_A.ref.weight`` ("is unsupported LoRA weight"): the first step crashes.
    Without ``"ref"``, TRL computes the reference with ``disable_adapter()``: the base model, which is what
    the copy of a freshly initialised adapter (``lora_B`` = 0) is anyway. Call it before training (the
    optimizer is built in ``train()``).
    """
    configs = getattr(model, "peft_config", None)
    if not isinstance(configs, dict) or REFERENCE_ADAPTER not in configs:
        return False
    model.delete_adapter(REFERENCE_ADAPTER)
    left = [name for name, _ in model.named_parameters() if f".{REFERENCE_ADAPTER}." in name]
    if left or REFERENCE_ADAPTER in model.peft_config:
        raise RuntimeError(f"PEFT did not delete the '{REFERENCE_ADAPTER}' adapter: {left[:3]}")
    show(f"[lora] Quito el adaptador '{REFERENCE_ADAPTER}' que TRL añade como referencia de la KL: vLLM no acepta "
         "sus pesos y el modelo de referencia es el mismo con los adaptadores desactivados (el modelo base).")
    return True


def _plain(value):
    """A JSON value for one trainer.args field (enums by value, paths and other objects as text)."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def trainer_settings(args, keys) -> dict:
    """``{key: value in trainer.args}`` for every key the args have (JSON values)."""
    missing = object()
    out = {}
    for key in keys:
        value = getattr(args, key, missing)
        if value is not missing:
            out[key] = _plain(value)
    return out


def record_trainer_settings(run: RunFolder, kwargs: dict, trainer, show=print) -> dict:
    """Write to run.json what the trainer really uses; say every value that differs from what was asked.

    ``grpo_config``: the keywords passed; ``trainer_args``: the same keys and :data:`EXTRA_RECORDED` as
    ``trainer.args`` holds them; ``grpo_config_changes``: ``{key: {"receta": asked, "usado": used}}``.
    """
    used = trainer_settings(trainer.args, [*kwargs, *COURSE_VALUES, *EXTRA_RECORDED])
    changes = {key: {"receta": _plain(value), "usado": used[key]} for key, value in kwargs.items()
               if key in used and used[key] != _plain(value)}
    record = read_json(run.path(RUN_JSON)) if run.path(RUN_JSON).exists() else {}
    record.update(grpo_config=_plain(kwargs), trainer_args=used, grpo_config_changes=changes)
    write_json(run.path(RUN_JSON), record)
    for key, change in changes.items():
        show(f"[run] {key}: el trainer usa {change['usado']!r} en lugar de {change['receta']!r} "
             "(queda apuntado en run.json).")
    return used


def prepare_trainer(trainer, run: RunFolder, kwargs: dict, show=print):
    """What L7.2 does to a freshly built GRPOTrainer: drop TRL's ``"ref"`` adapter, record its settings, and let
    Qwen3's ``<think>`` reach the rewards (``labs.training.reasoning``)."""
    drop_reference_adapter(trainer.model, show=show)
    record_trainer_settings(run, kwargs, trainer, show=show)
    reasoning.prepare_trainer_tokenizer(trainer, run, show=show)
    return trainer


def make_trainer(profile: Profile, run: RunFolder, model, reward_funcs, train_dataset, show=print, **extra):
    """L7.2's GRPOTrainer (after ``import unsloth`` on a GPU: TRL's classes are then Unsloth's)."""
    recipe.prepare_environment(profile, run)
    from trl import GRPOConfig, GRPOTrainer

    kwargs = grpo_config_kwargs(profile, str(run.checkpoints))
    trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs, args=GRPOConfig(**kwargs),
                          train_dataset=train_dataset, callbacks=recipe.run_folder_callbacks(run), **extra)
    return prepare_trainer(trainer, run, kwargs, show=show)
