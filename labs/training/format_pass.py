"""The optional supervised "format pass" before GRPO (what Unsloth's GRPO notebooks do).

GRPO learns only from differences inside a group. A 135M model prompted to answer in
``<think>...</think><answer>N</answer>`` never does, so every completion of every group scores 0,
every advantage is 0 and nothing is learned. A short supervised pass on GSM8K worked solutions,
rewritten in that format, teaches the format (not the arithmetic); after it, groups differ and GRPO
has a signal. The examples come from GSM8K's train split and are disjoint from the GRPO prompts and
from the test-split holdout (labs.training.data.course_splits).

The same pass serves a base model on a GPU (the ``rtx5090-base`` profile, Unsloth's Qwen3-4B-Base
recipe). Three things make that work: on a GPU the model loads in bf16 when the profile trains in bf16 (TRL's
``SFTTrainer`` loads a model given by name in float32 otherwise); with ``use_lora`` the pass trains a
LoRA adapter (``labs.training.recipe.lora_config``) and saves it merged into the weights, so GRPO, vLLM
and the evaluation load an ordinary checkpoint (a full fine-tune of a 4B model with AdamW does not fit
in 32 GB); and the end of the assistant turn in the chat template (``<|im_end|>`` in Qwen's) becomes
the checkpoint's end-of-sequence token when the tokenizer names another one (a base model's tokenizer
says ``<|endoftext|>``), so generation stops where the pass taught the model to stop.

The primed checkpoint is cached by a key of everything that determines it, written beside its final
place and renamed when complete, so the main job pays for it once and a crash never leaves a folder
that a later run would trust.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
from pathlib import Path

from filelock import FileLock

from labs.core import distributed
from labs.core.paths import cache_dir, staged_folder
from labs.core.profiles import Profile

FORMAT_VERSION = 1  # bump when the target text below changes, so old caches are not reused
# Eight examples per optimizer step, fed two at a time: the activations of eight sequences at once took
# the pass to 11 GB of resident memory on CPU (benchmarks/bench_footprint.py --format-pass); the
# gradient is the same sum over the same eight examples.
BATCH_SIZE = 8
MICRO_BATCH_SIZE = 2
COMPLETE_MARKER = "format_pass.json"
_CALCULATOR_NOTE = re.compile(r"<<[^<>]*>>")


def target_text(solution: str, gold: str) -> str:
    """A worked solution rewritten in the course's output format."""
    reasoning = _CALCULATOR_NOTE.sub("", solution).strip()
    return f"<think>\n{reasoning}\n</think>\n<answer>{gold}</answer>"


def sft_rows(rows: list[dict]) -> list[dict]:
    """Prompt/completion pairs: the loss is computed on the completion (the assistant turn) only."""
    return [
        {
            "prompt": row["prompt"],
            "completion": [{"role": "assistant", "content": target_text(row["solution"], row["answer"])}],
        }
        for row in rows
    ]


def cache_key(base_model: str, profile: Profile, rows: list[dict]) -> str:
    identity = {
        "version": FORMAT_VERSION,
        "base_model": base_model,
        "ids": [r["id"] for r in rows],
        "epochs": profile.format_pass_epochs,
        "learning_rate": profile.format_pass_learning_rate,
        "seed": profile.seed,
        "max_length": profile.max_seq_length,
    }
    if profile.use_lora:  # only profiles with LoRA add these, so the CPU profiles' caches stay valid
        identity.update(lora=[profile.lora_r, profile.lora_alpha, list(profile.lora_targets)], bf16=profile.bf16)
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def primed_dir(key: str) -> Path:
    return cache_dir() / "primed" / key


def prime(base_model: str, profile: Profile, rows: list[dict]) -> Path:
    """Return a checkpoint of ``base_model`` after the format pass on ``rows`` (cached)."""
    key = cache_key(base_model, profile, rows)
    target = primed_dir(key)
    if (target / COMPLETE_MARKER).exists():
        print(f"[formato] Reutilizo el modelo con el pase de formato ya hecho: {target}")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):  # under accelerate, one process trains and the others reuse it
        if not (target / COMPLETE_MARKER).exists():
            if distributed.is_distributed():
                _train_alone(base_model, profile, rows, target)
            else:
                _train(base_model, profile, rows, target)
    return target


def turn_end_token(tokenizer) -> str | None:
    """The special token the chat template writes right after an assistant message (None if none)."""
    marker = "FORMATPASSMARKER"
    messages = [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": marker}]
    text = tokenizer.apply_chat_template(messages, tokenize=False)
    after = text.rsplit(marker, 1)[-1]
    special = set(tokenizer.all_special_tokens) | {
        t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if getattr(t, "special", False)
    }
    for token in tokenizer.convert_ids_to_tokens(tokenizer(after, add_special_tokens=False)["input_ids"]):
        if token in special:
            return token
    return None


def sft_config_kwargs(profile: Profile, output_dir: str, eos_token: str | None = None) -> dict:
    """Every keyword the format pass passes to ``trl.SFTConfig`` (the drift guard checks them)."""
    return dict(
        output_dir=output_dir,
        num_train_epochs=profile.format_pass_epochs,
        learning_rate=profile.format_pass_learning_rate,
        per_device_train_batch_size=MICRO_BATCH_SIZE,
        gradient_accumulation_steps=BATCH_SIZE // MICRO_BATCH_SIZE,
        max_length=profile.max_seq_length,
        use_cpu=profile.use_cpu,
        # On a CPU the pass trains in float32 whatever the profile's bf16 (ci's autocast): it runs once per
        # cache key, and the primed model is then the same on every CPU.
        bf16=profile.bf16_weights,
        gradient_checkpointing=profile.gradient_checkpointing,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=profile.seed,
        # A model given by name loads in float32 unless told otherwise: twice the memory of bf16.
        model_init_kwargs={"dtype": "bfloat16"} if profile.bf16_weights else None,
        eos_token=eos_token,
    )


def _train_alone(base_model: str, profile: Profile, rows: list[dict], target: Path) -> None:
    """The format pass in a child process that does not know about the launch's other processes.

    Under ``accelerate launch`` a trainer built here would join the launch's process group and wait for
    the other ranks, which are waiting on the file lock instead: a deadlock. The pass is a one-off,
    cached, single-device job, so it runs alone, exactly as without a launcher (same cache key).
    """
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with distributed.single_process_env():
        child = context.Process(target=_train, args=(base_model, profile, rows, target), name="format-pass")
        child.start()
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"El pase de formato falló en su proceso (código de salida {child.exitcode}).")


@contextlib.contextmanager
def own_mixed_precision():
    """Run the pass with a mixed precision of its own and give the process back the one it had.

    accelerate keeps one ``AcceleratorState`` per process, mixed precision included, and refuses an
    ``Accelerator`` that asks for another ("AcceleratorState has already been initialized and cannot be
    changed"). On a CPU the pass trains float32 whatever the profile says (see ``sft_config_kwargs``), while
    GRPO on the ``ci`` profile asks for bf16 autocast where the CPU has bf16 units: a ``GRPOTrainer`` built
    after the pass in the same process (a notebook kernel, ``python -m labs l71``, the rehearsal, a sweep)
    failed on such a CPU and only there. transformers resets that state when a ``TrainingArguments`` is
    built, but a notebook builds its ``GRPOConfig`` before the pass. The pass's precision is its own choice,
    so the pass scopes it: the state it found (usually none) is put back when it ends, failed or not.
    """
    from accelerate.state import AcceleratorState, GradientState

    found = {state: dict(state._shared_state) for state in (AcceleratorState, GradientState)}
    try:
        yield
    finally:
        for state, shared in found.items():
            state._shared_state.clear()  # in place: accelerate's instances share this very dict
            state._shared_state.update(shared)


def _train(base_model: str, profile: Profile, rows: list[dict], target: Path) -> None:
    with own_mixed_precision():
        _train_in_process(base_model, profile, rows, target)


def _train_in_process(base_model: str, profile: Profile, rows: list[dict], target: Path) -> None:
    import time

    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from labs.training import console
    from labs.training.recipe import lora_config

    tokenizer = AutoTokenizer.from_pretrained(base_model)
    turn_end = turn_end_token(tokenizer)
    eos_token = turn_end if turn_end and turn_end != tokenizer.eos_token else None

    with staged_folder(target) as staging:
        start = time.perf_counter()
        print(
            f"[formato] Pase supervisado de formato: {len(rows)} ejemplos x "
            f"{profile.format_pass_epochs} épocas (solo se hace una vez; queda en caché)."
        )
        config = SFTConfig(**sft_config_kwargs(profile, str(staging / "trainer"), eos_token))
        trainer = SFTTrainer(
            model=base_model,
            args=config,
            train_dataset=Dataset.from_list(sft_rows(rows)),
            processing_class=tokenizer,
            peft_config=lora_config(profile) if profile.use_lora else None,
        )
        steps = -(-len(rows) // BATCH_SIZE) * profile.format_pass_epochs  # optimizer steps
        console.use_step_lines(trainer, steps, line=console.format_pass_line)
        result = trainer.train()
        if profile.use_lora:  # GRPO, vLLM and the evaluation load an ordinary checkpoint
            trainer.model.merge_and_unload().save_pretrained(str(staging))  # pyright: ignore[reportCallIssue, reportOptionalMemberAccess] - a PEFT model (use_lora)
        else:
            trainer.save_model(str(staging))
        trainer.processing_class.save_pretrained(str(staging))  # pyright: ignore[reportOptionalMemberAccess] - TRL loads the tokenizer when none is passed
        shutil.rmtree(staging / "trainer", ignore_errors=True)
        (staging / COMPLETE_MARKER).write_text(
            json.dumps(
                {
                    "base_model": base_model,
                    "lora_merged": profile.use_lora,
                    "eos_token": trainer.processing_class.eos_token,  # pyright: ignore[reportAttributeAccessIssue, reportOptionalMemberAccess] - a tokenizer here, never a processor
                    "examples": len(rows),
                    "epochs": profile.format_pass_epochs,
                    "train_loss": result.training_loss,
                    "seconds": round(time.perf_counter() - start, 1),
                },
                indent=2,
            )
        )
    del trainer
    _release_memory()


def _release_memory() -> None:
    """Give the pass's memory back before GRPO loads its model and vLLM measures what is free.

    On a GPU, torch's cached blocks. On Linux, also the heap pages glibc keeps after the pass's activations and
    AdamW state are freed (``malloc_trim``): they stayed in the process's resident memory under GRPO's peak.
    """
    import ctypes
    import ctypes.util
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is not None and hasattr(libc, "malloc_trim"):  # glibc only (not musl, not macOS)
        libc.malloc_trim(0)
