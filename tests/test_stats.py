"""labs.core.stats against values computed by hand or by an independent route."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy.stats import binomtest, kendalltau

from labs.core import stats
from rundirs import paired_verdicts


def exact_two_sided(gained: int, lost: int) -> float:
    """McNemar by hand: twice the smaller binomial tail at 1/2, capped at 1."""
    n, k = gained + lost, min(gained, lost)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


@pytest.mark.parametrize("gained,lost", [(10, 2), (2, 10), (5, 0), (30, 28), (60, 20), (1, 1), (7, 3)])
def test_mcnemar_matches_the_hand_computed_binomial_tail(gained, lost):
    assert stats.mcnemar_exact(gained, lost) == pytest.approx(exact_two_sided(gained, lost), rel=1e-9)
    assert stats.mcnemar_exact(gained, lost) == pytest.approx(binomtest(gained, gained + lost).pvalue)


def test_mcnemar_known_value_and_edge_cases():
    assert stats.mcnemar_exact(10, 2) == pytest.approx(158 / 4096)  # 2 * (1 + 12 + 66) / 2**12
    assert stats.mcnemar_exact(0, 0) == 1.0
    with pytest.raises(ValueError):
        stats.mcnemar_exact(-1, 3)


def test_paired_comparison_counts_and_keys():
    base, trained = paired_verdicts(both_right=280, both_wrong=140, gained=60, lost=20)
    result = stats.paired_comparison(base, trained)
    assert set(result) == set(stats.PAIRED_KEYS)
    assert result["n"] == 500
    assert result["base_accuracy"] == pytest.approx(300 / 500)
    assert result["trained_accuracy"] == pytest.approx(340 / 500)
    assert result["difference"] == pytest.approx(40 / 500)
    assert (result["base_wrong_trained_right"], result["base_right_trained_wrong"]) == (60, 20)
    assert (result["both_right"], result["both_wrong"]) == (280, 140)
    assert result["mcnemar_p"] == pytest.approx(exact_two_sided(60, 20))
    low, high = result["ci95"]
    assert low < result["difference"] < high
    assert low > 0  # 60 against 20 flips is a clear gain


def test_paired_comparison_is_seeded_and_skips_non_bools():
    base, trained = paired_verdicts(5, 5, 4, 1)
    assert stats.paired_comparison(base, trained) == stats.paired_comparison(base, trained)
    result = stats.paired_comparison(base + [None, True], trained + [True, "yes"])
    assert result["n"] == 15 and result["n_skipped"] == 2
    with pytest.raises(ValueError):
        stats.paired_comparison([True, False], [True])
    with pytest.raises(ValueError):
        stats.paired_comparison([None], [True])


def test_bootstrap_shortcut_matches_resampling_the_pairs():
    """The multinomial shortcut must give the interval that resampling problems gives."""
    base, trained = paired_verdicts(40, 30, 18, 12)
    low, high = stats.paired_bootstrap_ci(base, trained, resamples=20_000)
    b, t = np.array(base), np.array(trained)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(b), size=(20_000, len(b)))
    diffs = t[idx].mean(axis=1) - b[idx].mean(axis=1)
    naive_low, naive_high = np.quantile(diffs, [0.025, 0.975])
    assert low == pytest.approx(naive_low, abs=0.011)
    assert high == pytest.approx(naive_high, abs=0.011)


def test_bootstrap_interval_narrows_with_more_problems():
    small = stats.paired_bootstrap_ci(*paired_verdicts(28, 14, 6, 2))
    large = stats.paired_bootstrap_ci(*paired_verdicts(280, 140, 60, 20))
    assert (small[1] - small[0]) > 2 * (large[1] - large[0])


@pytest.mark.parametrize("share,expected", [(0.10, 312), (0.15, 469), (0.25, 783)])
def test_sample_size_reproduces_the_notes_power_figures(share, expected):
    # labs/grading/RUBRIC.md's table: +5 points at 80 % power needs about 312 / 469 / 783 problems
    assert stats.mcnemar_sample_size(share, 0.05) == expected


def test_detectable_difference_inverts_the_sample_size():
    for share in (0.1, 0.2, 0.3):
        n = stats.mcnemar_sample_size(share, 0.05)
        assert stats.mcnemar_detectable_difference(n, share) == pytest.approx(0.05, abs=0.0005)
    # the notes: on all 1,319 test problems about 2.4 to 3.9 points
    assert round(stats.mcnemar_detectable_difference(1319, 0.10) * 100, 1) == 2.4
    assert round(stats.mcnemar_detectable_difference(1319, 0.25) * 100, 1) == 3.9
    with pytest.raises(ValueError):
        stats.mcnemar_sample_size(0.001, 0.05)


@pytest.mark.parametrize("name", ["cpu", "ci"])
def test_rubric_states_what_each_cpu_profiles_holdout_can_detect(name):
    # RUBRIC.md: "con `cpu` (32 problemas) solo se detectarían mejoras de 15 a 24 puntos" (10 % and 25 %
    # of answers changing); a profile's eval_size that moves must take the sentence with it
    from pathlib import Path

    from labs.core.profiles import get_profile

    text = " ".join((Path(__file__).parents[1] / "labs" / "grading" / "RUBRIC.md").read_text().split())
    n = get_profile(name).eval_size
    low, high = (round(stats.mcnemar_detectable_difference(n, share) * 100) for share in (0.10, 0.25))
    # "`cpu` (32 problemas) solo se detectarían mejoras de 15 a 24", "`ci` (4 problemas) de 32 a 50"
    pattern = rf"`{name}` \({n} problemas\) (solo se detectarían mejoras )?de {low} a {high}\b"
    assert re.search(pattern, text), pattern


def test_ema_is_bias_corrected_and_skips_missing_values():
    out = stats.smooth([2.0, None, 2.0, float("nan"), 2.0, float("inf")], "ema", alpha=0.3)
    assert out[0] == pytest.approx(2.0)  # no pull towards 0 at the start
    assert np.isnan(out[1]) and np.isnan(out[3]) and np.isnan(out[5])
    assert out[4] == pytest.approx(2.0)
    ramp = stats.smooth([0.0, 10.0], "ema", alpha=0.5)
    assert ramp[1] == pytest.approx((0.5 * 10 + 0.25 * 0) / 0.75)


def test_rolling_mean_is_trailing():
    out = stats.smooth([1, 2, 3, None, 5, 6], "rolling", window=2)
    assert out.tolist()[:3] == [1.0, 1.5, 2.5]
    assert np.isnan(out[3])
    assert out[4] == pytest.approx(4.0) and out[5] == pytest.approx(5.5)
    with pytest.raises(ValueError):
        stats.smooth([1, 2], "median")


def test_block_means():
    x, y = stats.block_means([1, 2, 3, 4, 5, 6, 7], window=3)
    assert y.tolist() == [2.0, 5.0]  # the lone 7 is less than half a block: dropped
    assert x.tolist() == [2.0, 5.0]  # default steps are 1, 2, 3, ...
    _, y = stats.block_means([1, 2, 3, 4, 5, 6, 7, 8], window=3)
    assert y.tolist() == [2.0, 5.0, 7.5]  # 7 and 8 make at least half a block: kept


def test_trend_on_a_rising_series():
    rng = np.random.default_rng(3)
    values = np.linspace(0, 1, 300) + rng.normal(0, 0.2, 300)
    t = stats.trend(values)
    assert t["enough"] and t["tau"] > 0.5 and t["p_value"] < 1e-4
    assert t["slope_low"] <= t["slope"] <= t["slope_high"]
    assert t["slope"] == pytest.approx(1 / 299, rel=0.3)
    assert t["window"] == 15 and t["points"] == 20
    assert stats.is_rising(t) is True
    assert stats.is_rising(stats.trend(values[::-1])) is False


def test_trend_first_and_last_windows():
    t = stats.trend(list(range(1, 11)))  # edge = 2 values
    assert (t["first_mean"], t["last_mean"], t["edge"]) == (1.5, 9.5, 2)


def test_trend_skips_missing_values_and_needs_enough_points():
    values = [None, 1.0, float("nan"), 2.0, "x", 3.0]
    t = stats.trend(values)
    assert t["n"] == 3 and not t["enough"] and t["tau"] is None
    assert stats.is_rising(t) is None
    constant = stats.trend([0.5] * 40)
    assert (constant["tau"], constant["p_value"], constant["slope"]) == (0.0, 1.0, 0.0)
    assert stats.is_rising(constant) is False


def test_trend_false_alarm_rate_on_noise_is_near_its_level():
    """On trendless noise the block-mean test says "trend" about 5 % of the time (an EMA would not)."""
    alarms = ema_alarms = 0
    runs = 200
    for seed in range(runs):
        y = np.random.default_rng(seed).normal(size=500)
        alarms += stats.trend(y)["p_value"] < 0.05
        ema_alarms += kendalltau(np.arange(500), stats.smooth(y)).pvalue < 0.05
    assert alarms / runs <= 0.10
    assert ema_alarms / runs >= 0.4  # why the trend test does not run on the EMA
