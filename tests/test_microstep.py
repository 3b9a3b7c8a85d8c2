"""L6's micro-batch step (labs.l6.microstep): the references against a real GRPOTrainer step with
``gradient_accumulation_steps=2``, and the wrong pieces a student writes missing it by far more than the tolerances.

The tests marked ``trains`` share one real step (a module fixture: about a minute on a CPU); the others are arithmetic.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from labs.l6 import capstone, microstep


def sample_advantages(rewards):
    r = np.asarray(rewards, dtype=float)
    return (r - r.mean()) / (r.std(ddof=1) + microstep.EPS_ADVANTAGE)


def test_micro_batches_sum_to_the_whole_batch():
    """The reference step, over k micro-batches with different token counts, leaves the whole batch's gradient."""
    gen = torch.Generator().manual_seed(0)
    B, T = 6, 7
    base = -2 * torch.rand(B, T, generator=gen, dtype=torch.float64)
    old = base + 0.3 * torch.randn(B, T, generator=gen, dtype=torch.float64)
    adv = torch.randn(B, generator=gen, dtype=torch.float64)
    lengths = torch.tensor([7, 1, 3, 7, 2, 5])
    mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    for loss_type in microstep.LOSS_TYPES:
        for k in (1, 2, 3):
            logp = base.clone().requires_grad_(True)
            whole = capstone.reference_loss(logp, old, old, adv, mask, 0.0, loss_type, 0.2, T)
            expected, = torch.autograd.grad(whole, logp)
            logp = base.clone().requires_grad_(True)
            total = sum(float(microstep.microbatch_step(logp[rows], old[rows], old[rows], adv[rows], mask[rows], 0.0,
                                                        loss_type, 0.2, T, k, mask.sum()))
                        for rows in torch.arange(B).chunk(k))
            assert total == pytest.approx(float(whole.detach()), abs=1e-12)
            assert torch.allclose(logp.grad, expected, atol=1e-12), (loss_type, k)


def test_entropy_is_stable_for_large_float32_logits():
    logits = torch.tensor([[0.0, 300.0, -300.0, 5.0]], dtype=torch.float32)
    assert torch.isfinite(microstep.token_entropy(logits)).all()
    p = torch.softmax(logits, -1)
    assert torch.isnan(-(p * torch.log(p)).sum(-1)).all()  # the naive way, which the notebook's check refuses


def test_advantages_are_grouped_by_prompt_in_row_order():
    rewards, prompts = [1, 5, 0, 2, 2, 9], ["a", "b", "a", "b", "a", "b"]
    out = microstep.group_advantages_by_prompt(rewards, prompts, sample_advantages)
    assert np.allclose(out[[0, 2, 4]], sample_advantages([1, 0, 2]))
    assert np.allclose(out[[1, 3, 5]], sample_advantages([5, 2, 9]))


def test_cutting_gives_micro_batches_different_token_counts():
    full = {"completion_mask": torch.ones(4, 16, dtype=torch.long), "x": 1}
    cut = microstep.cut_micro_batches([dict(full), dict(full)], seed=0)
    counts = [int(b["completion_mask"].sum()) for b in cut]
    assert counts[0] != counts[1] and all(int(b["num_items_in_batch"]) == sum(counts) for b in cut)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return microstep.run_accumulation_check(str(tmp_path_factory.mktemp("microstep")))


@pytest.mark.trains
def test_the_real_step_accumulated_two_micro_batches(report):
    assert len(report["micro_batches"]) == microstep.ACCUMULATION == report["hooked_backwards"]
    assert report["trainer"].temperature == microstep.TEMPERATURE
    assert report["logged_entropy"] is not None


@pytest.mark.trains
def test_trls_replay_is_the_real_step(report):
    """The comparison's reference (compute_loss replayed on the recorded micro-batches) equals the step TRL took."""
    assert microstep.replay_vs_step(report) <= microstep.GRAD_RTOL


@pytest.fixture(scope="module")
def reference_result(report):
    return microstep.compare_with_trl(report, microstep.response_logps_and_entropy, microstep.microbatch_step,
                                      sample_advantages)


@pytest.mark.trains
def test_the_references_match_trl_within_the_tolerances(reference_result):
    """Measured figures are printed for the closing note; the tolerances are the module's."""
    print(microstep.format_comparison(reference_result))
    assert reference_result["advantage_diff"] < 1e-5  # the recomputed advantages are TRL's
    assert len(set(reference_result["micro_batch_tokens"])) == 2
    assert microstep.matches(reference_result)


def _no_temperature(model, ids, attention, mask, temperature):
    return microstep.response_logps_and_entropy(model, ids, attention, mask, 1.0)


def _no_accumulation(*args):
    loss = capstone.reference_loss(*args[:9])
    loss.backward()
    return loss.detach()


def _dapo_per_micro_batch(*args):
    loss = capstone.reference_loss(*args[:9]) / args[9]
    loss.backward()
    return loss.detach()


@pytest.mark.trains
@pytest.mark.parametrize("wrong,logps,step,loss_types", [
    ("no temperature", _no_temperature, microstep.microbatch_step, microstep.LOSS_TYPES),
    ("no accumulation scaling", microstep.response_logps_and_entropy, _no_accumulation, ("grpo", "dr_grpo")),
    ("dapo per micro-batch", microstep.response_logps_and_entropy, _dapo_per_micro_batch, ("dapo",)),
])
def test_a_wrong_piece_misses_by_far_more_than_the_tolerance(report, wrong, logps, step, loss_types):
    result = microstep.compare_with_trl(report, logps, step, sample_advantages, loss_types=loss_types)
    worst = max(max(r["loss_diff"] / microstep.LOSS_ATOL, r["grad_diff"] / microstep.GRAD_RTOL) for r in result["rows"])
    if wrong == "no temperature":
        worst = max(worst, result["entropy_diff"] / microstep.ENTROPY_ATOL)
    assert worst > 100, (wrong, microstep.format_comparison(result))
