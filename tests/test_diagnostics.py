"""labs.core.diagnostics on synthetic metric histories."""

from __future__ import annotations

import math

import pytest
from rundirs import GOOD_HOLDOUT, NO_GAIN_HOLDOUT, SMALL_HOLDOUT, history, paired_verdicts

from labs.core import diagnostics as dg
from labs.core import stats


def summary(counts) -> dict:
    return stats.paired_comparison(*paired_verdicts(*counts))


def test_series_merges_repeated_steps_and_marks_bad_values():
    rows = [
        {"step": 1, "reward": 0.1},
        {"step": 2, "reward": None},
        {"step": 3, "reward": float("nan")},
        {"step": 2, "reward": 0.25},  # a resumed run logs step 2 again: the later value wins
        {"step": 4, "reward": "oops"},
        {"step": 5, "reward": float("inf")},
        {"step": 5, "train_runtime": 12.0},  # TRL's closing row shares the last step
        "not a dict",
    ]
    s = dg.series(rows, "reward")
    assert s.steps.tolist() == [1, 2, 3, 4, 5]
    assert s.values[1] == 0.25
    assert s.bad_steps == [3, 4, 5]
    assert s.n_finite == 2
    assert dg.series(rows, "kl") is None


def test_rows_without_step_follow_the_previous_one():
    s = dg.series([{"reward": 1.0}, {"reward": 2.0}, {"step": 10, "reward": 3.0}, {"reward": 4.0}], "reward")
    assert s.steps.tolist() == [1, 2, 10, 11]


def test_reward_names_and_component_series():
    rows = history(30, extra={"no_repeat_tags_reward": (0.0, 0.1)})
    assert dg.reward_function_names(rows) == ["correctness_reward", "format_reward", "soft_format_reward", "no_repeat_tags_reward"]
    assert dg.correctness_series(rows).key == dg.CORRECTNESS
    fmt = dg.format_series(rows)
    first = rows[0]
    assert fmt.values[0] == pytest.approx(first["rewards/format_reward/mean"] + first["rewards/soft_format_reward/mean"])
    assert dg.correctness_series(history(30, correctness=None)) is None


def test_correctness_found_under_another_name():
    rows = [{"step": i, "rewards/strict_correctness/mean": i / 10} for i in range(1, 20)]
    assert dg.correctness_series(rows).key == "rewards/strict_correctness/mean"


def test_rising_on_a_healthy_history():
    rows = history(200)
    f = dg.rising(dg.series(rows, dg.REWARD), key="reward_rising")
    assert f.holds is True and not f.warning
    assert "subió de forma sostenida" in f.message
    assert f"{f.evidence['tau']:.2f}" in f.message


def test_rising_says_why_it_cannot_tell():
    f = dg.rising(dg.series(history(3), dg.REWARD))
    assert f.holds is None and "solo hay 3 valores" in f.message
    assert dg.rising(None, label="la KL").holds is None


def test_flat_length_is_not_rising():
    f = dg.rising(dg.series(history(200, length=(250, 250)), dg.LENGTH))
    assert f.holds is False and f.warning and "no subió" in f.message


def test_kl_bounded_cases():
    ok = dg.kl_bounded(history(200))
    assert ok.holds is True and ok.evidence["max_smoothed"] < dg.KL_BOUND

    exploding = history(200)
    for i, row in enumerate(exploding[150:]):
        row["kl"] = 0.05 * 1.2**i
    bad = dg.kl_bounded(exploding)
    assert bad.holds is False and bad.warning
    assert bad.evidence["max_smoothed"] > dg.KL_BOUND and bad.evidence["max_smoothed_step"] > 150
    assert "se disparó" in bad.message

    with_nan = history(50)
    with_nan[20]["kl"] = None
    f = dg.kl_bounded(with_nan)
    assert f.holds is False and f.evidence["bad_steps"] == [21]

    absent = dg.kl_bounded(history(50, log_kl=False))
    assert absent.holds is None and "beta = 0" in absent.message


def test_one_spike_does_not_fail_the_kl_bound():
    rows = history(400)
    rows[200]["kl"] = 3.0  # one noisy step; the rolling mean over 20 steps stays low
    assert dg.kl_bounded(rows).holds is True


def test_format_hacking_detected_when_format_rises_and_correctness_is_flat():
    rows = history(200, correctness=(0.3, 0.3), fmt=(0.05, 0.5), soft=(0.05, 0.2))
    f = dg.detect_format_hacking(rows)
    assert f.holds is True and f.warning
    assert "hacking de formato" in f.message
    assert dg.detect_format_hacking(rows, summary(NO_GAIN_HOLDOUT)).holds is True
    ceiling = dg.detect_format_hacking(rows, summary(GOOD_HOLDOUT))  # flat logged correctness, real gain
    assert ceiling.holds is False and "holdout mejoró" in ceiling.message


def test_no_format_hacking_on_a_healthy_run_or_flat_format():
    assert dg.detect_format_hacking(history(200)).holds is False
    flat_format = history(200, correctness=(0.3, 0.3), fmt=(0.5, 0.5), soft=(0.2, 0.2))
    f = dg.detect_format_hacking(flat_format)
    assert f.holds is False and "no subió" in f.message


def test_format_hacking_without_correctness_needs_the_holdout():
    rows = history(200, correctness=None, fmt=(0.05, 0.5), soft=(0.05, 0.2))
    unknown = dg.detect_format_hacking(rows)
    assert unknown.holds is None and "holdout" in unknown.message
    assert dg.detect_format_hacking(rows, summary(NO_GAIN_HOLDOUT)).holds is True
    assert dg.detect_format_hacking(rows, summary((250, 150, 20, 80))).holds is True  # got worse
    assert dg.detect_format_hacking(rows, summary(GOOD_HOLDOUT)).holds is False
    assert dg.detect_format_hacking(rows, summary(SMALL_HOLDOUT)).holds is None


def test_no_format_reward_cannot_tell():
    rows = [{"step": i, "reward": i, "rewards/correctness_reward/mean": i} for i in range(1, 30)]
    assert dg.detect_format_hacking(rows).holds is None


def test_holdout_gain_rules():
    good = dg.holdout_gain(summary(GOOD_HOLDOUT))
    assert good.holds is True and "mejoró de forma medible" in good.message

    no_gain = dg.holdout_gain(summary(NO_GAIN_HOLDOUT))
    assert no_gain.holds is False
    assert no_gain.evidence["n"] >= no_gain.evidence["n_needed"]
    assert f"bastaban {no_gain.evidence['n_needed']}" in no_gain.message

    worse = dg.holdout_gain(summary((250, 150, 20, 80)))
    assert worse.holds is False and "empeoró" in worse.message

    small = dg.holdout_gain(summary(SMALL_HOLDOUT))
    assert small.holds is None
    assert small.evidence["n"] < small.evidence["n_needed"]
    assert "8 problemas" in small.message


def test_holdout_gain_uses_the_floor_on_the_discordant_share():
    # 400 problems with only 2 % changing: with the 10 % floor 312 problems are needed; 400 are enough
    f = dg.holdout_gain(summary((200, 192, 5, 3)))
    assert f.evidence["discordant_share"] == pytest.approx(0.02)
    assert f.evidence["n_needed"] == stats.mcnemar_sample_size(dg.MIN_DISCORDANT_SHARE, dg.MIN_GAIN)
    assert f.holds is False
    # 200 problems, 2 % changing: the observed share alone would ask for about 60 problems and call this
    # a "no"; with the floor 200 is below 312, so it cannot tell
    assert dg.holdout_gain(summary((100, 96, 3, 1))).holds is None


def test_holdout_gain_on_bad_summaries():
    assert dg.holdout_gain(None).holds is None
    assert "incompleto" in dg.holdout_gain({"n": 10}).message
    broken = summary(GOOD_HOLDOUT) | {"difference": math.nan}
    assert dg.holdout_gain(broken).holds is None


def test_zero_std_groups():
    rows = history(40)
    assert dg.zero_std_groups(rows).holds is False
    for row in rows:
        row[dg.ZERO_STD] = 1.0
    f = dg.zero_std_groups(rows)
    assert f.holds is True and f.warning and "100%" in f.message


def test_what_to_watch_lists_the_lesson_checks_in_spanish():
    findings = dg.what_to_watch(history(200))
    assert [f.key for f in findings] == [
        "reward_rising", "length_rising", "correctness_rising", "kl_bounded", "format_hacking", "zero_std_groups"
    ]
    assert [f.holds for f in findings] == [True, True, True, True, False, False]
    with_eval = dg.what_to_watch(history(200), summary(GOOD_HOLDOUT))
    assert with_eval[-1].key == "holdout_gain" and with_eval[-1].holds is True


def test_what_to_watch_on_an_empty_history_never_raises():
    findings = dg.what_to_watch([])
    assert all(f.holds is None for f in findings)
    assert all(f.message for f in findings)
