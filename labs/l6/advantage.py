"""Group-relative advantages, the GRPO baseline, written to match TRL's ``GRPOTrainer``.

For every prompt the trainer samples a *group* of ``num_generations`` completions. Each completion's
advantage is its reward minus the mean reward of its own group, divided by a spread::

    A_i = (r_i - mean(group)) / (std(group) + eps)

TRL 1.x (``grpo_trainer.py``, ``_generate_and_score_completions``) computes it with

- the **sample** standard deviation (Bessel-corrected: divides by G - 1), not the population one;
- ``eps = 1e-4`` added to the standard deviation;
- ``scale_rewards``: ``"group"`` (default) divides by each group's std, ``"batch"`` by the std of the
  whole batch (the mean is still the group's), ``"none"`` does not divide at all (Dr. GRPO);
- NaN-aware statistics: a completion whose reward is NaN (every reward function returned ``None``) is
  left out of its group's mean and std, and its advantage is set to 0.

Hand-worked course material uses the population standard deviation, so the same group gives different
numbers: ``std="population"`` reproduces that table, ``std="sample"`` (the default) reproduces the trainer.

G = 1 has no meaning here: the only member is its own baseline, so ``r - mean`` is always 0, and the
sample standard deviation divides by G - 1 = 0. TRL refuses it at configuration time ("GRPO requires at
least 2 generations per prompt"); ``group_advantages`` raises ``AdvantageError`` for it as well.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

TRL_EPS = 1e-4
STD_RULES = ("sample", "population")
SCALE_RULES = ("group", "batch", "none")


class AdvantageError(ValueError):
    """Rewards or settings for which a group-relative advantage is not defined."""


def _ddof(std: str) -> int:
    if std not in STD_RULES:
        raise AdvantageError(f"std debe ser 'sample' (la de TRL) o 'population'; recibí {std!r}.")
    return 1 if std == "sample" else 0


def _scale_rule(scale_rewards: str | bool) -> str:
    # TRL also accepts True/False for "group"/"none".
    if scale_rewards is True:
        return "group"
    if scale_rewards is False:
        return "none"
    if scale_rewards not in SCALE_RULES:
        raise AdvantageError(
            f"scale_rewards debe ser 'group', 'batch' o 'none' (como en GRPOConfig); recibí {scale_rewards!r}."
        )
    return scale_rewards


def _nanstd(values: np.ndarray, ddof: int, axis=None, keepdims: bool = False) -> np.ndarray:
    """Standard deviation ignoring NaNs; NaN where no more than ``ddof`` values remain (as TRL's nanstd)."""
    count = np.sum(~np.isnan(values), axis=axis, keepdims=keepdims)
    mean = np.nanmean(values, axis=axis, keepdims=True)
    squares = np.nansum((values - mean) ** 2, axis=axis, keepdims=keepdims)
    variance = np.where(count > ddof, squares / np.maximum(count - ddof, 1), np.nan)
    return np.sqrt(variance)


def group_advantages(
    rewards: Sequence[float] | np.ndarray,
    num_generations: int,
    std: str = "sample",
    eps: float = TRL_EPS,
    scale_rewards: str | bool = "group",
) -> np.ndarray:
    """Advantages of a batch of rewards laid out group after group, as ``GRPOTrainer`` computes them.

    ``rewards`` is flat: the first ``num_generations`` values are the completions of the first prompt,
    the next ``num_generations`` those of the second, and so on (TRL's order). Returns a float64 array
    of the same length. Raises ``AdvantageError`` for ``num_generations < 2``, for a length that is not a
    multiple of ``num_generations`` and for unknown rules.
    """
    r = np.asarray(rewards, dtype=np.float64).reshape(-1)
    if int(num_generations) != num_generations or num_generations < 2:
        raise AdvantageError(
            f"num_generations={num_generations}: la ventaja relativa al grupo necesita al menos 2 respuestas "
            "por prompt. Con G=1 la única respuesta es su propia media (r - media = 0 siempre) y la desviación "
            "muestral divide por G-1 = 0. TRL también lo rechaza al crear GRPOConfig."
        )
    if r.size == 0 or r.size % num_generations:
        raise AdvantageError(
            f"Hay {r.size} recompensas, que no es un múltiplo positivo de num_generations={num_generations}."
        )
    ddof = _ddof(std)
    rule = _scale_rule(scale_rewards)
    if eps < 0:
        raise AdvantageError(f"eps debe ser >= 0; recibí {eps}.")

    groups = r.reshape(-1, num_generations)
    # An all-NaN group has no mean; numpy warns about it, TRL silently yields NaN (then 0). Same here.
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        centered = groups - np.nanmean(groups, axis=1, keepdims=True)
        if rule == "group":
            adv = centered / (_nanstd(groups, ddof, axis=1, keepdims=True) + eps)
        elif rule == "batch":
            adv = centered / (_nanstd(r, ddof) + eps)
        else:
            adv = centered
    return np.nan_to_num(adv.reshape(-1), nan=0.0)


def advantage_steps(rewards: Sequence[float], std: str = "sample", eps: float = TRL_EPS) -> dict:
    """One group worked out step by step: mean, deviations, the std used, and the advantages.

    The notebook prints this as the hand-computed table; every number comes from here.
    """
    r = np.asarray(rewards, dtype=np.float64).reshape(-1)
    advantages = group_advantages(r, len(r), std=std, eps=eps)
    mean = float(r.mean())
    centered = r - mean
    ddof = _ddof(std)
    variance = float((centered**2).sum() / (len(r) - ddof))
    return {
        "rewards": r.tolist(),
        "std_rule": std,
        "divisor": len(r) - ddof,
        "mean": mean,
        "centered": centered.tolist(),
        "variance": variance,
        "std": variance**0.5,
        "eps": eps,
        "advantages": advantages.tolist(),
    }


def format_steps(steps: dict, decimals: int = 2) -> str:
    """The step-by-step table of ``advantage_steps`` as Spanish text."""
    f = f"{{:+.{decimals}f}}"
    name = "muestral (divide por G-1)" if steps["std_rule"] == "sample" else "poblacional (divide por G)"
    lines = [
        f"recompensas            {steps['rewards']}",
        f"media                  {steps['mean']:.4f}",
        "r - media              [" + ", ".join(f.format(c) for c in steps["centered"]) + "]",
        f"varianza {name:27s} = {steps['variance']:.4f}",
        f"desviación             {steps['std']:.4f}  (+ eps {steps['eps']:g})",
        "ventajas               [" + ", ".join(f.format(a) for a in steps["advantages"]) + "]",
    ]
    return "\n".join(lines)
