"""Statistics of one logged curve: its noise around the trend, mean and spread, where it starts and
ends, and when its smoothed version first reaches a threshold shared by the compared runs."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from labs.core import stats
from labs.exercises.runs import RunData

THRESHOLD_FRACTION = 0.5


def _finite(values, steps=None) -> tuple[np.ndarray, np.ndarray]:
    y = stats.to_array(values)
    x = np.arange(1, len(y) + 1, dtype=float) if steps is None else stats.to_array(steps)
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def curve_spread(values, steps=None) -> float | None:
    """Standard deviation of a curve around its least-squares straight line (its step-to-step noise).

    Removing the line first means a curve that rises steadily is not called "unstable" for rising.
    None with fewer than 3 finite values (a line through 2 points leaves no residual to measure).
    """
    x, y = _finite(values, steps)
    if len(y) < 3:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    residuals = y - (slope * x + intercept)
    return float(np.sqrt(np.sum(residuals**2) / (len(y) - 2)))


def mean_std(values) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the finite values (None where undefined)."""
    _, y = _finite(values)
    if len(y) == 0:
        return None, None
    return float(np.mean(y)), (float(np.std(y, ddof=1)) if len(y) > 1 else None)


def steps_to_threshold(values, steps, threshold: float | None) -> int | None:
    """First step at which the smoothed curve (the EMA the plots draw) reaches ``threshold``."""
    if threshold is None:
        return None
    x, y = _finite(values, steps)
    if len(y) == 0:
        return None
    smoothed = stats.smooth(y)
    hits = np.nonzero(smoothed >= threshold)[0]
    return int(x[hits[0]]) if len(hits) else None


def shared_threshold(curves: Iterable, fraction: float = THRESHOLD_FRACTION) -> float | None:
    """A reward level every compared run can be timed against.

    ``fraction`` of the way from the lowest starting value to the highest final value among the
    smoothed curves: with 0.5, "half of the best improvement any run made". None when no run improved.
    """
    starts, ends = [], []
    for values in curves:
        _, y = _finite(values)
        if len(y) == 0:
            continue
        smoothed = stats.smooth(y)
        starts.append(smoothed[0])
        ends.append(smoothed[-1])
    if not starts:
        return None
    low, high = min(starts), max(ends)
    if not high > low:
        return None
    return float(low + fraction * (high - low))


def seconds_until(run: RunData, step: int | None) -> float | None:
    """Training seconds (sum of ``step_time``) up to and including ``step``."""
    if step is None:
        return None
    s = run.series("step_time")
    if s is None:
        return None
    keep = (s.steps <= step) & np.isfinite(s.values)
    return float(np.sum(s.values[keep])) if keep.any() else None


def edges(values, steps=None) -> tuple[float | None, float | None]:
    t = stats.trend(values, steps)
    return t["first_mean"], t["last_mean"]
