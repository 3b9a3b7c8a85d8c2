"""The optional supervised "format pass" before GRPO (what Unsloth's GRPO notebooks do).

GRPO learns only from differences inside a group. A 135M model prompted to answer in
``<think>...</think><answer>N</answer>`` never does, so every completion of every group scores 0,
every advantage is 0 and nothing is learned. A short supervised pass on GSM8K worked solutions,
rewritten in that format, teaches the format (not the arithmetic); after it, groups differ and GRPO
has a signal. The examples come from GSM8K's train split and are disjoint from the GRPO prompts and
from the test-split holdout (labs.training.data.course_splits).

The primed checkpoint is cached by a key of everything that determines it, written beside its final
place and renamed when complete, so the main job pays for it once and a crash never leaves a folder
that a later run would trust.
"""

from __future__ import annotations

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


def _train(base_model: str, profile: Profile, rows: list[dict], target: Path) -> None:
    import time

    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    with staged_folder(target) as staging:
        start = time.perf_counter()
        print(
            f"[formato] Pase supervisado de formato: {len(rows)} ejemplos x "
            f"{profile.format_pass_epochs} épocas (solo se hace una vez; queda en caché)."
        )
        config = SFTConfig(
            output_dir=str(staging / "trainer"),
            num_train_epochs=profile.format_pass_epochs,
            learning_rate=profile.format_pass_learning_rate,
            per_device_train_batch_size=8,
            gradient_accumulation_steps=1,
            max_length=profile.max_seq_length,
            use_cpu=profile.use_cpu,
            bf16=profile.bf16,
            gradient_checkpointing=profile.gradient_checkpointing,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            seed=profile.seed,
        )
        trainer = SFTTrainer(model=base_model, args=config, train_dataset=Dataset.from_list(sft_rows(rows)))
        result = trainer.train()
        trainer.save_model(str(staging))
        trainer.processing_class.save_pretrained(str(staging))
        shutil.rmtree(staging / "trainer", ignore_errors=True)
        (staging / COMPLETE_MARKER).write_text(
            json.dumps(
                {
                    "base_model": base_model,
                    "examples": len(rows),
                    "epochs": profile.format_pass_epochs,
                    "train_loss": result.training_loss,
                    "seconds": round(time.perf_counter() - start, 1),
                },
                indent=2,
            )
        )
