"""labs.l6.objective: the GRPO objective by hand against the trainer-style aggregation, and its first step."""

import math

import numpy as np
import pytest
import torch

from labs.l6 import objective as O
from labs.l6.advantage import group_advantages

REWARDS = [3.0, 1.0, 0.0, 3.0]


@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
def test_loops_over_the_formula_equal_the_vectorised_loss(loss_type, beta):
    group = O.toy_group(REWARDS, [3, 6, 10, 4], policy_shift=0.5, seed=3)
    by_hand = O.objective_by_hand(group["logp"], group["old_logp"], group["ref_logp"], group["advantages"], 0.2, beta)
    assert by_hand["loss"][loss_type] == pytest.approx(O.vectorised_loss(group, loss_type, 0.2, beta), abs=1e-12)
    assert by_hand["loss"][loss_type] == -by_hand["objective"][loss_type]


def test_dr_grpo_divides_the_token_sum_by_g_times_the_maximum_length():
    group = O.toy_group(REWARDS, [3, 6, 10, 4], seed=1)
    out = O.objective_by_hand(group["logp"], group["old_logp"], group["ref_logp"], group["advantages"],
                              max_completion_length=16)
    total = sum(r["sum"] for r in out["rows"])
    assert out["objective"]["dr_grpo"] == pytest.approx(total / (4 * 16))
    assert out["objective"]["dapo"] == pytest.approx(total / 23)
    with pytest.raises(ValueError, match="menor que la respuesta más larga"):
        O.objective_by_hand(group["logp"], group["old_logp"], group["ref_logp"], group["advantages"],
                            max_completion_length=5)


def test_grpo_and_dapo_differ_with_unequal_lengths_and_agree_with_equal_ones():
    unequal = O.toy_group(REWARDS, [3, 6, 10, 4], seed=0)
    equal = O.toy_group(REWARDS, [5, 5, 5, 5], seed=0)
    lu = O.objective_by_hand(unequal["logp"], unequal["old_logp"], unequal["ref_logp"], unequal["advantages"])["loss"]
    le = O.objective_by_hand(equal["logp"], equal["old_logp"], equal["ref_logp"], equal["advantages"])["loss"]
    assert abs(lu["grpo"] - lu["dapo"]) > 1e-3
    assert le["grpo"] == pytest.approx(le["dapo"], abs=1e-12)


def test_first_step_loss_is_zero_under_dapo_only_with_equal_lengths():
    adv = group_advantages(REWARDS, 4)
    assert O.first_step_loss(adv, [7, 7, 7, 7], "dapo") == pytest.approx(0.0, abs=1e-12)
    assert O.first_step_loss(adv, [3, 6, 10, 4], "grpo") == pytest.approx(0.0, abs=1e-12)
    tilted = O.first_step_loss(adv, [3, 6, 10, 4], "dapo")
    assert tilted == pytest.approx(-float(np.dot([3, 6, 10, 4], adv)) / 23)
    assert abs(tilted) > 0.1
    assert O.first_step_loss(adv, [3, 6, 10, 4], "dr_grpo") == pytest.approx(-float(np.dot([3, 6, 10, 4], adv)) / 40)
    with pytest.raises(ValueError, match="loss_type"):
        O.first_step_loss(adv, [1, 1, 1, 1], "ppo")


def test_first_step_closed_form_matches_the_objective_with_ratio_one():
    lengths = [3, 6, 10, 4]
    group = O.toy_group(REWARDS, lengths, seed=2)
    same = group["old_logp"]
    out = O.objective_by_hand(same, same, group["ref_logp"], group["advantages"], beta=0.0, max_completion_length=12)
    for loss_type in ("grpo", "dapo"):
        assert out["loss"][loss_type] == pytest.approx(O.first_step_loss(group["advantages"], lengths, loss_type))
    assert all(r["mean_ratio"] == 1.0 and r["sequence_ratio"] == 1.0 for r in out["rows"])


def test_sequence_ratio_is_the_geometric_mean_of_the_token_ratios():
    lp, old = [-0.1, -2.0, -0.7], [-0.3, -1.5, -0.7]
    token_ratios = [math.exp(a - b) for a, b in zip(lp, old)]
    assert O.sequence_ratio(lp, old) == pytest.approx(float(np.prod(token_ratios)) ** (1 / 3))
    # TRL's "sequence" level: (log_ratio * mask).sum(-1) / mask.sum(-1), then exp
    log_ratio = torch.tensor([lp]) - torch.tensor([old])
    assert O.sequence_ratio(lp, old) == pytest.approx(float(torch.exp(log_ratio.sum(-1) / 3)))
    with pytest.raises(ValueError):
        O.sequence_ratio([], [])


def test_clip_flattens_a_term_that_moved_too_far():
    # one token, ratio e^1 = 2.72 > 1.2 with A > 0: the term is clip(rho) * A = 1.2 * A
    out = O.objective_by_hand([[0.0]], [[-1.0]], [[0.0]], [2.0], epsilon=0.2)
    assert out["rows"][0]["sum"] == pytest.approx(1.2 * 2.0)
    # same ratio with A < 0: min picks rho * A (pessimistic), no clipping benefit
    out = O.objective_by_hand([[0.0]], [[-1.0]], [[0.0]], [-2.0], epsilon=0.2)
    assert out["rows"][0]["sum"] == pytest.approx(math.e * -2.0)


def test_format_objective_reports_agreement_and_the_three_losses():
    text = O.format_objective(O.toy_group(REWARDS, [3, 6, 10, 4], seed=0))
    assert text.count("coincide") == 2 and "NO coincide" not in text
    assert "loss_type='dr_grpo'" in text and "ρ secuencia" in text


def test_bad_input_gets_a_spanish_message():
    with pytest.raises(ValueError, match="misma cantidad"):
        O.objective_by_hand([[0.0]], [[0.0]], [[0.0]], [1.0, 2.0])
    with pytest.raises(ValueError, match="longitudes distintas"):
        O.objective_by_hand([[0.0, 1.0]], [[0.0]], [[0.0]], [1.0])
    with pytest.raises(ValueError, match="una longitud por recompensa"):
        O.toy_group(REWARDS, [1, 2])


def test_signed_never_prints_minus_zero_and_first_step_text_lists_three_losses():
    assert O.signed(-1e-17) == "+0.0000" and O.signed(-0.38404) == "-0.3840"
    text = O.format_first_step(group_advantages(REWARDS, 4), [[8, 8, 8, 8], [3, 6, 10, 4]])
    assert text.splitlines()[0].endswith("grpo: +0.0000   dapo: +0.0000   dr_grpo: +0.0000")
    assert "dapo: +0.3840" in text.splitlines()[1]


@pytest.mark.parametrize("loss_type", O.LOSS_TYPES)
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_aggregate_loss_of_the_per_token_loss_equals_the_loops(loss_type, beta):
    group = O.toy_group([3.0, 1.0, 0.0, 3.0], [3, 6, 10, 4], seed=1)
    per_token, mask = O.per_token_loss(group, epsilon=0.2, beta=beta)
    by_hand = O.objective_by_hand(group["logp"], group["old_logp"], group["ref_logp"], group["advantages"],
                                  epsilon=0.2, beta=beta, max_completion_length=16)
    assert O.aggregate_loss(per_token, mask, loss_type, max_completion_length=16) == pytest.approx(
        by_hand["loss"][loss_type], abs=1e-12)


def test_per_token_loss_leaves_padding_to_the_mask_as_trl_does():
    group = O.toy_group([3.0, 1.0, 0.0, 3.0], [3, 6, 10, 4], seed=0)
    per_token, mask = O.per_token_loss(group)
    adv = torch.tensor(group["advantages"], dtype=torch.float64)
    padded = mask == 0
    # ratio 1 on padding: the term is -A there, so forgetting the mask changes every aggregation
    assert torch.allclose(per_token[padded], (-adv[:, None].expand_as(per_token))[padded])
    unmasked = float((per_token.sum(-1) / per_token.size(1)).mean())
    assert abs(unmasked - O.aggregate_loss(per_token, mask, "grpo")) > 1e-3


def test_aggregate_loss_rejects_unknown_types_and_dr_grpo_without_length():
    per_token, mask = O.per_token_loss(O.toy_group([1.0, 0.0], [2, 3]))
    with pytest.raises(ValueError, match="max_completion_length"):
        O.aggregate_loss(per_token, mask, "dr_grpo")
    with pytest.raises(ValueError, match="loss_type"):
        O.aggregate_loss(per_token, mask, "bnpo")
