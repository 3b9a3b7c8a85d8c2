"""What the rehearsal measures inside a lab: step times, folder sizes, the base holdout, the adapter's effect."""

from __future__ import annotations

import time
from pathlib import Path

from labs.core.runfolder import RunFolder

EVAL_FILES = "eval"


def step_timer():
    """A TrainerCallback that records the wall time of every optimizer step in ``.seconds``."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self):
            self.seconds: list[float] = []
            self._start = None

        def on_step_begin(self, args, state, control, **kwargs):
            self._start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            if self._start is not None:
                self.seconds.append(round(time.perf_counter() - self._start, 3))
                self._start = None

    return StepTimer()


def folder_bytes(path: Path) -> int:
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


def run_disk(run: RunFolder, steps: int, eval_problems: int) -> dict:
    """Sizes by kind: one checkpoint, the final weights/adapter, per-step logs, per-problem eval files."""
    checkpoints = run.checkpoint_folders()
    checkpoint = max((folder_bytes(c) for c in checkpoints), default=0)
    model = folder_bytes(run.model_dir)
    evals = folder_bytes(run.path(EVAL_FILES))
    total = folder_bytes(run.root)
    logs = max(0, total - sum(folder_bytes(c) for c in checkpoints) - model - evals)
    return {"checkpoint_bytes": checkpoint, "model_bytes": model, "eval_bytes": evals, "log_bytes": logs,
            "log_bytes_per_step": logs / max(steps, 1), "eval_bytes_per_problem": evals / max(eval_problems, 1),
            "total_bytes": total}


def mean_completion_tokens(run: RunFolder) -> float | None:
    """TRL's logged mean completion length over the rehearsal's steps."""
    values = [r["completions/mean_length"] for r in run.metrics() if isinstance(r.get("completions/mean_length"),
                                                                               (int, float))]
    return sum(values) / len(values) if values else None


def summarize_holdout(records: list[dict], seconds: float, max_new_tokens: int, label: str) -> dict:
    """``base_holdout`` for rehearsal.json: n, accuracy, and the rate of every yes/no field the scorer wrote.

    The records come from ``labs.training.evaluation.score``: ``correct`` is the tag-gated answer
    (``rewards.extract_answer``); any other boolean field the evaluation adds (a last-number score, say)
    gets its ``<field>_rate`` here without this code knowing its name.
    """
    n = len(records)
    out = {"n": n, "accuracy": sum(bool(r["correct"]) for r in records) / n if n else None,
           "model": label, "max_new_tokens": max_new_tokens, "decoding": "greedy",
           "seconds": round(seconds, 2), "seconds_per_problem": round(seconds / n, 4) if n else None,
           "mean_length": sum(r.get("length", 0) for r in records) / n if n else None}
    flags = sorted({k for r in records for k, v in r.items() if isinstance(v, bool)} - {"correct"})
    for key in flags:
        out[f"{key}_rate"] = sum(bool(r.get(key)) for r in records) / n
    if "correct_last_number" in flags:
        out["accuracy_last_number"] = out["correct_last_number_rate"]
    return out


def adapter_effect(base_outputs, lora_outputs, logprob_tolerance: float = 1e-3) -> dict:
    """Does the LoRA request change what vLLM generates? Compares greedy outputs with and without it.

    ``*_outputs``: vLLM ``RequestOutput`` objects (``.outputs[0].text`` and ``.cumulative_logprob``).
    A trained adapter after two or three small steps may not flip a greedy token; its log-probabilities
    of the same text still move, so either counts.
    """
    differ, gaps = 0, []
    for base, lora in zip(base_outputs, lora_outputs, strict=True):
        b, l_ = base.outputs[0], lora.outputs[0]
        differ += b.text != l_.text
        if b.cumulative_logprob is not None and l_.cumulative_logprob is not None:
            gaps.append(abs(b.cumulative_logprob - l_.cumulative_logprob))
    gap = max(gaps, default=None)
    changes = differ > 0 or (gap is not None and gap > logprob_tolerance)
    return {"prompts": len(base_outputs), "texts_differ": differ,
            "max_cumulative_logprob_diff": gap, "changes_output": bool(changes)}
