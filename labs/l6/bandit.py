"""A tiny GRPO in PyTorch on a "reasoning" bandit: the lesson's length-grows-with-reward story in seconds.

Same group-relative advantage as the trainer (``labs.l6.advantage``), the clipped ratio and the k3 KL
penalty; ``BanditConfig`` describes the policy and the reward.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from labs.l6.advantage import group_advantages


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
