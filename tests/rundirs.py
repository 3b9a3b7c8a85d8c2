"""Synthetic run folders for the tests, written with labs.core.runfolder's own writers and layout.

``history`` builds TRL-style metrics rows (linear ramps plus seeded noise); ``paired_verdicts`` builds the
per-problem correctness of two models with chosen flip counts; ``make_run`` writes a complete run folder.
The scenario helpers (``good_run``, ``oom_run``, ...) are the cases the C2b grader must tell apart.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from labs.core import runfolder as rf
from labs.core.profiles import get_profile
from rewards import REWARD_NAMES

COURSE_REWARDS = {name: 1.0 for name in REWARD_NAMES}  # weights as GRPOConfig's default reward_weights


def ramp(steps: int, start: float, end: float, noise: float, rng: np.random.Generator) -> np.ndarray:
    return np.linspace(start, end, steps) + rng.normal(0.0, noise, steps)


def history(
    steps: int = 200,
    *,
    correctness: tuple[float, float] | None = (0.4, 1.2),
    fmt: tuple[float, float] = (0.2, 0.45),
    soft: tuple[float, float] = (0.12, 0.19),
    extra: dict[str, tuple[float, float]] | None = None,
    length: tuple[float, float] = (180.0, 320.0),
    kl: tuple[float, float] = (0.0005, 0.02),
    noise: float = 0.08,
    seed: int = 0,
    log_kl: bool = True,
) -> list[dict]:
    """Metrics rows like TRL logs them; ``correctness=None`` drops that function (the E2 run)."""
    rng = np.random.default_rng(seed)
    parts = {}
    if correctness is not None:
        parts["correctness_reward"] = np.clip(ramp(steps, *correctness, noise, rng), 0, 2)
    parts["format_reward"] = np.clip(ramp(steps, *fmt, noise / 4, rng), 0, 0.5)
    parts["soft_format_reward"] = np.clip(ramp(steps, *soft, noise / 8, rng), 0, 0.2)
    for name, (a, b) in (extra or {}).items():
        parts[name] = ramp(steps, a, b, noise / 4, rng)
    lengths = ramp(steps, *length, 15.0, rng)
    kls = np.abs(ramp(steps, *kl, kl[1] / 10, rng))
    rows = []
    for i in range(steps):
        row = {"step": i + 1, "loss": float(rng.normal(0, 0.01)), "grad_norm": float(abs(rng.normal(0.5, 0.1)))}
        row["reward"] = float(sum(p[i] for p in parts.values()))
        row["reward_std"] = 0.5
        row["completions/mean_length"] = float(lengths[i])
        row["frac_reward_zero_std"] = 0.2
        for name, values in parts.items():
            row[f"rewards/{name}/mean"] = float(values[i])
            row[f"rewards/{name}/std"] = 0.3
        if log_kl:
            row["kl"] = float(kls[i])
        rows.append(row)
    return rows


def paired_verdicts(both_right: int, both_wrong: int, gained: int, lost: int) -> tuple[list[bool], list[bool]]:
    """Base and trained verdicts with the given counts (gained: base wrong -> trained right)."""
    base = [True] * both_right + [False] * both_wrong + [False] * gained + [True] * lost
    trained = [True] * both_right + [False] * both_wrong + [True] * gained + [False] * lost
    return base, trained


def eval_rows(correct: list, prefix: str = "gsm8k-test-") -> list[dict]:
    return [
        {"id": f"{prefix}{i:05d}", "gold": "18", "extracted": "18" if c else "17", "correct": c, "length": 120, "completion": "<think>…</think><answer>18</answer>"}
        for i, c in enumerate(correct)
    ]


def make_run(
    root: Path,
    name: str = "run",
    *,
    metrics: list[dict] | None = None,
    max_steps: int | None = None,
    state: str = rf.STATE_FINISHED,
    step: int | None = None,
    kind: str | None = None,
    message: str | None = None,
    verdicts: tuple[list, list] | None = None,
    eval_prefix: str = "gsm8k-test-",
    dataset: str = "gsm8k-test",
    rewards: dict[str, float] | None = None,
    profile: str = "rtx5090",
    beta: float = 0.04,
    lab: str = "L7.1",
) -> Path:
    """Write a run folder as labs.core.runfolder documents it; returns its path."""
    metrics = history() if metrics is None else metrics
    steps_logged = max((r.get("step", 0) for r in metrics), default=0)
    max_steps = max_steps if max_steps is not None else steps_logged
    folder = rf.RunFolder(Path(root) / name)
    rewards = COURSE_REWARDS if rewards is None else rewards
    rf.write_json(
        folder.path(rf.RUN_JSON),
        {
            "schema_version": rf.SCHEMA_VERSION,
            "run_name": name,
            "lab": lab,
            "created": rf.now_iso(),
            "profile": get_profile(profile, max_steps=max_steps, beta=beta).as_dict(),
            "reward_functions": [{"name": n, "weight": w} for n, w in rewards.items()],
            "grpo_config": {"beta": beta, "max_steps": max_steps, "num_generations": 8},
            "versions": {"trl": "1.16.0"},
            "hardware": {"device": "synthetic"},
        },
    )
    details = {k: v for k, v in (("kind", kind), ("message_es", message)) if v is not None}
    folder.write_status(state, step if step is not None else steps_logged, max_steps, **details)
    rf.write_jsonl(folder.metrics_path, metrics)
    if verdicts is not None:
        from labs.core.stats import paired_comparison

        base, trained = verdicts
        rf.write_jsonl(folder.path(rf.EVAL_BASE), eval_rows(base, eval_prefix))
        rf.write_jsonl(folder.path(rf.EVAL_TRAINED), eval_rows(trained, eval_prefix))
        rf.write_json(folder.path(rf.EVAL_SUMMARY), {"dataset": dataset, **paired_comparison(base, trained)})
    return folder.root


# ---------------------------------------------------------------- scenarios the grader must tell apart

GOOD_HOLDOUT = (280, 140, 60, 20)  # n = 500, +8 points, 80 discordant pairs
NO_GAIN_HOLDOUT = (300, 142, 30, 28)  # n = 500, +0.4 points
SMALL_HOLDOUT = (3, 3, 2, 0)  # n = 8


def good_run(root: Path, name: str = "good", **kw) -> Path:
    kw.setdefault("verdicts", paired_verdicts(*GOOD_HOLDOUT))
    return make_run(root, name, **kw)


def oom_run(root: Path, name: str = "oom") -> Path:
    return make_run(
        root, name, metrics=history(120), max_steps=500, state=rf.STATE_FAILED, step=120, kind="oom",
        message="CUDA out of memory. Baja vllm_gpu_memory_utilization o max_completion_length.",
    )


def kl_explosion_run(root: Path, name: str = "kl_explosion") -> Path:
    rows = history(200)
    for i, row in enumerate(rows[150:]):
        row["kl"] = 0.05 * 1.2 ** i  # grows without limit after step 150
    return make_run(root, name, metrics=rows, verdicts=paired_verdicts(*GOOD_HOLDOUT))


def format_hacking_run(root: Path, name: str = "format_hacking") -> Path:
    rows = history(200, correctness=(0.3, 0.3), fmt=(0.05, 0.5), soft=(0.05, 0.2), length=(200, 200))
    return make_run(root, name, metrics=rows, verdicts=paired_verdicts(*NO_GAIN_HOLDOUT))


def e2_run(root: Path, name: str = "e2_solo_formato", verdicts=None) -> Path:
    """The E2 exercise: correctness dropped, format saturating, holdout not better."""
    rows = history(200, correctness=None, fmt=(0.05, 0.5), soft=(0.05, 0.2))
    rewards = {"format_reward": 1.0, "soft_format_reward": 1.0}
    return make_run(root, name, metrics=rows, rewards=rewards, verdicts=verdicts or paired_verdicts(250, 150, 20, 80))


def corrupt(path: Path, text: str | bytes) -> None:
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def read_csv_rows(path: Path) -> list[dict]:
    import csv

    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def dump(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
