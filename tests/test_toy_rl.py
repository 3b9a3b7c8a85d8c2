"""labs.l6.toy_rl: policy gradient, baselines, clipping, KL estimators and the tiny GRPO bandit."""

import math

import numpy as np
import pytest
import torch

from labs.l6 import toy_rl as T

LOGITS = [0.5, 0.0, -0.5, 1.0]
REWARDS = [3.0, 1.0, 0.0, 3.0]


# ---------------------------------------------------------------- compare


def test_compare_reports_exact_approx_and_maxdiff():
    same = T.compare("igual", [1.0, 2.0], [1.0, 2.0], atol=1e-9)
    assert same.exact and same.approx and same.maxdiff == 0.0
    near = T.compare("cerca", [1.0, 2.0], [1.0, 2.0 + 1e-7], atol=1e-6)
    assert not near.exact and near.approx and near.maxdiff == pytest.approx(1e-7)
    far = T.compare("lejos", [1.0, 2.0], [1.0, 2.1], atol=1e-6)
    assert not far.exact and not far.approx
    assert "exacto: False" in str(far) and "aprox" in str(far) and "1.00e-01" in str(far)
    with pytest.raises(ValueError):
        T.compare("forma", [1.0], [1.0, 2.0], atol=1.0)


# ---------------------------------------------------------------- policy gradient


def test_exact_gradient_matches_the_softmax_formula():
    pi = T.softmax(LOGITS)
    J = T.expected_reward(LOGITS, REWARDS)
    np.testing.assert_allclose(T.exact_policy_gradient(LOGITS, REWARDS), pi * (np.array(REWARDS) - J), atol=1e-12)


def test_score_function_estimate_converges_to_exact_gradient():
    check = T.policy_gradient_check(LOGITS, REWARDS, n_samples=100_000, seed=1)
    assert check["comparison"].approx, str(check["comparison"])
    assert not check["comparison"].exact  # a Monte Carlo mean is never bitwise exact
    assert check["autograd_vs_closed_form"].approx, str(check["autograd_vs_closed_form"])
    # The check can fail: a wrong estimator (no log: grad of pi instead of grad of log pi) is caught.
    wrong = check["estimate"] * T.softmax(LOGITS)
    assert not T.compare("mal", check["exact"], wrong, check["comparison"].atol).approx


def test_baseline_values():
    r = np.array([[3.0, 1.0], [0.0, 0.0]])
    assert T.baseline_values(r, "none", 5.0).tolist() == [[0, 0], [0, 0]]
    assert T.baseline_values(r, "fixed", 5.0).tolist() == [[5, 5], [5, 5]]
    assert T.baseline_values(r, "group", 5.0).tolist() == [[2, 2], [0, 0]]
    with pytest.raises(ValueError):
        T.baseline_values(r, "critic", 0.0)


def test_baselines_cut_variance_and_group_mean_shrinks_by_g_minus_one_over_g():
    stats = {k: T.gradient_estimator_stats(LOGITS, REWARDS, 4, k, 20_000, fixed_value=1.75, seed=3) for k in T.BASELINES}
    assert stats["fixed"]["variance"] < stats["none"]["variance"]
    assert stats["group"]["variance"] < stats["none"]["variance"]
    assert stats["none"]["shrink"] == pytest.approx(1.0, abs=0.05)
    assert stats["fixed"]["shrink"] == pytest.approx(1.0, abs=0.05)
    assert stats["group"]["shrink"] == pytest.approx(3 / 4, abs=0.05)


def test_group_baseline_ignores_a_reward_offset_but_the_others_do_not():
    shifted = [r + 10 for r in REWARDS]
    for kind, changes in (("group", False), ("none", True), ("fixed", True)):
        a = T.gradient_estimator_stats(LOGITS, REWARDS, 8, kind, 5_000, fixed_value=1.75, seed=4)
        b = T.gradient_estimator_stats(LOGITS, shifted, 8, kind, 5_000, fixed_value=1.75, seed=4)
        if changes:
            assert b["variance"] > 10 * a["variance"], kind
        else:
            assert b["variance"] == pytest.approx(a["variance"], rel=1e-9)


def test_variance_table_layout_and_falls_with_group_size():
    table = T.variance_table(LOGITS, REWARDS, [2, 8], fixed_value=1.75, n_trials=4_000)
    assert set(table) == set(T.BASELINES)
    for kind, rows in table.items():
        assert [r["group_size"] for r in rows] == [2, 8]
        assert rows[1]["variance"] < rows[0]["variance"], kind


# ---------------------------------------------------------------- clipping


def test_clipped_surrogate_and_its_flat_regions():
    rho = np.array([0.5, 0.9, 1.0, 1.1, 1.5])
    pos = T.clipped_surrogate(rho, 1.0)
    neg = T.clipped_surrogate(rho, -1.0)
    np.testing.assert_allclose(pos, [0.5, 0.9, 1.0, 1.1, 1.2])  # capped at (1 + eps) * A
    np.testing.assert_allclose(neg, [-0.8, -0.9, -1.0, -1.1, -1.5])  # floored at (1 - eps) * A
    assert np.all(pos <= rho * 1.0 + 1e-12) and np.all(neg <= rho * -1.0 + 1e-12)  # pessimistic bound
    np.testing.assert_allclose(T.surrogate_slope(rho, 1.0), [1, 1, 1, 1, 0])
    np.testing.assert_allclose(T.surrogate_slope(rho, -1.0), [0, -1, -1, -1, -1])
    np.testing.assert_allclose(T.clipped_surrogate([1.25], 1.0, epsilon_high=0.28), [1.25])


# ---------------------------------------------------------------- KL


def test_exact_kl_matches_torch():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.2, 0.6])
    ref = torch.distributions.kl_divergence(
        torch.distributions.Categorical(probs=torch.tensor(p)), torch.distributions.Categorical(probs=torch.tensor(q))
    )
    assert T.exact_kl(p, q) == pytest.approx(float(ref), abs=1e-12)
    assert T.exact_kl(p, p) == 0.0


def test_k3_is_unbiased_nonnegative_and_zero_when_equal():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.2, 0.6])
    s = T.kl_estimator_summary(p, q, n=100_000, seed=0)
    for name in ("k1", "k3"):  # unbiased
        assert abs(s[name]["mean"] - s["exact"]) < 4 * s[name]["stderr"], name
    assert s["k3"]["min"] >= 0.0 and s["k3"]["frac_negative"] == 0.0
    assert s["k1"]["frac_negative"] > 0  # k1 is unbiased but single samples go negative
    assert s["k3"]["std"] < s["k1"]["std"]
    equal = T.kl_estimator_summary(p, p, n=1_000)
    assert equal["k3"]["mean"] == 0.0 and equal["k3"]["min"] == 0.0


def test_k3_samples_equal_trl_formula():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.2, 0.6])
    rng = np.random.default_rng(5)
    k = T.kl_samples(p, q, 1000, np.random.default_rng(5))["k3"]
    x = rng.choice(3, size=1000, p=p)
    logp, ref = torch.tensor(np.log(p[x])), torch.tensor(np.log(q[x]))
    trl = torch.exp(ref - logp) - (ref - logp) - 1
    np.testing.assert_allclose(k, trl.numpy(), atol=1e-12)
    np.testing.assert_allclose(T.k3(logp, ref).numpy(), trl.numpy(), atol=0)


def test_kl_sweep_grows_from_zero():
    p = T.softmax([1.0, 0.0, -1.0])
    sweep = T.kl_sweep(p, lambda s: T.softmax([1.0 - s, 0.0, -1.0 + s]), [0.0, 0.5, 1.0, 2.0], n=5_000)
    assert sweep["exact"][0] == 0.0 and sweep["k3"][0] == 0.0
    assert all(a < b for a, b in zip(sweep["exact"], sweep["exact"][1:]))
    assert set(sweep) >= {"shift", "k1", "k2", "k3", "k3_std"}


# ---------------------------------------------------------------- the bandit


def test_p_correct_rises_with_length_for_arrays_and_tensors():
    v = T.p_correct([0, 2, 4, 8], 4.0)
    assert np.all(np.diff(v) > 0) and v[2] == pytest.approx(0.5)
    t = T.p_correct(torch.tensor([0.0, 4.0]), 4.0)
    assert float(t[1]) == pytest.approx(0.5)


def test_sampled_lengths_follow_the_policy():
    theta = torch.full((6,), 0.0, dtype=torch.float64)
    lengths = T.sample_lengths(theta, 50_000, torch.Generator().manual_seed(0))
    assert lengths.min() >= 0 and lengths.max() <= 6
    assert float(lengths.double().mean()) == pytest.approx(T.expected_length([0.5] * 6), abs=0.03)
    assert float((lengths == 6).double().mean()) == pytest.approx(0.5**6, abs=0.01)


def test_token_logps_and_mask():
    theta = torch.tensor([0.3, -0.2, 1.0], dtype=torch.float64)
    logp, mask = T.token_logps(theta, torch.tensor([0, 2, 3]))
    s = torch.sigmoid(theta)
    expected = [
        math.log(1 - s[0]),  # answers at once
        math.log(s[0]) + math.log(s[1]) + math.log(1 - s[2]),  # two thinking tokens, then answers
        math.log(s[0]) + math.log(s[1]) + math.log(s[2]),  # forced stop after max_len
    ]
    np.testing.assert_allclose(logp.sum(1).numpy(), expected, atol=1e-12)
    assert mask.sum(1).tolist() == [1, 3, 3]


def test_grpo_loss_zero_advantage_gives_no_gradient_and_clip_is_counted():
    theta = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([0, 1, 2, 4])
    logp, mask = T.token_logps(theta, lengths)
    old = logp.detach()
    loss, stats = T.grpo_loss(logp, old, old, mask, torch.zeros(4, dtype=torch.float64), 0.2, 0.0, "dapo")
    loss.backward()
    assert float(loss) == 0.0 and torch.all(theta.grad == 0) and stats["kl"] == 0.0
    # ratio far above 1 + eps with a positive advantage: every token is clipped and the gradient is 0
    logp2, _ = T.token_logps(theta, lengths)
    theta.grad = None
    loss2, stats2 = T.grpo_loss(logp2, old - 1.0, old, mask, torch.ones(4, dtype=torch.float64), 0.2, 0.0, "grpo")
    loss2.backward()
    assert stats2["clip_ratio"] == 1.0 and torch.all(theta.grad == 0)
    with pytest.raises(ValueError):
        T.grpo_loss(logp2, old, old, mask, torch.ones(4, dtype=torch.float64), 0.2, 0.0, "ppo")


def test_dapo_and_grpo_aggregation_differ_when_lengths_differ():
    theta = torch.zeros(4, dtype=torch.float64)
    logp, mask = T.token_logps(theta, torch.tensor([0, 3]))
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    dapo, _ = T.grpo_loss(logp, logp, logp, mask, adv, 0.2, 0.0, "dapo")
    grpo, _ = T.grpo_loss(logp, logp, logp, mask, adv, 0.2, 0.0, "grpo")
    assert float(grpo) == pytest.approx(0.0)  # per-answer means: +1 and -1 cancel
    assert float(dapo) == pytest.approx((-1 + 4) / 5)  # per-token mean: the long answer weighs 4 of 5


@pytest.fixture(scope="module")
def runs():
    base = T.BanditConfig(steps=120, seed=0)
    return {beta: T.train_grpo_bandit(T.BanditConfig(**{**base.__dict__, "beta": beta})) for beta in (0.0, 0.2)}


def test_reward_and_length_rise_together(runs):
    h = runs[0.0]
    assert len(h["reward"]) == 120 and len(h["p_keep"][-1]) == h["config"]["max_len"]
    assert np.mean(h["reward"][-20:]) > np.mean(h["reward"][:20]) + 0.3
    assert np.mean(h["length"][-20:]) > np.mean(h["length"][:20]) + 3
    assert np.corrcoef(T.smooth(h["reward"]), T.smooth(h["length"]))[0, 1] > 0.8


def test_kl_penalty_holds_the_policy_near_the_reference(runs):
    free, held = runs[0.0], runs[0.2]
    assert np.mean(held["kl"][-20:]) < np.mean(free["kl"][-20:])
    assert np.mean(held["length"][-20:]) < np.mean(free["length"][-20:])
    assert np.mean(held["reward"][-20:]) < np.mean(free["reward"][-20:])
    assert T.expected_length(held["p_keep"][-1]) < T.expected_length(free["p_keep"][-1])


def test_bandit_is_deterministic_and_restores_threads():
    before = torch.get_num_threads()
    a = T.train_grpo_bandit(T.BanditConfig(steps=5, seed=7))
    b = T.train_grpo_bandit(T.BanditConfig(steps=5, seed=7))
    assert a["reward"] == b["reward"] and a["length"] == b["length"]
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError):
        T.train_grpo_bandit(T.BanditConfig(steps=1, loss_type="ppo"))


def test_expected_length_and_smooth():
    assert T.expected_length([1.0, 1.0, 1.0]) == 3.0
    assert T.expected_length([0.0, 1.0]) == 0.0
    assert T.expected_length([0.5, 0.5]) == pytest.approx(0.5 + 0.25)
    np.testing.assert_allclose(T.smooth([2.0] * 7, 3), [2.0] * 7)
    np.testing.assert_allclose(T.smooth([0.0, 3.0, 6.0], 2), [0.0, 1.5, 4.5])


def test_clip_acts_only_when_steps_are_large():
    small = T.train_grpo_bandit(T.BanditConfig(steps=40, seed=0))
    large = T.BanditConfig(steps=40, seed=0, learning_rate=0.3, num_iterations=4)
    clipped = T.train_grpo_bandit(large)
    unclipped = T.train_grpo_bandit(T.BanditConfig(**{**large.__dict__, "epsilon": 100.0}))
    assert max(small["clip_ratio"]) == 0.0
    assert max(clipped["clip_ratio"]) > 0.0
    assert max(unclipped["clip_ratio"]) == 0.0
