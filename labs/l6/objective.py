"""The full GRPO objective, term by term, beside the normalisations TRL offers (its default is ``"dapo"``).

DeepSeekMath's objective (TRL's ``loss_type="grpo"``), for one group of G answers ``o_1..o_G``::

    J(theta) = 1/G sum_i 1/|o_i| sum_t [ min(rho_it A_i, clip(rho_it, 1 - eps, 1 + eps) A_i) - beta KL_it ]

with ``rho_it = pi_theta(o_it) / pi_old(o_it)`` (per token), ``A_i`` the group advantage (the same for every
token of answer i) and ``KL_it`` the k3 estimate ``exp(ref - logp) - (ref - logp) - 1``. TRL 1.x minimises
``loss = -J`` and, by default (``loss_type="dapo"``), replaces the two averages with one over every token
of the batch: ``1 / sum_i |o_i| * sum_i sum_t [...]``. ``"dr_grpo"`` divides the same double sum by the
constant ``G * max_completion_length`` (per group here). See ``GRPOTrainer._compute_loss``.

``objective_by_hand`` follows the formula with plain Python loops over answers and tokens; the tests check
it against ``labs.l6.bandit.grpo_loss``, which aggregates padded tensors the way TRL's code does.
``sequence_ratio`` is GSPO's ratio (TRL's ``importance_sampling_level="sequence"``): the exponential of the
mean per-token log-ratio of an answer, one number for all its tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from labs.l6.advantage import group_advantages
from labs.l6.bandit import grpo_loss

LOSS_TYPES = ("grpo", "dapo", "dr_grpo")


def signed(x: float, decimals: int = 4) -> str:
    """``x`` with a sign and ``decimals`` decimals, without a "-0.0000" for a rounding-level negative."""
    return f"{round(float(x), decimals) + 0.0:+.{decimals}f}"


def sequence_ratio(logp: Sequence[float], old_logp: Sequence[float]) -> float:
    """GSPO's importance ratio of one answer: exp(mean_t (logp_t - old_logp_t)), as TRL's "sequence" level."""
    if len(logp) == 0 or len(logp) != len(old_logp):
        raise ValueError("logp y old_logp deben tener la misma longitud, mayor que 0.")
    return math.exp(sum(a - b for a, b in zip(logp, old_logp)) / len(logp))


def objective_by_hand(
    logp: Sequence[Sequence[float]],
    old_logp: Sequence[Sequence[float]],
    ref_logp: Sequence[Sequence[float]],
    advantages: Sequence[float],
    epsilon: float = 0.2,
    beta: float = 0.0,
    max_completion_length: int | None = None,
) -> dict:
    """The objective of one group, one term at a time (ragged per-token log-probabilities, one list per answer).

    Returns one row per answer (its length, advantage, mean token ratio, GSPO's sequence ratio, the sum and
    the mean over its tokens of ``min(...) - beta * KL``, its mean KL) and ``objective`` / ``loss`` for each
    of ``LOSS_TYPES`` (``loss = -objective``).
    """
    if not (len(logp) == len(old_logp) == len(ref_logp) == len(advantages)) or not logp:
        raise ValueError("Hace falta la misma cantidad (>0) de respuestas en logp, old_logp, ref_logp y advantages.")
    rows = []
    for i, (lp, old, ref, adv) in enumerate(zip(logp, old_logp, ref_logp, advantages)):
        if not (len(lp) == len(old) == len(ref)) or not lp:
            raise ValueError(f"La respuesta {i} tiene log-probabilidades de longitudes distintas o vacías.")
        terms, ratios, kls = [], [], []
        for t in range(len(lp)):
            ratio = math.exp(lp[t] - old[t])
            clipped = min(ratio * adv, min(max(ratio, 1 - epsilon), 1 + epsilon) * adv)
            d = ref[t] - lp[t]
            kl = math.exp(d) - d - 1
            terms.append(clipped - beta * kl)
            ratios.append(ratio)
            kls.append(kl)
        rows.append(
            {
                "length": len(lp),
                "advantage": float(adv),
                "mean_ratio": sum(ratios) / len(ratios),
                "sequence_ratio": sequence_ratio(lp, old),
                "sum": sum(terms),
                "mean": sum(terms) / len(terms),
                "mean_kl": sum(kls) / len(kls),
            }
        )
    G = len(rows)
    longest = max(r["length"] for r in rows)
    max_len = longest if max_completion_length is None else max_completion_length
    if max_len < longest:
        raise ValueError(f"max_completion_length={max_len} es menor que la respuesta más larga ({longest} tokens).")
    objective = {
        "grpo": sum(r["mean"] for r in rows) / G,
        "dapo": sum(r["sum"] for r in rows) / sum(r["length"] for r in rows),
        "dr_grpo": sum(r["sum"] for r in rows) / (G * max_len),
    }
    return {"rows": rows, "objective": objective, "loss": {k: -v for k, v in objective.items()}}


def first_step_loss(advantages: Sequence[float], lengths: Sequence[int], loss_type: str) -> float:
    """The loss of the first optimisation step after generating (every ratio is 1) with beta = 0, in closed form.

    ``"grpo"``: -mean_i A_i, which is 0 when the advantages of the group sum to 0. ``"dapo"``:
    -sum_i |o_i| A_i / sum_i |o_i|, which is 0 only if, in addition, the lengths do not tilt the sum (for
    instance when every answer has the same length). ``"dr_grpo"``: -sum_i |o_i| A_i / (G * max |o_i|).
    """
    a = np.asarray(advantages, dtype=np.float64)
    n = np.asarray(lengths, dtype=np.float64)
    if a.shape != n.shape or a.size == 0 or np.any(n < 1):
        raise ValueError("advantages y lengths deben tener el mismo número (>0) de valores, con longitudes >= 1.")
    if loss_type == "grpo":
        return float(-a.mean())
    if loss_type == "dapo":
        return float(-(n * a).sum() / n.sum())
    if loss_type == "dr_grpo":
        return float(-(n * a).sum() / (a.size * n.max()))
    raise ValueError(f"loss_type debe ser uno de {LOSS_TYPES}; recibí {loss_type!r}.")


def toy_group(
    rewards: Sequence[float], lengths: Sequence[int], policy_shift: float = 0.3, ref_shift: float = 0.2, seed: int = 0
) -> dict:
    """A group of answers with known per-token log-probabilities, to evaluate the objective on.

    The old policy (the one that sampled) gives each token a probability drawn from [0.2, 0.9]; the current
    policy moves each log-probability by ``policy_shift`` times a standard normal (as after some optimisation
    steps), the reference by ``ref_shift`` times another. Advantages come from ``group_advantages`` (TRL's
    rule). Returns the ragged lists and the same data padded, with its mask, as torch tensors.
    """
    if len(rewards) != len(lengths):
        raise ValueError("Hace falta una longitud por recompensa.")
    rng = np.random.default_rng(seed)
    old = [np.log(rng.uniform(0.2, 0.9, size=int(n))) for n in lengths]
    cur = [o + policy_shift * rng.standard_normal(o.size) for o in old]
    ref = [o + ref_shift * rng.standard_normal(o.size) for o in old]
    longest = max(int(n) for n in lengths)

    def padded(seqs):
        out = torch.zeros(len(seqs), longest, dtype=torch.float64)
        for i, s in enumerate(seqs):
            out[i, : s.size] = torch.from_numpy(s)
        return out

    mask = torch.zeros(len(lengths), longest, dtype=torch.float64)
    for i, n in enumerate(lengths):
        mask[i, : int(n)] = 1.0
    return {
        "rewards": [float(r) for r in rewards],
        "lengths": [int(n) for n in lengths],
        "advantages": group_advantages(rewards, len(rewards)).tolist(),
        "logp": [c.tolist() for c in cur],
        "old_logp": [o.tolist() for o in old],
        "ref_logp": [r.tolist() for r in ref],
        "padded": {"logp": padded(cur), "old_logp": padded(old), "ref_logp": padded(ref), "mask": mask},
    }


def vectorised_loss(group: dict, loss_type: str, epsilon: float = 0.2, beta: float = 0.0) -> float:
    """The loss of ``toy_group`` data through ``bandit.grpo_loss`` (TRL's aggregation on padded tensors)."""
    p = group["padded"]
    adv = torch.tensor(group["advantages"], dtype=torch.float64)
    loss, _ = grpo_loss(p["logp"] * p["mask"], p["old_logp"] * p["mask"], p["ref_logp"] * p["mask"], p["mask"],
                        adv, epsilon, beta, loss_type)
    return float(loss)


def per_token_loss(group: dict, epsilon: float = 0.2, beta: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """TRL's ``per_token_loss`` on ``toy_group`` data: ``-min(rho A, clip(rho) A) + beta * k3``, and the mask.

    Shape (G, longest answer). As in ``GRPOTrainer._compute_loss`` the padded positions are NOT zeroed (there
    ``logp = old_logp = ref_logp = 0``, so the ratio is 1 and the term is ``-A``): only the mask removes them.
    """
    p = group["padded"]
    adv = torch.tensor(group["advantages"], dtype=torch.float64)[:, None]
    ratio = torch.exp(p["logp"] - p["old_logp"])
    per_token = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * adv)
    if beta != 0.0:
        d = p["ref_logp"] - p["logp"]
        per_token = per_token + beta * (torch.exp(d) - d - 1)
    return per_token, p["mask"]


def aggregate_loss(per_token: torch.Tensor, mask: torch.Tensor, loss_type: str,
                   max_completion_length: int | None = None) -> float:
    """TRL 1.x's three aggregations of a per-token loss (``GRPOTrainer._compute_loss``, one process, no accumulation).

    ``"grpo"``: mean over each answer's own tokens, then mean over answers. ``"dapo"``: sum over every token of the
    batch divided by the number of tokens. ``"dr_grpo"``: the same sum divided by ``answers * max_completion_length``.
    """
    masked = per_token * mask
    if loss_type == "grpo":
        return float((masked.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean())
    if loss_type == "dapo":
        return float(masked.sum() / mask.sum().clamp(min=1.0))
    if loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("dr_grpo necesita max_completion_length.")
        return float(masked.sum() / (per_token.size(0) * max_completion_length))
    raise ValueError(f"loss_type debe ser uno de {LOSS_TYPES}; recibí {loss_type!r}.")


def format_objective(group: dict, epsilon: float = 0.2, beta: float = 0.04, decimals: int = 4) -> str:
    """The term-by-term table of ``objective_by_hand`` on a ``toy_group`` and the losses, as Spanish text.

    Each loss is computed twice (loops over the formula, and ``bandit.grpo_loss`` on padded tensors) and the
    text says whether they agree within 1e-12, rather than printing a rounding-level difference.
    """
    out = objective_by_hand(group["logp"], group["old_logp"], group["ref_logp"], group["advantages"], epsilon, beta)
    def f(x):
        return signed(x, decimals)

    head = f"{'resp.':>5} {'r':>5} {'A':>8} {'|o_i|':>5} {'ρ medio':>8} {'ρ secuencia':>11} {'término medio':>13} {'KL medio':>8}"
    lines = [head, "-" * len(head)]
    for i, (r, row) in enumerate(zip(group["rewards"], out["rows"])):
        lines.append(
            f"{i + 1:>5} {r:>5g} {f(row['advantage']):>8} {row['length']:>5} {row['mean_ratio']:>8.{decimals}f} "
            f"{row['sequence_ratio']:>11.{decimals}f} {f(row['mean']):>13} {row['mean_kl']:>8.{decimals}f}"
        )
    lines.append("")
    lines.append(f"ε = {epsilon}, β = {beta}; pérdida = -objetivo")
    for loss_type in ("grpo", "dapo"):
        agree = abs(out["loss"][loss_type] - vectorised_loss(group, loss_type, epsilon, beta)) < 1e-12
        lines.append(
            f"loss_type={loss_type!r:7s} pérdida a mano {f(out['loss'][loss_type])}   "
            f"con la agregación del entrenador: {'coincide' if agree else 'NO coincide'}"
        )
    lines.append(f"loss_type='dr_grpo' pérdida a mano {f(out['loss']['dr_grpo'])}   "
                 f"(divide por G · {max(group['lengths'])} tokens)")
    return "\n".join(lines)


def format_first_step(advantages: Sequence[float], length_sets: Sequence[Sequence[int]], decimals: int = 4) -> str:
    """``first_step_loss`` under the three normalisations for each set of answer lengths, as Spanish text."""
    lines = []
    for lengths in length_sets:
        losses = "   ".join(f"{t}: {signed(first_step_loss(advantages, lengths, t), decimals)}" for t in LOSS_TYPES)
        lines.append(f"longitudes {str(list(lengths)):16s} pérdida del primer paso  {losses}")
    return "\n".join(lines)
