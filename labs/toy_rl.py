"""Small problems where every piece of GRPO can be computed exactly and checked in seconds on a CPU.

- ``compare``: Karpathy's ``cmp()`` habit: is an estimate equal to a reference, close to it, and by how much.
- A categorical "policy" over K answers (softmax of logits) with a fixed reward per answer: the exact
  policy gradient (autograd through the expectation) against the score-function (log-derivative)
  estimate, and the variance of that estimate with no baseline, a fixed baseline or the group mean.
- PPO's clipped surrogate ``min(rho * A, clip(rho, 1 - eps, 1 + eps) * A)`` and its slope.
- The k1, k2 and k3 estimators of KL(p || q) between two categorical distributions (k3 is TRL's).
- A tiny GRPO in PyTorch on a "reasoning" bandit (see ``BanditConfig``), with the same group-relative
  advantage as the trainer (``labs.advantage``), the clipped ratio and the k3 KL penalty.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch

from labs.advantage import group_advantages

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
    return theta.grad.numpy().copy()


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
    return theta.grad.numpy().copy()


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
    return rho.grad.numpy().copy()


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


# --------------------------------------------------------------------------------------------------
# A tiny GRPO on a "reasoning" bandit
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BanditConfig:
    """A policy that writes ``L`` "thinking" tokens and then answers; longer thinking is right more often.

    At position t the policy emits "keep thinking" with probability sigmoid(theta[t]), otherwise it
    answers ("stop"); after ``max_len`` thinking tokens it must answer. A prompt of difficulty d is
    answered correctly with probability sigmoid((L - d) / slope); reward 1 if correct, 0 otherwise.
    Every prompt of a step gets a group of ``num_generations`` answers.
    """

    max_len: int = 16
    difficulties: tuple[float, ...] = (2.0, 4.0, 6.0, 8.0)
    slope: float = 1.0
    init_logit: float = 0.0  # sigmoid(0) = 0.5: short answers at first (mean length about 1)
    num_generations: int = 8
    prompts_per_step: int = 8
    steps: int = 150
    num_iterations: int = 2  # optimizer steps on each batch (TRL's mu): makes the ratio move from 1
    learning_rate: float = 0.05
    epsilon: float = 0.2
    beta: float = 0.0
    loss_type: str = "dapo"  # "dapo": mean over all tokens of the batch; "grpo": mean per answer, then over answers
    scale_rewards: str = "group"
    seed: int = 0


def p_correct(lengths, difficulty, slope: float = 1.0):
    """Probability that an answer after ``lengths`` thinking tokens is right (tensor or array in, same out)."""
    if isinstance(lengths, torch.Tensor):
        return torch.sigmoid((lengths - difficulty) / slope)
    return 1.0 / (1.0 + np.exp(-(np.asarray(lengths, dtype=np.float64) - difficulty) / slope))


def sample_lengths(theta: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """Number of thinking tokens before the answer, for ``n`` answers sampled from the policy."""
    keep = torch.rand(n, theta.numel(), generator=generator) < torch.sigmoid(theta.detach())
    stops = (~keep).int()
    first_stop = torch.where(stops.any(dim=1), stops.argmax(dim=1), torch.full((n,), theta.numel()))
    return first_stop


def token_logps(theta: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities of the sampled answers and their mask, both of shape (n, max_len + 1).

    Tokens 0..L-1 are "keep thinking", token L is "answer" (absent when L == max_len, a forced stop).
    """
    max_len = theta.numel()
    pos = torch.arange(max_len + 1)
    padded = torch.cat([theta, theta.new_zeros(1)])  # position max_len is never a real choice
    thinking = pos[None, :] < lengths[:, None]
    answering = (pos[None, :] == lengths[:, None]) & (lengths[:, None] < max_len)
    logp = torch.where(thinking, torch.nn.functional.logsigmoid(padded), torch.nn.functional.logsigmoid(-padded))
    mask = (thinking | answering).to(theta.dtype)
    return logp * mask, mask


def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """TRL's per-token KL estimate: exp(ref - logp) - (ref - logp) - 1."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def grpo_loss(
    logp, old_logp, ref_logp, mask, advantages, epsilon: float, beta: float, loss_type: str
) -> tuple[torch.Tensor, dict]:
    """The clipped, KL-penalised GRPO loss (to minimise), aggregated as ``loss_type`` says."""
    ratio = torch.exp(logp - old_logp)
    adv = advantages[:, None]
    per_token = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * adv)
    kl = k3(logp, ref_logp)
    if beta != 0.0:
        per_token = per_token + beta * kl
    if loss_type == "dapo":
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    elif loss_type == "grpo":
        loss = ((per_token * mask).sum(1) / mask.sum(1).clamp(min=1.0)).mean()
    else:
        raise ValueError(f"loss_type debe ser 'dapo' o 'grpo'; recibí {loss_type!r}.")
    clipped = ((ratio < 1 - epsilon) & (adv < 0)) | ((ratio > 1 + epsilon) & (adv > 0))
    n_tokens = mask.sum().clamp(min=1.0)
    stats = {
        "kl": float((kl.detach() * mask).sum() / n_tokens),
        "clip_ratio": float((clipped.to(mask.dtype) * mask).sum() / n_tokens),
    }
    return loss, stats


def train_grpo_bandit(config: BanditConfig = BanditConfig()) -> dict:
    """Run GRPO on the bandit; return the config and one list per metric (one value per step).

    The tensors are tiny, so torch runs on one thread here (several threads only add overhead, and
    much more on a shared machine); the previous thread count is restored afterwards.
    """
    if config.loss_type not in ("dapo", "grpo"):
        raise ValueError(f"loss_type debe ser 'dapo' o 'grpo'; recibí {config.loss_type!r}.")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train_grpo_bandit(config)
    finally:
        torch.set_num_threads(threads)


def _train_grpo_bandit(config: BanditConfig) -> dict:
    gen = torch.Generator().manual_seed(config.seed)
    theta = torch.full((config.max_len,), float(config.init_logit), dtype=torch.float64, requires_grad=True)
    ref_theta = theta.detach().clone()
    optimizer = torch.optim.Adam([theta], lr=config.learning_rate)
    G, P = config.num_generations, config.prompts_per_step
    diffs = torch.tensor(config.difficulties, dtype=torch.float64)
    history = {k: [] for k in ("reward", "length", "kl", "clip_ratio", "frac_zero_std", "p_keep")}

    for step in range(config.steps):
        # 1. group sampling: P prompts, G answers each, from the current policy
        prompt_diff = diffs[torch.randint(len(diffs), (P,), generator=gen)].repeat_interleave(G)
        lengths = sample_lengths(theta, P * G, gen)
        # 2. verifiable reward: right (1) or wrong (0)
        correct = torch.rand(P * G, generator=gen, dtype=torch.float64) < p_correct(
            lengths.to(torch.float64), prompt_diff, config.slope
        )
        rewards = correct.to(torch.float64)
        # 3. group-relative advantage, exactly as the trainer computes it
        adv = torch.from_numpy(group_advantages(rewards.numpy(), G, scale_rewards=config.scale_rewards))
        groups = rewards.view(P, G)
        with torch.no_grad():
            old_logp, mask = token_logps(theta, lengths)
            ref_logp, _ = token_logps(ref_theta, lengths)
        # 4. clipped policy update, num_iterations times on the same batch
        stats = {}
        for _ in range(config.num_iterations):
            logp, _ = token_logps(theta, lengths)
            loss, stats_i = grpo_loss(
                logp, old_logp, ref_logp, mask, adv, config.epsilon, config.beta, config.loss_type
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            stats = stats_i if not stats else {k: stats[k] + stats_i[k] for k in stats}
        history["reward"].append(float(rewards.mean()))
        history["length"].append(float(lengths.to(torch.float64).mean()))
        history["kl"].append(stats["kl"] / config.num_iterations)
        history["clip_ratio"].append(stats["clip_ratio"] / config.num_iterations)
        history["frac_zero_std"].append(float((groups.std(dim=1) == 0).to(torch.float64).mean()))
        history["p_keep"].append(torch.sigmoid(theta.detach()).tolist())
    return {"config": asdict(config), **history}


def expected_length(p_keep) -> float:
    """Mean number of thinking tokens of a policy with per-position keep-thinking probabilities ``p_keep``."""
    survive, total = 1.0, 0.0
    for p in p_keep:
        survive *= p
        total += survive
    return total


def smooth(values, window: int = 10) -> np.ndarray:
    """Trailing moving average (the first points average what exists so far), for plotting noisy curves."""
    v = np.asarray(values, dtype=np.float64)
    c = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, len(v) + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)
