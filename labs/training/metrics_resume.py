"""``metrics.jsonl`` at a resume: what was logged after the checkpoint goes, what the checkpoint saw comes back.

The run folder's callback appends one line per logged step (``labs.training.recipe.run_folder_callbacks``),
and the trainer saves a checkpoint right after logging that step. A resume from ``checkpoint-N`` trains
again from step N+1, so the lines after N are dropped: they will be logged again. A line of a step up to N
can also be gone (a power loss cuts the last line short; ``read_jsonl`` skips it): nothing would ever log
that step again, and the run would finish with a hole in its curves. The checkpoint holds the same values
(``trainer_state.json``'s ``log_history``: the trainer's logs of every step up to N), so those lines are
rebuilt from there, marked with where they came from; only the course's own timings (``course/...``), which
the trainer never sees, are missing from them. A step missing from both is named, not invented.
"""

from __future__ import annotations

import json
from pathlib import Path

from labs.core.runfolder import RunFolder, read_jsonl, write_jsonl

REBUILT_KEY = "course/rebuilt_from"  # a line put back from a checkpoint says so


def trim_after(run: RunFolder, step: int) -> int:
    """Drop logged steps newer than ``step`` (the checkpoint resumed from); return how many were dropped."""
    if not run.metrics_path.exists():
        return 0
    rows = read_jsonl(run.metrics_path)
    kept = [r for r in rows if int(r.get("step", 0)) <= step]
    write_jsonl(run.metrics_path, kept)
    return len(rows) - len(kept)


def _trainer_state(checkpoint: Path) -> dict:
    try:
        return json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}


def step_logs(state: dict) -> dict[int, dict]:
    """A checkpoint's trainer state's log of each step, by step (the end-of-training summary is no step)."""
    logs = {}
    for entry in state.get("log_history", []):
        if "step" in entry and "train_runtime" not in entry:
            logs[int(entry["step"])] = entry
    return logs


def refill_until(run: RunFolder, checkpoint: Path) -> tuple[list[int], list[int]]:
    """Put back the lines of steps up to ``checkpoint`` that ``metrics.jsonl`` lost, from its log_history.

    Returns ``(rebuilt, missing)``: the steps whose lines were rebuilt, and the logged steps (every
    ``logging_steps``-th up to the checkpoint) that neither the file nor the checkpoint holds.
    """
    checkpoint = Path(checkpoint)
    state = _trainer_state(checkpoint)
    last = int(state.get("global_step", 0))
    rows = read_jsonl(run.metrics_path) if run.metrics_path.exists() else []
    have = {int(r.get("step", 0)) for r in rows}
    rebuilt = []
    for step, entry in sorted(step_logs(state).items()):
        if step <= last and step not in have:
            rows.append({"step": step, **{k: v for k, v in entry.items() if k != "step"},
                         REBUILT_KEY: f"{checkpoint.name}/trainer_state.json"})
            rebuilt.append(step)
    if rebuilt:
        write_jsonl(run.metrics_path, sorted(rows, key=lambda r: int(r.get("step", 0))))
    every = state.get("logging_steps") or 1
    if every < 1:  # a fraction of max_steps: which steps were logged is not worth rebuilding here
        return rebuilt, []
    logged = {int(r.get("step", 0)) for r in rows}
    missing = [s for s in range(int(every), last + 1, int(every)) if s not in logged]
    return rebuilt, missing
