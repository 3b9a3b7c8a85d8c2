"""A run's logged metrics as series: TRL's keys, merged per step, and the reward functions they name.

Input is what ``labs.core.runfolder.RunFolder.metrics()`` returns: one dict per logged step with TRL's keys
verbatim (``reward``, ``kl``, ``completions/mean_length``, ``rewards/<function>/mean``,
``frac_reward_zero_std``, ...) plus ``step``. Rows with the same step are merged (the last value of a
key wins), so a resumed run that logged some steps twice, or TRL's closing summary row, is read
correctly. Non-finite values become NaN, and every reader skips them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from labs.core import stats

REWARD = "reward"
KL = "kl"
LENGTH = "completions/mean_length"
ZERO_STD = "frac_reward_zero_std"
CORRECTNESS = "rewards/correctness_reward/mean"


@dataclass(frozen=True)
class Series:
    """One metric over the steps where it was logged; ``values`` is NaN where it was not finite."""

    key: str
    steps: np.ndarray
    values: np.ndarray

    @property
    def n_finite(self) -> int:
        return int(np.isfinite(self.values).sum())

    @property
    def bad_steps(self) -> list[int]:
        """Steps where the key was logged with a null, NaN, infinite or non-numeric value."""
        return [int(s) for s in self.steps[~np.isfinite(self.values)]]


# --------------------------------------------------------------------------------------------------
# reading metrics into series
# --------------------------------------------------------------------------------------------------


def merged_rows(metrics) -> list[tuple[int, dict]]:
    """(step, merged row) sorted by step; rows without a usable ``step`` follow the previous one."""
    by_step: dict[int, dict] = {}
    last = 0
    for row in metrics or []:
        if not isinstance(row, dict):
            continue
        step = row.get("step")
        if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step):
            step = last + 1
        step = int(step)
        last = step
        by_step.setdefault(step, {}).update(row)
    return sorted(by_step.items())


def series(metrics, key: str) -> Series | None:
    """The series of ``key``, or None when no row has that key."""
    steps, values = [], []
    for step, row in merged_rows(metrics):
        if key in row:
            steps.append(step)
            values.append(row[key])
    if not steps:
        return None
    return Series(key, np.asarray(steps, dtype=float), stats.to_array(values))


def reward_function_names(metrics) -> list[str]:
    """Reward functions TRL logged, from the ``rewards/<name>/mean`` keys, in first-seen order."""
    names: list[str] = []
    for _, row in merged_rows(metrics):
        for key in row:
            if isinstance(key, str) and key.startswith("rewards/") and key.endswith("/mean"):
                name = key[len("rewards/") : -len("/mean")]
                if name and name not in names:
                    names.append(name)
    return names


def is_format_name(name: str) -> bool:
    return "format" in name.lower()


def is_correctness_name(name: str) -> bool:
    lowered = name.lower()
    return "correct" in lowered or "accuracy" in lowered


def correctness_series(metrics) -> Series | None:
    """``rewards/correctness_reward/mean``, or else the first reward whose name says correctness."""
    found = series(metrics, CORRECTNESS)
    if found is not None:
        return found
    for name in reward_function_names(metrics):
        if is_correctness_name(name):
            return series(metrics, f"rewards/{name}/mean")
    return None


def format_series(metrics) -> Series | None:
    """Sum of every format-like reward's mean (``format_reward`` + ``soft_format_reward``, ...)."""
    parts = [series(metrics, f"rewards/{n}/mean") for n in reward_function_names(metrics) if is_format_name(n)]
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    steps = np.unique(np.concatenate([p.steps for p in parts]))
    total = np.zeros(len(steps))
    for p in parts:
        lookup = dict(zip(p.steps.tolist(), p.values.tolist()))
        total += np.array([lookup.get(s, math.nan) for s in steps.tolist()])
    return Series("format", steps, total)
