"""The run folder: the one place that defines what a run leaves on disk.

Every lab (L7.1, L7.2, the exercises) writes this layout, and the C2b grader reads only this layout,
so a run can be understood and graded later without the model in memory::

    runs/<run_name>/
      run.json             what ran: lab, profile (every knob), reward functions and weights,
                           the GRPOConfig values that matter, package versions, hardware, and
                           "recipe" (labs.l71.recipe_identity: {"id", "profile", "settings": the
                           lesson's knobs, "rewards": {name: source SHA-256 or null}}); written
                           once, when the run starts. A resume that accepted other settings
                           (--accept-changes, labs.training.runrecord) appends to "changes":
                           {"step", "at", "lines_es", "profile"/"grpo_config": {key: {"antes",
                           "ahora"}}, "rewards": {"antes", "ahora"}}; the rest stays as it was
      status.json          state "running" | "finished" | "failed", the step reached, max_steps,
                           and for a failure the kind ("oom", "nan", "disk", "interrupted",
                           "reward_timeout", "error"), the exception text and a Spanish message that
                           says what to change; "reward_function" names a reward that hung
      metrics.jsonl        one JSON object per logged training step, TRL's keys verbatim
                           (reward, kl, completions/mean_length, rewards/<name>/mean, ...) plus "step"
                           and the course's own: "course/rss_gib" (resident memory at the step's end),
                           on a GPU also what torch has allocated and reserved there (keys in
                           labs.core.resources.STEP_MEMORY_KEYS), "course/generation_seconds" and
                           "course/reward_seconds/<name>" (labs.training.phases)
      eval/base.jsonl      one line per holdout problem for the model before GRPO:
      eval/trained.jsonl   {"id", "gold", "extracted", "correct", "last_number",
                            "correct_last_number", "format_ok", "length", "completion"}
                           ("length" counts completion tokens; "id" is e.g. "gsm8k-test-00042");
                           "extracted"/"correct": the number in the one <answer> block (tag-gated,
                           what the reward pays and criterion 3 grades); "last_number"/
                           "correct_last_number": the last number anywhere in the completion, by the
                           same strict reader (format-independent: the arithmetic alone)
      eval/summary.json    the paired comparison of the two files on "correct": accuracies, flip
                           counts, difference with a 95% bootstrap interval, exact McNemar p-value;
                           "accuracy_field" names that field; "base_accuracy_last_number",
                           "trained_accuracy_last_number" and "last_number" (the same comparison on
                           "correct_last_number"); format rates and mean lengths of both models
      curves/*.png         the training curves, raw and smoothed
      resources.json       the memory the run used (labs.core.resources): peak resident memory of the
                           process, and on a GPU the device memory in use, sampled while it ran
      model/               the trained weights or LoRA adapter (safetensors)
      checkpoints/         trainer checkpoints (checkpoint-<step>/) used to resume; removed when
                           the run finishes unless the profile sets keep_checkpoints. A torn one is
                           moved into checkpoints/_rotos/ at resume and kept there; a save in
                           progress is written in checkpoints/.guardando/ (labs.training.checkpoints)
      completions/         TRL's per-step completion logs (parquet), when enabled

Everything a reader (the grader) opens is JSON, JSONL, CSV, PNG, parquet or safetensors: nothing it
must execute or unpickle. ``checkpoints/`` also holds the trainer's own state files (optimizer,
RNG), which only the trainer reads when it resumes. Writers replace files atomically (write beside, then rename), so a crash never leaves a
half-written JSON file that a later reader trusts.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

SCHEMA_VERSION = 1

RUN_JSON = "run.json"
STATUS_JSON = "status.json"
METRICS_JSONL = "metrics.jsonl"
EVAL_DIR = "eval"
EVAL_BASE = "eval/base.jsonl"
EVAL_TRAINED = "eval/trained.jsonl"
EVAL_SUMMARY = "eval/summary.json"
CURVES_DIR = "curves"
MODEL_DIR = "model"
CHECKPOINTS_DIR = "checkpoints"
COMPLETIONS_DIR = "completions"
RESOURCES_JSON = "resources.json"
# E1-E3's shared reference run is ``ref-<profile>``: labelled L7.1 (it trains the saved recipe), yet a
# comparison; the grader never takes it as the main run
REFERENCE_PREFIX = "ref-"
# What a run is for, recorded in its run.json when it is not a lab's own run: the rehearsal marks its L7.1 and L7.2
# runs, so the grader never takes one as the main run even when its folder is copied or renamed elsewhere in runs/
PURPOSE_KEY = "purpose"
PURPOSE_REHEARSAL = "rehearsal"

STATE_RUNNING = "running"
STATE_FINISHED = "finished"
STATE_FAILED = "failed"

EVAL_RECORD_KEYS = (
    "id", "gold", "extracted", "correct", "last_number", "correct_last_number", "format_ok", "length", "completion",
)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _json_safe(value):
    """NaN and infinities are not JSON: store them as null so every reader can parse the file."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


@contextlib.contextmanager
def _atomic_text(path: str | os.PathLike):
    """A text file handle whose content replaces ``path`` only when the block ends without error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, data) -> Path:
    """Write ``data`` as JSON atomically: a crash leaves the old file or the new one, never half."""
    with _atomic_text(path) as fh:
        json.dump(_json_safe(data), fh, ensure_ascii=False, indent=2, allow_nan=False)
        fh.write("\n")
    return Path(path)


def write_jsonl(path: str | os.PathLike, rows) -> Path:
    """Write an iterable of dicts as JSON lines, atomically."""
    with _atomic_text(path) as fh:
        for row in rows:
            fh.write(json.dumps(_json_safe(row), ensure_ascii=False, allow_nan=False) + "\n")
    return Path(path)


def append_jsonl(path: str | os.PathLike, row: dict) -> None:
    """Append one line and flush it, so a crash loses at most the line being written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(_json_safe(row), ensure_ascii=False, allow_nan=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_json(path: str | os.PathLike):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read JSON lines, skipping a truncated last line (what a crash mid-write leaves)."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break  # the line a crash cut short
            raise
    return rows


class RunFolder:
    """Paths and small helpers for one run folder."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, relative: str) -> Path:
        return self.root / relative

    @property
    def metrics_path(self) -> Path:
        return self.root / METRICS_JSONL

    @property
    def checkpoints(self) -> Path:
        return self.root / CHECKPOINTS_DIR

    @property
    def model_dir(self) -> Path:
        return self.root / MODEL_DIR

    @property
    def curves_dir(self) -> Path:
        return self.root / CURVES_DIR

    def exists(self) -> bool:
        return (self.root / RUN_JSON).exists()

    def status(self) -> dict | None:
        try:
            return read_json(self.root / STATUS_JSON)
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def is_finished(self) -> bool:
        status = self.status()
        return bool(status and status.get("state") == STATE_FINISHED)

    def write_status(self, state: str, step: int, max_steps: int, **details) -> None:
        record = {"state": state, "step": int(step), "max_steps": int(max_steps), "updated": now_iso()}
        record.update(details)
        write_json(self.root / STATUS_JSON, record)

    def metrics(self) -> list[dict]:
        if not self.metrics_path.exists():
            return []
        return read_jsonl(self.metrics_path)

    def checkpoint_folders(self) -> list[Path]:
        """The trainer's ``checkpoint-<step>/`` folders, complete or not (not the completion logs)."""
        if not self.checkpoints.is_dir():
            return []
        return [c for c in self.checkpoints.iterdir() if c.is_dir() and c.name.startswith("checkpoint-")]

    def remove_checkpoints(self) -> int:
        """Delete the ``checkpoint-<step>/`` folders (not the completion logs beside them); bytes freed."""
        freed = 0
        for child in self.checkpoint_folders():
            freed += sum(f.stat().st_size for f in child.rglob("*") if f.is_file())
            shutil.rmtree(child)
        return freed

    def last_checkpoint(self) -> Path | None:
        """The newest complete trainer checkpoint, or None."""
        candidates = []
        for child in self.checkpoint_folders():
            try:
                step = int(child.name.split("-", 1)[1])
            except ValueError:
                continue
            if (child / "trainer_state.json").exists():  # written last by Trainer
                candidates.append((step, child))
        return max(candidates)[1] if candidates else None


def mark_purpose(run: RunFolder, purpose: str) -> None:
    """Record in ``run``'s run.json (written when the run starts) what it is for (``PURPOSE_KEY``)."""
    record = read_json(run.path(RUN_JSON))
    record[PURPOSE_KEY] = purpose
    write_json(run.path(RUN_JSON), record)
