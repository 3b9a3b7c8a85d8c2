"""Statistics shared by the evaluation, the curves, "what to watch" and the C2b grader.

Two questions, two tools:

1. **Did the trained model answer more holdout problems than the base model?** The same problems are
   scored before and after, so the comparison is *paired*. ``paired_comparison`` returns the dict that
   the evaluation writes as ``eval/summary.json`` (keys in ``PAIRED_KEYS``, documented there):
   both accuracies, the two flip counts, the difference with a paired-bootstrap 95 % interval, and the
   exact McNemar p-value (a two-sided binomial test on the discordant pairs).
   ``mcnemar_sample_size`` / ``mcnemar_detectable_difference`` give the power figures that decide when a
   holdout is too small to tell.

2. **Did a logged series (reward, mean length, ...) rise in a sustained way?** ``trend`` runs Kendall's
   tau (with its p-value) and a Theil-Sen slope on *non-overlapping block means* of the series, and
   compares the mean of the first window with the mean of the last one.

   Why block means and not an EMA for the test: an exponential moving average makes every smoothed
   point depend on all earlier ones, so neighbouring points are strongly correlated, and Kendall's
   p-value (which assumes independent points) comes out far too small: pure noise would look like a
   trend most of the time. Averaging non-overlapping blocks (a rolling mean whose stride equals its
   window) smooths the noise just as well and keeps the points nearly independent. ``tests/test_stats.py``
   checks that on trendless noise the test says "trend" about as rarely as its 5 % level promises.
   The EMA (``smooth(..., method="ema")``) is for drawing curves, where that correlation does no harm.

Missing values (``None``), NaN and infinities are skipped everywhere, never propagated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats as _sps
from scipy.stats import norm as _norm

ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
TREND_BLOCKS = 20  # the trend test works on about this many block means
EDGE_FRACTION = 0.2  # first / last window: this share of the finite values (at least one value)
MIN_TREND_POINTS = 10  # fewer finite values than this: the trend is "cannot tell"
EMA_ALPHA = 0.1  # weight of the newest value in the curves' EMA (an effective span of about 19 steps)

# The keys of ``paired_comparison``'s dict, i.e. of eval/summary.json's statistics. Stable: the
# evaluation writes them, the grader and the notebooks read them.
PAIRED_KEYS = {
    "n": "number of problems compared (pairs with a bool verdict on both sides)",
    "n_skipped": "pairs left out because one side's verdict was not a bool",
    "base_accuracy": "share of the n problems the base model answered correctly",
    "trained_accuracy": "share of the n problems the trained model answered correctly",
    "difference": "trained_accuracy - base_accuracy",
    "ci95": "[low, high]: paired percentile bootstrap 95 % interval of the difference",
    "both_right": "problems both models answered correctly",
    "both_wrong": "problems both models answered wrongly",
    "base_wrong_trained_right": "flips gained by training (discordant pairs in favour)",
    "base_right_trained_wrong": "flips lost by training (discordant pairs against)",
    "mcnemar_p": "exact McNemar p-value: two-sided binomial test of the flips at 1/2",
    "bootstrap_resamples": "number of bootstrap resamples behind ci95",
    "bootstrap_seed": "seed of the bootstrap's random generator",
}


# --------------------------------------------------------------------------------------------------
# cleaning
# --------------------------------------------------------------------------------------------------


def as_float(value) -> float:
    """A number as float; anything else (None, text, bool, containers) as NaN."""
    if isinstance(value, bool) or value is None:
        return math.nan
    if isinstance(value, (int, float, np.integer, np.floating)):
        try:
            return float(value)
        except (OverflowError, ValueError):
            return math.nan
    return math.nan


def to_array(values) -> np.ndarray:
    """Float array with NaN for every missing or non-numeric entry (infinities become NaN too)."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "fiu":
        out = values.astype(float)  # a copy: the caller's array is never changed
    else:
        out = np.array([as_float(v) for v in values], dtype=float)
    out[~np.isfinite(out)] = np.nan
    return out


def _finite_pairs(values, steps=None) -> tuple[np.ndarray, np.ndarray]:
    y = to_array(values)
    x = np.arange(1, len(y) + 1, dtype=float) if steps is None else to_array(steps)
    if len(x) != len(y):
        raise ValueError(f"steps has {len(x)} entries but values has {len(y)}")
    keep = np.isfinite(y) & np.isfinite(x)
    return x[keep], y[keep]


# --------------------------------------------------------------------------------------------------
# paired comparison of two models on the same problems
# --------------------------------------------------------------------------------------------------


def mcnemar_exact(gained: int, lost: int) -> float:
    """Exact two-sided McNemar p-value from the two discordant counts (1.0 when there are none)."""
    gained, lost = int(gained), int(lost)
    if gained < 0 or lost < 0:
        raise ValueError("discordant counts cannot be negative")
    if gained + lost == 0:
        return 1.0
    return float(_sps.binomtest(gained, gained + lost, 0.5, alternative="two-sided").pvalue)


def paired_bootstrap_ci(
    base_correct: Sequence[bool],
    trained_correct: Sequence[bool],
    *,
    level: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``mean(trained) - mean(base)``, resampling problems (pairs).

    Each pair contributes -1, 0 or +1 to the difference, so resampling n pairs is the same as drawing
    the three counts from a multinomial with the observed shares: exact, and O(resamples) not O(n x
    resamples).
    """
    base = np.asarray(base_correct, dtype=bool)
    trained = np.asarray(trained_correct, dtype=bool)
    n = len(base)
    if n == 0 or len(trained) != n:
        raise ValueError("need two non-empty lists of the same length")
    d = trained.astype(int) - base.astype(int)
    shares = np.array([(d == -1).mean(), (d == 0).mean(), (d == 1).mean()])
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n, shares, size=int(resamples))
    diffs = (counts[:, 2] - counts[:, 0]) / n
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(diffs, [tail, 1.0 - tail])
    return float(low), float(high)


def _clean_pairs(base_correct, trained_correct) -> tuple[list[bool], list[bool], int]:
    if len(base_correct) != len(trained_correct):
        raise ValueError(
            f"base has {len(base_correct)} verdicts and trained has {len(trained_correct)}: "
            "a paired comparison needs the same problems on both sides"
        )
    base, trained, skipped = [], [], 0
    for b, t in zip(base_correct, trained_correct):
        if isinstance(b, (bool, np.bool_)) and isinstance(t, (bool, np.bool_)):
            base.append(bool(b))
            trained.append(bool(t))
        else:
            skipped += 1
    return base, trained, skipped


def paired_comparison(
    base_correct: list[bool],
    trained_correct: list[bool],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict:
    """Compare two models on the same problems; the dict has exactly the keys of ``PAIRED_KEYS``.

    ``base_correct[i]`` and ``trained_correct[i]`` must be the verdicts for the same problem. A pair
    where either verdict is not a bool (None, a number, text) is left out and counted in ``n_skipped``.
    Raises ``ValueError`` when the lists differ in length or no pair is left.
    """
    base, trained, skipped = _clean_pairs(base_correct, trained_correct)
    n = len(base)
    if n == 0:
        raise ValueError("no problem has a bool verdict on both sides")
    b = np.asarray(base)
    t = np.asarray(trained)
    gained = int(np.sum(~b & t))
    lost = int(np.sum(b & ~t))
    low, high = paired_bootstrap_ci(b, t, resamples=resamples, seed=seed)
    base_acc = float(b.mean())
    trained_acc = float(t.mean())
    return {
        "n": n,
        "n_skipped": skipped,
        "base_accuracy": base_acc,
        "trained_accuracy": trained_acc,
        "difference": trained_acc - base_acc,
        "ci95": [low, high],
        "both_right": int(np.sum(b & t)),
        "both_wrong": int(np.sum(~b & ~t)),
        "base_wrong_trained_right": gained,
        "base_right_trained_wrong": lost,
        "mcnemar_p": mcnemar_exact(gained, lost),
        "bootstrap_resamples": int(resamples),
        "bootstrap_seed": int(seed),
    }


# --------------------------------------------------------------------------------------------------
# power of the paired test (Connor 1987's normal approximation; labs/grading/RUBRIC.md tabulates it)
# --------------------------------------------------------------------------------------------------


def _z(alpha: float, power: float) -> tuple[float, float]:
    return float(_norm.ppf(1 - alpha / 2)), float(_norm.ppf(power))


def mcnemar_sample_size(
    discordant_share: float, delta: float = 0.05, *, alpha: float = ALPHA, power: float = 0.8
) -> int:
    """Problems needed for a paired (McNemar) test to detect a gain of ``delta`` with ``power``.

    ``discordant_share`` is the share of problems whose verdict changes between the two models. Normal
    approximation (Connor 1987): n = (z_a sqrt(p) + z_b sqrt(p - delta^2))^2 / delta^2.
    """
    p, d = float(discordant_share), float(delta)
    if not (0 < d and d * d < p <= 1):
        raise ValueError("need 0 < delta and delta^2 < discordant_share <= 1")
    za, zb = _z(alpha, power)
    return math.ceil((za * math.sqrt(p) + zb * math.sqrt(p - d * d)) ** 2 / (d * d))


def mcnemar_detectable_difference(
    n: int, discordant_share: float, *, alpha: float = ALPHA, power: float = 0.8
) -> float:
    """Smallest gain the paired test detects with ``power`` on ``n`` problems (inverse of the above)."""
    p = float(discordant_share)
    if n <= 0 or not 0 < p <= 1:
        raise ValueError("need n > 0 and 0 < discordant_share <= 1")
    za, zb = _z(alpha, power)

    def excess(d: float) -> float:
        return (za * math.sqrt(p) + zb * math.sqrt(max(p - d * d, 0.0))) ** 2 - n * d * d

    hi = math.sqrt(p)
    if excess(hi) > 0:  # even the largest possible gain is not detectable on n problems
        return hi
    from scipy.optimize import brentq

    return float(brentq(excess, 1e-12, hi))


# --------------------------------------------------------------------------------------------------
# smoothing and trends of a logged series
# --------------------------------------------------------------------------------------------------


def smooth(values, method: str = "ema", *, alpha: float = EMA_ALPHA, window: int = 10) -> np.ndarray:
    """Smoothed copy of ``values`` (same length; NaN where the input is missing).

    - ``"ema"``: exponential moving average with weight ``alpha`` on the newest value, bias-corrected
      at the start (as TensorBoard and wandb draw it), so the first points are not pulled towards 0.
    - ``"rolling"``: trailing mean of the last ``window`` finite values (never looks ahead).

    Missing values do not update the average; they stay NaN in the output so steps stay aligned.
    """
    y = to_array(values)
    out = np.full_like(y, np.nan)
    if method == "ema":
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        acc, weight = 0.0, 0.0
        for i, v in enumerate(y):
            if np.isnan(v):
                continue
            acc = (1 - alpha) * acc + alpha * v
            weight = (1 - alpha) * weight + alpha
            out[i] = acc / weight
    elif method == "rolling":
        if window < 1:
            raise ValueError("window must be at least 1")
        recent: list[float] = []
        for i, v in enumerate(y):
            if np.isnan(v):
                continue
            recent.append(v)
            if len(recent) > window:
                recent.pop(0)
            out[i] = sum(recent) / len(recent)
    else:
        raise ValueError(f"unknown smoothing method {method!r}: use 'ema' or 'rolling'")
    return out


def block_size(n_finite: int, blocks: int = TREND_BLOCKS) -> int:
    """Steps per block so that ``n_finite`` values give about ``blocks`` block means."""
    return max(1, n_finite // max(1, blocks))


def block_means(values, steps=None, *, window: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Means of consecutive, non-overlapping blocks of ``window`` finite values, and their mean steps.

    A trailing partial block is kept only if it holds at least half a window.
    """
    x, y = _finite_pairs(values, steps)
    if len(y) == 0:
        return np.array([]), np.array([])
    w = window or block_size(len(y))
    xs, ys = [], []
    for start in range(0, len(y), w):
        chunk = slice(start, start + w)
        if len(y[chunk]) * 2 < w:
            break
        xs.append(float(np.mean(x[chunk])))
        ys.append(float(np.mean(y[chunk])))
    return np.array(xs), np.array(ys)


def trend(
    values,
    steps=None,
    *,
    blocks: int = TREND_BLOCKS,
    edge_fraction: float = EDGE_FRACTION,
    min_points: int = MIN_TREND_POINTS,
) -> dict:
    """Trend statistics of a logged series.

    Returns a dict with:

    - ``n``: finite values used; ``enough``: whether ``n >= min_points``;
    - ``window``: values per block; ``points``: block means the tests ran on;
    - ``tau``, ``p_value``: Kendall's tau-b of block mean against step, two-sided p-value;
    - ``slope``, ``slope_low``, ``slope_high``, ``intercept``: Theil-Sen line (slope per step, with its
      95 % interval) through the block means;
    - ``first_mean``, ``last_mean``, ``edge``: means of the first and last ``edge`` finite values.

    With too few values every statistic is None. A constant series gives tau 0, p 1, slope 0.
    """
    x, y = _finite_pairs(values, steps)
    n = len(y)
    result = {
        "n": n,
        "enough": n >= min_points,
        "window": None,
        "points": 0,
        "tau": None,
        "p_value": None,
        "slope": None,
        "slope_low": None,
        "slope_high": None,
        "intercept": None,
        "first_mean": None,
        "last_mean": None,
        "edge": None,
    }
    if n == 0:
        return result
    edge = max(1, int(round(edge_fraction * n)))
    result.update(edge=edge, first_mean=float(np.mean(y[:edge])), last_mean=float(np.mean(y[-edge:])))
    if n < min_points:
        return result
    window = block_size(n, blocks)
    bx, by = block_means(y, x, window=window)
    result.update(window=window, points=len(by))
    if np.ptp(by) == 0:
        result.update(tau=0.0, p_value=1.0, slope=0.0, slope_low=0.0, slope_high=0.0, intercept=float(by[0]))
        return result
    # scipy builds both result types at run time (_make_tuple_bunch): their fields are unknown to a type checker
    tau: Any = _sps.kendalltau(bx, by)
    sen: Any = _sps.theilslopes(by, bx, alpha=0.95)
    p_value = float(tau.pvalue) if np.isfinite(tau.pvalue) else 1.0
    result.update(
        tau=float(tau.statistic) if np.isfinite(tau.statistic) else 0.0,
        p_value=p_value,
        slope=float(sen.slope),
        slope_low=float(sen.low_slope),
        slope_high=float(sen.high_slope),
        intercept=float(sen.intercept),
    )
    return result


def is_rising(t: dict, alpha: float = ALPHA) -> bool | None:
    """The course's rule for "rises in a sustained way", applied to a ``trend`` dict.

    None when there are too few values; otherwise True only if all four hold: tau > 0, its p-value
    < ``alpha``, Theil-Sen slope > 0, and the last window's mean above the first window's mean.
    """
    if not t.get("enough") or t.get("tau") is None:
        return None
    return bool(
        t["tau"] > 0 and t["p_value"] < alpha and t["slope"] > 0 and t["last_mean"] > t["first_mean"]
    )
