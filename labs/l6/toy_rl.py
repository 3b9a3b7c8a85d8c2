"""Small problems where every piece of GRPO can be computed exactly and checked in seconds on a CPU.

- ``compare``: Karpathy's ``cmp()`` habit: is an estimate equal to a reference, close to it, and by how much.
- A categorical "policy" over K answers (softmax of logits) with a fixed reward per answer: the exact
  policy gradient (autograd through the expectation) against the score-function (log-derivative)
  estimate, and the variance of that estimate with no baseline, a fixed baseline or the group mean.
- PPO's clipped surrogate ``min(rho * A, clip(rho, 1 - eps, 1 + eps) * A)`` and its slope.
- The k1, k2 and k3 estimators of KL(p || q) between two categorical distributions (k3 is TRL's).
- A tiny GRPO in PyTorch on a "reasoning" bandit lives in ``labs.l6.bandit``; its names are re-exported
  here so the L6 notebook reads every toy from one module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

BASELINES = ("none", "fixed", "group")


# --------------------------------------------------------------------------------------------------
# cmp(): show the check, not a claim
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    label: str
    exact: bool
    approx: bool
    maxdiff: float
    atol: float

    def __str__(self) -> str:
        return (
            f"{self.label:28s} | exacto: {self.exact!s:5s} | aprox (atol={self.atol:.0e}): "
            f"{self.approx!s:5s} | maxdiff: {self.maxdiff:.2e}"
        )


def compare(label: str, reference, estimate, atol: float) -> Comparison:
    """Compare two arrays: bitwise equal, equal within ``atol``, and the largest absolute difference."""
    ref = np.asarray(reference, dtype=np.float64)
    est = np.asarray(estimate, dtype=np.float64)
    if ref.shape != est.shape:
        raise ValueError(f"{label}: formas distintas {ref.shape} y {est.shape}.")
    maxdiff = float(np.max(np.abs(ref - est))) if ref.size else 0.0
    return Comparison(label, bool(np.array_equal(ref, est)), bool(maxdiff <= atol), maxdiff, float(atol))


# --------------------------------------------------------------------------------------------------
# A categorical policy over K answers
# --------------------------------------------------------------------------------------------------


def softmax(logits) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def expected_reward(logits, rewards) -> float:
    """J(theta) = sum_a pi(a) R(a): computable exactly because there are only K answers."""
    return float(softmax(logits) @ np.asarray(rewards, dtype=np.float64))


def exact_policy_gradient(logits, rewards) -> np.ndarray:
    """dJ/dtheta by autograd through the exact expectation (no sampling anywhere)."""
    theta = torch.tensor(np.asarray(logits, dtype=np.float64), requires_grad=True)
    r = torch.tensor(np.asarray(rewards, dtype=np.float64))
    (torch.softmax(theta, 0) @ r).backward()
    return theta.grad.numpy().copy()  # pyright: ignore[reportOptionalMemberAccess] - backward() just above filled .grad


def sample_answers(logits, n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.choice(len(logits), size=n, p=softmax(logits))


def score_function_gradient(logits, rewards, actions, baseline=0.0) -> np.ndarray:
    """The log-derivative estimate (1/n) sum_i (R(a_i) - b_i) grad log pi(a_i), by autograd.

    This is how a trainer does it: build the surrogate ``mean((R - b) * log pi(a))`` whose gradient is
    the estimate, and call ``backward``. ``baseline`` is a number or one value per sample.
    """
    theta = torch.tensor(np.asarray(logits, dtype=np.float64), requires_grad=True)
    r = torch.tensor(np.asarray(rewards, dtype=np.float64))
    a = torch.as_tensor(np.asarray(actions), dtype=torch.long)
    weight = r[a] - torch.as_tensor(np.asarray(baseline, dtype=np.float64))
    (weight * torch.log_softmax(theta, 0)[a]).mean().backward()
    return theta.grad.numpy().copy()  # pyright: ignore[reportOptionalMemberAccess] - backward() just above filled .grad


def per_sample_gradients(logits, rewards, actions, baseline=0.0) -> np.ndarray:
    """Closed form of each sample's term: (R(a) - b) * (onehot(a) - pi). Shape (n, K)."""
    pi = softmax(logits)
    actions = np.asarray(actions)
    onehot = np.eye(len(pi))[actions]
    weight = np.asarray(rewards, dtype=np.float64)[actions] - np.asarray(baseline, dtype=np.float64)
    return weight[..., None] * (onehot - pi)


def policy_gradient_check(logits, rewards, n_samples: int = 200_000, seed: int = 0, n_sigmas: float = 4.0) -> dict:
    """Exact gradient against the mean of the score-function estimate over many samples.

    The tolerance is ``n_sigmas`` standard errors of the estimate (measured from the samples): a Monte
    Carlo mean is never exact, but it must land within a few standard errors of the truth.
    """
    rng = np.random.default_rng(seed)
    actions = sample_answers(logits, n_samples, rng)
    exact = exact_policy_gradient(logits, rewards)
    estimate = score_function_gradient(logits, rewards, actions)
    per_sample = per_sample_gradients(logits, rewards, actions)
    stderr = per_sample.std(axis=0, ddof=1) / math.sqrt(n_samples)
    atol = n_sigmas * float(stderr.max())
    return {
        "exact": exact,
        "estimate": estimate,
        "closed_form": per_sample.mean(axis=0),
        "stderr": stderr,
        "n_samples": n_samples,
        "comparison": compare("gradiente PG (muestras)", exact, estimate, atol),
        "autograd_vs_closed_form": compare("autograd vs fórmula cerrada", per_sample.mean(axis=0), estimate, 1e-10),
    }


def baseline_values(rewards_of_group: np.ndarray, kind: str, fixed_value: float) -> np.ndarray:
    """The baseline b_i for every sample of every group (array of shape (trials, G))."""
    if kind == "none":
        return np.zeros_like(rewards_of_group)
    if kind == "fixed":
        return np.full_like(rewards_of_group, fixed_value)
    if kind == "group":
        return np.broadcast_to(rewards_of_group.mean(axis=1, keepdims=True), rewards_of_group.shape)
    raise ValueError(f"baseline debe ser uno de {BASELINES}; recibí {kind!r}.")


def gradient_estimator_stats(
    logits, rewards, group_size: int, baseline: str, n_trials: int = 20_000, fixed_value: float = 0.0, seed: int = 0
) -> dict:
    """Draw ``n_trials`` groups of ``group_size`` answers and measure the gradient estimate of each group.

    Returns the total variance (sum over components of the estimate's variance), the mean estimate, the
    exact gradient, and ``shrink``: the projection of the mean on the exact gradient (1.0 = unbiased).
    The group-mean baseline includes each sample's own reward, which shrinks the expected gradient by
    (G - 1) / G: same direction, smaller step.
    """
    rng = np.random.default_rng(seed)
    actions = sample_answers(logits, n_trials * group_size, rng).reshape(n_trials, group_size)
    r = np.asarray(rewards, dtype=np.float64)[actions]
    b = baseline_values(r, baseline, fixed_value)
    estimates = per_sample_gradients(logits, rewards, actions, b).mean(axis=1)  # (trials, K)
    exact = exact_policy_gradient(logits, rewards)
    mean = estimates.mean(axis=0)
    return {
        "baseline": baseline,
        "group_size": group_size,
        "variance": float(estimates.var(axis=0, ddof=1).sum()),
        "mean": mean,
        "exact": exact,
        "shrink": float(mean @ exact / (exact @ exact)),
    }


def variance_table(logits, rewards, group_sizes, fixed_value: float, n_trials: int = 20_000, seed: int = 0) -> dict:
    """``{baseline: [stats for each group size]}`` for the three baselines on the same problem."""
    return {
        kind: [
            gradient_estimator_stats(logits, rewards, g, kind, n_trials, fixed_value, seed + 1000 * g)
            for g in group_sizes
        ]
        for kind in BASELINES
    }


# --------------------------------------------------------------------------------------------------
# PPO's clipped surrogate
# --------------------------------------------------------------------------------------------------


def clipped_surrogate(ratio, advantage: float, epsilon: float = 0.2, epsilon_high: float | None = None) -> np.ndarray:
    """min(rho * A, clip(rho, 1 - eps, 1 + eps_high) * A), the per-token objective (to be maximised)."""
    rho = np.asarray(ratio, dtype=np.float64)
    high = epsilon if epsilon_high is None else epsilon_high
    return np.minimum(rho * advantage, np.clip(rho, 1 - epsilon, 1 + high) * advantage)


def surrogate_slope(ratio, advantage: float, epsilon: float = 0.2, epsilon_high: float | None = None) -> np.ndarray:
    """d/d rho of the clipped surrogate, by autograd: 0 where the clip has made it flat."""
    rho = torch.tensor(np.asarray(ratio, dtype=np.float64), requires_grad=True)
    high = epsilon if epsilon_high is None else epsilon_high
    obj = torch.minimum(rho * advantage, torch.clamp(rho, 1 - epsilon, 1 + high) * advantage)
    obj.sum().backward()
    return rho.grad.numpy().copy()  # pyright: ignore[reportOptionalMemberAccess] - backward() just above filled .grad


# --------------------------------------------------------------------------------------------------
# KL estimators (Schulman's k1, k2, k3; TRL uses k3)
# --------------------------------------------------------------------------------------------------


def exact_kl(p, q) -> float:
    """KL(p || q) = sum_x p(x) log(p(x) / q(x)) for categorical distributions."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    mask = p > 0
    return float(np.sum(p[mask] * (np.log(p[mask]) - np.log(q[mask]))))


def kl_samples(p, q, n: int, rng: np.random.Generator) -> dict:
    """Per-sample KL estimates for x ~ p, with log_ratio = log q(x) - log p(x).

    k1 = -log_ratio, k2 = log_ratio**2 / 2, k3 = exp(log_ratio) - log_ratio - 1. With p the policy and q
    the reference, k3 is exactly TRL's ``exp(ref - logp) - (ref - logp) - 1``.
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    x = rng.choice(len(p), size=n, p=p)
    log_ratio = np.log(q[x]) - np.log(p[x])
    return {"k1": -log_ratio, "k2": 0.5 * log_ratio**2, "k3": np.expm1(log_ratio) - log_ratio}


def kl_estimator_summary(p, q, n: int = 100_000, seed: int = 0) -> dict:
    """Exact KL and, for each estimator, its mean, standard deviation and smallest single-sample value."""
    samples = kl_samples(p, q, n, np.random.default_rng(seed))
    return {
        "exact": exact_kl(p, q),
        "n": n,
        **{
            name: {
                "mean": float(v.mean()),
                "std": float(v.std(ddof=1)),
                "stderr": float(v.std(ddof=1) / math.sqrt(n)),
                "min": float(v.min()),
                "frac_negative": float((v < 0).mean()),
            }
            for name, v in samples.items()
        },
    }


def kl_sweep(p, make_q, shifts, n: int = 20_000, seed: int = 0) -> dict:
    """Exact KL and the three estimators' means as the reference ``make_q(shift)`` moves away from ``p``."""
    rows = [kl_estimator_summary(p, make_q(s), n, seed + i) for i, s in enumerate(shifts)]
    out = {"shift": list(shifts), "exact": [r["exact"] for r in rows]}
    for name in ("k1", "k2", "k3"):
        out[name] = [r[name]["mean"] for r in rows]
        out[f"{name}_std"] = [r[name]["std"] for r in rows]
    return out


from labs.l6.bandit import (  # noqa: E402  re-exported for the notebook: one module of toys
    BanditConfig,
    expected_length,
    grpo_loss,
    k3,
    p_correct,
    sample_lengths,
    smooth,
    token_logps,
    train_grpo_bandit,
)

# The module's names, its own and the bandit's it re-exports (the L6 notebook reads them all from here).
__all__ = [
    "BASELINES", "Comparison", "compare", "softmax", "expected_reward", "exact_policy_gradient",
    "sample_answers", "score_function_gradient", "per_sample_gradients", "policy_gradient_check",
    "baseline_values", "gradient_estimator_stats", "variance_table", "clipped_surrogate", "surrogate_slope",
    "exact_kl", "kl_samples", "kl_estimator_summary", "kl_sweep", "BanditConfig", "expected_length",
    "grpo_loss", "k3", "p_correct", "sample_lengths", "smooth", "token_logps", "train_grpo_bandit",
]
