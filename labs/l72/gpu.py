"""L7.2's GPU path (``rtx5090``: CUDA visible, Unsloth installed): Unsloth + vLLM Standby.

``UNSLOTH_VLLM_STANDBY=1`` is set before ``import unsloth``, and unsloth is imported before trl,
transformers and peft (:func:`labs.l72.standby.enable_standby_and_import_unsloth`). ``FastLanguageModel``
loads ``unsloth/Qwen3-4B-Instruct-2507`` in 4 bits with vLLM inside (``fast_inference=True``), adds LoRA
adapters with the lesson's rank, alpha and targets and Unsloth's gradient checkpointing, and TRL's
GRPOTrainer (patched by Unsloth) trains them with the lesson's hyperparameters
(``labs.l72.trainer.grpo_config_kwargs``: L7.1's, with TRL's values pinned where Unsloth would swap its own). vLLM and the trainer share one copy of the weights, so after
training vLLM still holds the *base* weights: the trained model is evaluated by passing the saved
adapter to every generation (``lora_request=model.load_lora(path)``), and
:func:`labs.l72.lora.evaluate_unsloth` refuses to evaluate "trained" without one (it would silently
measure the base model).

Here: the two Unsloth calls as keyword dictionaries built from the profile and the run itself (the checks
before it are ``labs.l72.steps.start``'s) (:func:`_run_unsloth`; the notebook runs the same steps cell by cell).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from labs.training import data as course_data
from labs.training import evaluation, recipe
from labs import l71
from labs.core.profiles import Profile
from labs.core.resources import ResourceMonitor
from labs.core.runfolder import RunFolder
from labs.l72.backend import Backend
from labs.l72.lora import evaluate_unsloth, save_adapter
from labs.l72.memory import MemoryFraction, engine_memory_fraction, expected_gpu_fraction
from labs.l72.standby import UnslothLoadFailed, enable_standby_and_import_unsloth, standby_load_guard
from labs.l72 import trainer as l72_trainer
from labs.l72.steps import finish_resources, package_version, record_run

# --------------------------------------------------------------------------------------------------
# The two Unsloth calls, as keyword dictionaries built from the profile (vetted by tests/test_api_drift.py)
# --------------------------------------------------------------------------------------------------


def from_pretrained_kwargs(profile: Profile) -> dict:
    """Keywords for ``FastLanguageModel.from_pretrained``: the model, 4-bit or not, and vLLM inside."""
    return dict(
        model_name=profile.unsloth_model,
        max_seq_length=profile.max_seq_length,
        load_in_4bit=profile.load_in_4bit,
        fast_inference=True,  # vLLM generates the completions
        max_lora_rank=profile.lora_r,
        gpu_memory_utilization=profile.vllm_gpu_memory_utilization,  # ignored under Standby
    )


def get_peft_model_kwargs(profile: Profile) -> dict:
    """Keywords for ``FastLanguageModel.get_peft_model``: the LoRA adapters and Unsloth's checkpointing."""
    return dict(
        r=profile.lora_r,
        lora_alpha=profile.lora_alpha,
        target_modules=list(profile.lora_targets),
        use_gradient_checkpointing="unsloth",
        random_state=profile.seed,
    )


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------


def load_unsloth_model(profile: Profile, show=print):
    """Unsloth's load with vLLM inside under Standby, then its LoRA: ``(model, tokenizer, fraction)``.

    ``FastLanguageModel.from_pretrained`` inside the Standby guard (a failed load asks for a kernel
    restart), the check that vLLM really came up, the vLLM memory fraction in force (read back from the
    engine), then ``FastLanguageModel.get_peft_model``. The lab and the rehearsal load through here.
    """
    import torch
    from unsloth import FastLanguageModel

    total_gib = torch.cuda.mem_get_info()[1] / 2**30
    fraction = expected_gpu_fraction(profile, total_gib, package_version("vllm") or "0")
    show(fraction.describe_es())
    with standby_load_guard(profile):
        model, tokenizer = FastLanguageModel.from_pretrained(**from_pretrained_kwargs(profile))
    engine = getattr(model, "vllm_engine", None)
    if engine is None:
        raise UnslothLoadFailed(
            "Unsloth cargó el modelo sin vLLM (desactiva fast_inference sin error si falta vLLM o la GPU es "
            "antigua; mira sus mensajes arriba). Sin vLLM no hay Standby ni load_lora: arregla el entorno "
            "(`python -m labs doctor`). No hace falta reiniciar: vLLM no llegó a cargarse."
        )
    fraction = fraction.with_engine_value(engine_memory_fraction(engine))
    show(fraction.describe_es())
    model = FastLanguageModel.get_peft_model(model, **get_peft_model_kwargs(profile))
    return model, tokenizer, fraction


class UnslothStart(NamedTuple):
    model: Any  # Unsloth's PEFT model (vllm_engine, fast_generate, load_lora): no type to name without a card
    tokenizer: Any
    splits: dict
    trainer: Any  # TRL's GRPOTrainer as Unsloth patches it
    fraction: MemoryFraction  # the engine's measured share of the GPU
    base_label: str


def start_unsloth_run(profile: Profile, reward_funcs, run: RunFolder, backend: Backend, show) -> UnslothStart:
    """Model (Standby, LoRA), data with its tokenizer, run.json and trainer: how L7.2 and its rehearsal start."""
    model, tokenizer, fraction = load_unsloth_model(profile, show=show)
    splits = course_data.course_splits(profile, tokenizer)
    base_label = f"{Path(profile.unsloth_model).name} ({'4 bits' if profile.load_in_4bit else 'bf16'})"
    record_run(run, profile, reward_funcs, profile.unsloth_model, base_label, backend, fraction)
    # L7.2's trainer: TRL's values where Unsloth would swap its own, no "ref" adapter, trainer.args in run.json
    trainer = l72_trainer.make_trainer(profile, run, model, reward_funcs, course_data.to_dataset(splits["train"]),
                                       processing_class=tokenizer)
    return UnslothStart(model, tokenizer, splits, trainer, fraction, base_label)


def _run_unsloth(profile: Profile, reward_funcs, run: RunFolder, backend: Backend) -> Path:
    """GPU: Unsloth + vLLM Standby, after ``labs.l72.steps.start``. The notebook runs the same steps cell by cell."""
    enable_standby_and_import_unsloth()
    with ResourceMonitor(gpu="torch") as monitor:
        model, tokenizer, splits, trainer, _, base_label = start_unsloth_run(
            profile, reward_funcs, run, backend, show=lambda line: print(f"[vllm] {line}"))
        base = evaluate_unsloth(splits["eval"], model, tokenizer, run, "base", profile.eval_max_new_tokens)
        recipe.train(trainer, profile, run)
        adapter_dir = save_adapter(model, tokenizer, run)
        lora_request = model.load_lora(str(adapter_dir))
        trained = evaluate_unsloth(splits["eval"], model, tokenizer, run, "trained", profile.eval_max_new_tokens,
                                   lora_request=lora_request, adapter_dir=adapter_dir)
        evaluation.summarize(run, base, trained, base_label)
        finish_resources(run, monitor, backend)
    l71.finish(run, profile, trainer.state.global_step)
    return run.root
