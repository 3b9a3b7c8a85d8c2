"""What an exercise reads from a run folder: metrics, run.json, the holdout's records and the logged
training completions (TRL's per-step parquet files), plus the gold answers to score them with; and
``metrics_frame``, the runs' metrics as the one table the student's comparison (``comparar_e1`` ...) reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from labs.core import diagnostics as dg
from labs.core import metrics as mt
from labs.core.paths import runs_dir
from labs.core.runfolder import EVAL_BASE, EVAL_SUMMARY, EVAL_TRAINED, RUN_JSON, RunFolder, read_json, read_jsonl
from labs.exercises.variant import Variant
from rewards import REWARD_NAMES


@dataclass
class RunData:
    """What an exercise reads from one run folder."""

    label: str
    root: Path
    record: dict = field(default_factory=dict)
    metrics: list[dict] = field(default_factory=list)
    summary: dict | None = None

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def num_generations(self) -> int | None:
        return (self.record.get("profile") or {}).get("num_generations")

    @property
    def reward_names(self) -> list[str]:
        names = self.record.get("reward_functions") or []
        return [n.get("name") if isinstance(n, dict) else n for n in names]

    def eval_records(self, which: str = "trained") -> list[dict]:
        path = self.root / (EVAL_TRAINED if which == "trained" else EVAL_BASE)
        return read_jsonl(path) if path.exists() else []

    def series(self, key: str) -> dg.Series | None:
        return dg.series(self.metrics, key)


def load_run(variant: Variant | str | Path, runs_root=None, label: str | None = None) -> RunData:
    """Read a run folder (by variant, by name inside ``runs_root``, or by path)."""
    if isinstance(variant, Variant):
        root = Path(runs_root or runs_dir()) / variant.name
        label = label or variant.label
    else:
        root = Path(variant)
        if not root.is_absolute() and not root.exists():
            root = Path(runs_root or runs_dir()) / root
    folder = RunFolder(root)
    try:
        record = read_json(folder.path(RUN_JSON))
    except (FileNotFoundError, json.JSONDecodeError):
        record = {}
    try:
        summary = read_json(folder.path(EVAL_SUMMARY))
    except (FileNotFoundError, json.JSONDecodeError):
        summary = None
    return RunData(label or root.name, root, record, folder.metrics(), summary)


def load_runs(variants: Sequence[Variant], runs_root=None) -> list[RunData]:
    return [load_run(v, runs_root) for v in variants]


def completion_files(root: Path) -> list[Path]:
    """TRL's per-step completion logs of a run (``checkpoints/completions/completions_*.parquet``)."""
    files = []
    for where in (root / "checkpoints" / "completions", root / "completions"):
        if where.is_dir():
            files += sorted(where.glob("completions_*.parquet"))
    return files


def _as_messages(value):
    if value is None:
        return []
    if isinstance(value, str):
        return value
    return [dict(m) for m in list(value)]


def logged_completions(run: RunData) -> list[dict]:
    """Every logged training completion: step, prompt (messages), text, one reward per function, advantage."""
    import pandas as pd

    from rewards import completion_text

    rows = []
    for path in completion_files(run.root):
        frame = pd.read_parquet(path)
        for rec in frame.to_dict("records"):
            step = int(rec.get("step", 0))
            prompt = _as_messages(rec.get("prompt"))
            completion = _as_messages(rec.get("completion"))
            rewards = {k: float(rec[k]) for k in frame.columns if k in (run.reward_names or REWARD_NAMES) and rec.get(k) is not None}
            rows.append(
                {"step": step, "prompt": prompt, "text": completion_text(completion), "rewards": rewards,
                 "advantage": rec.get("advantage")}
            )
    rows.sort(key=lambda r: r["step"])
    return rows


def user_question(prompt) -> str:
    """The user turn of a conversational prompt (or the prompt itself when it is plain text)."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    return users[-1] if users else ""


def gold_by_question(source: str = "bundled", split: str = "train") -> dict[str, str]:
    from labs.training import data

    return {row["question"]: row["answer"] for row in data.load_split(split, source)}


def eval_pairs(run: RunData, which: str = "trained", limit: int | None = None) -> list[tuple]:
    """(prompt messages, completion) for the first ``limit`` holdout problems of a run."""
    from labs.training import data

    records = [r for r in run.eval_records(which) if isinstance(r.get("completion"), str)]
    if limit is not None:
        records = records[:limit]
    if not records:
        return []
    source = (run.record.get("profile") or {}).get("data_source", "bundled")
    test_rows = data.load_split("test", source)
    by_id = {row["id"]: row for row in test_rows}
    return [(by_id[r["id"]]["prompt"], r["completion"]) for r in records if r.get("id") in by_id]


def last_step_samples(run: RunData, limit: int | None = None) -> list[tuple]:
    """(prompt, completion) sampled by the policy at the last logged training step."""
    rows = logged_completions(run)
    if not rows:
        return []
    last = max(r["step"] for r in rows)
    picked = [(r["prompt"], r["text"]) for r in rows if r["step"] == last and r["text"]]
    return picked[:limit] if limit is not None else picked


def metrics_frame(runs: Sequence[RunData]):
    """All runs' metrics in one DataFrame: columns ``variante``, ``step`` and every logged key (one row per run and
    step, merged as ``labs.core.metrics.merged_rows`` merges TRL's rows)."""
    import pandas as pd

    rows = [{"variante": run.label, "step": step, **{k: v for k, v in row.items() if k != "step"}}
            for run in runs for step, row in mt.merged_rows(run.metrics)]
    frame = pd.DataFrame(rows)
    if "variante" not in frame:
        frame = pd.DataFrame(columns=["variante", "step"])
    cols = ["variante", "step"] + [c for c in frame.columns if c not in ("variante", "step")]
    return frame[cols]
