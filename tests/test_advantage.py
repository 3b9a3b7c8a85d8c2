"""labs.l6.advantage: the group-relative advantage, against independent computations and TRL's own nanstd."""

import math
import statistics

import numpy as np
import pytest
import torch

from labs.l6.advantage import (
    TRL_EPS,
    AdvantageError,
    advantage_steps,
    format_steps,
    group_advantages,
)

LESSON_GROUP = [3.0, 1.0, 0.0, 3.0]


def by_hand(rewards, stdev, eps=TRL_EPS):
    """The formula with the standard library only: (r - mean) / (stdev + eps)."""
    mean = statistics.fmean(rewards)
    spread = stdev(rewards)
    return [(r - mean) / (spread + eps) for r in rewards]


def test_lesson_table_uses_population_std():
    got = group_advantages(LESSON_GROUP, 4, std="population")
    np.testing.assert_allclose(got, by_hand(LESSON_GROUP, statistics.pstdev), rtol=0, atol=1e-12)
    assert np.round(got, 2).tolist() == [0.96, -0.58, -1.35, 0.96]  # the lesson's printed table


def test_trainer_rule_is_sample_std_plus_eps():
    got = group_advantages(LESSON_GROUP, 4)  # defaults: std="sample", eps=1e-4
    np.testing.assert_allclose(got, by_hand(LESSON_GROUP, statistics.stdev), rtol=0, atol=1e-12)
    assert np.round(got, 2).tolist() == [0.83, -0.5, -1.17, 0.83]


def test_matches_trl_nanstd_formula_on_random_batches_with_nans():
    """TRL's own nanstd (Bessel) and the trainer's lines, run on the same rewards, NaNs included."""
    from trl.trainer.utils import nanstd

    rng = np.random.default_rng(0)
    for trial in range(20):
        G = int(rng.integers(2, 9))
        n_groups = int(rng.integers(1, 6))
        rewards = rng.choice([0.0, 0.5, 1.0, 2.0, 3.0], size=G * n_groups)
        rewards[rng.random(rewards.size) < 0.15] = np.nan
        r = torch.tensor(rewards, dtype=torch.float64)
        mean = torch.nanmean(r.view(-1, G), dim=1).repeat_interleave(G)
        for scale in ("group", "batch", "none"):
            if scale == "batch":
                std = nanstd(r).expand_as(r)
            else:
                std = nanstd(r.view(-1, G), dim=1).repeat_interleave(G)
            expected = r - mean
            if scale != "none":
                expected = expected / (std + 1e-4)
            expected = torch.nan_to_num(expected, nan=0.0).numpy()
            got = group_advantages(rewards, G, scale_rewards=scale)
            # TRL's nanstd computes its Bessel factor count / (count - 1) in float32 even for float64
            # input, hence a few 1e-8 of difference; the trainer itself works in float32 anyway.
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-7, err_msg=f"trial {trial} {scale}")


def test_all_equal_group_has_zero_advantage():
    for value in (0.0, 1.0, 3.0):
        assert group_advantages([value] * 4, 4).tolist() == [0.0] * 4
        assert group_advantages([value] * 4, 4, std="population").tolist() == [0.0] * 4


def test_one_correct_out_of_four():
    got = group_advantages([3.0, 0.0, 0.0, 0.0], 4)
    np.testing.assert_allclose(got, by_hand([3.0, 0.0, 0.0, 0.0], statistics.stdev), atol=1e-12)
    assert got[0] > 0 and all(a < 0 for a in got[1:])
    assert got[0] == pytest.approx(-3 * got[1])  # the rare success gets three times the others' blame


def test_scale_invariance_up_to_eps_and_exact_without_eps():
    base = group_advantages(LESSON_GROUP, 4)
    scaled = group_advantages([10 * r for r in LESSON_GROUP], 4)
    assert np.max(np.abs(base - scaled)) < 1e-4
    assert np.max(np.abs(base - scaled)) > 0  # the eps is what breaks exactness
    np.testing.assert_allclose(
        group_advantages(LESSON_GROUP, 4, eps=0.0), group_advantages([10 * r for r in LESSON_GROUP], 4, eps=0.0),
        atol=1e-12,
    )


def test_shift_invariance():
    np.testing.assert_allclose(
        group_advantages(LESSON_GROUP, 4), group_advantages([r + 100 for r in LESSON_GROUP], 4), atol=1e-9
    )


def test_each_group_is_normalised_on_its_own():
    both = group_advantages(LESSON_GROUP + [1.0, 1.0, 1.0, 0.0], 4)
    np.testing.assert_allclose(both[:4], group_advantages(LESSON_GROUP, 4), atol=1e-12)
    np.testing.assert_allclose(both[4:], group_advantages([1.0, 1.0, 1.0, 0.0], 4), atol=1e-12)
    assert abs(both[:4].sum()) < 1e-12 and abs(both[4:].sum()) < 1e-12


def test_batch_scaling_uses_group_mean_and_batch_std():
    rewards = LESSON_GROUP + [1.0, 1.0, 1.0, 0.0]
    got = group_advantages(rewards, 4, scale_rewards="batch")
    spread = statistics.stdev(rewards)
    expected = [(r - statistics.fmean(rewards[:4])) / (spread + 1e-4) for r in rewards[:4]] + [
        (r - statistics.fmean(rewards[4:])) / (spread + 1e-4) for r in rewards[4:]
    ]
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_none_scaling_is_dr_grpo_centering():
    got = group_advantages(LESSON_GROUP, 4, scale_rewards="none")
    assert got.tolist() == [1.25, -0.75, -1.75, 1.25]


def test_boolean_aliases_as_in_trl():
    np.testing.assert_array_equal(group_advantages(LESSON_GROUP, 4, scale_rewards=True), group_advantages(LESSON_GROUP, 4))
    np.testing.assert_array_equal(
        group_advantages(LESSON_GROUP, 4, scale_rewards=False), group_advantages(LESSON_GROUP, 4, scale_rewards="none")
    )


def test_nan_reward_is_left_out_and_gets_zero():
    got = group_advantages([3.0, 1.0, math.nan, 3.0], 4)
    np.testing.assert_allclose(got[[0, 1, 3]], group_advantages([3.0, 1.0, 3.0], 3), atol=1e-12)
    assert got[2] == 0.0
    assert group_advantages([math.nan] * 4, 4).tolist() == [0.0] * 4


def test_g_equal_one_raises_a_clear_error():
    with pytest.raises(AdvantageError, match="al menos 2"):
        group_advantages([3.0], 1)
    with pytest.raises(AdvantageError, match="al menos 2"):
        group_advantages([3.0, 1.0], 1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(rewards=[1.0, 2.0, 3.0], num_generations=2), "múltiplo"),
        (dict(rewards=[], num_generations=2), "múltiplo"),
        (dict(rewards=[1.0, 2.0], num_generations=2, std="bessel"), "std"),
        (dict(rewards=[1.0, 2.0], num_generations=2, scale_rewards="prompt"), "scale_rewards"),
        (dict(rewards=[1.0, 2.0], num_generations=2, eps=-1.0), "eps"),
        (dict(rewards=[1.0, 2.0], num_generations=1.5), "al menos 2"),
    ],
)
def test_invalid_inputs_raise(kwargs, match):
    with pytest.raises(AdvantageError, match=match):
        group_advantages(**kwargs)


@pytest.mark.parametrize("rule, stdev", [("sample", statistics.stdev), ("population", statistics.pstdev)])
def test_advantage_steps_are_consistent(rule, stdev):
    steps = advantage_steps(LESSON_GROUP, std=rule)
    assert steps["mean"] == statistics.fmean(LESSON_GROUP)
    assert steps["centered"] == [r - 1.75 for r in LESSON_GROUP]
    assert steps["std"] == pytest.approx(stdev(LESSON_GROUP), abs=1e-12)
    assert steps["divisor"] == (3 if rule == "sample" else 4)
    np.testing.assert_allclose(steps["advantages"], group_advantages(LESSON_GROUP, 4, std=rule), atol=0)
    text = format_steps(steps)
    for a in steps["advantages"]:
        assert f"{a:+.2f}" in text
    assert f"{steps['std']:.4f}" in text
