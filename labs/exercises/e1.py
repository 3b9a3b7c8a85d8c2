"""E1, group size: the course's numbers that compare runs with G small and G large.

The spread of the reward curve around its trend, the steps (and seconds) until the smoothed reward first
reaches a shared threshold, the seconds per step (``step_time``), and from the logged completions the standard
error of each group's baseline, s/sqrt(G) (lesson L6: a larger group estimates the baseline better). The share of
groups without variance (``frac_reward_zero_std``) and the mean and spread of ``grad_norm`` are the student's
table (``comparar_e1``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np

from labs.core import diagnostics as dg
from labs.core import stats
from labs.exercises.curves import curve_spread, mean_std, seconds_until, shared_threshold, steps_to_threshold
from labs.exercises.runs import RunData, logged_completions


def group_statistics(run: RunData) -> dict:
    """Per-group numbers from the logged completions: groups, equal-reward share, baseline standard error.

    Each group is the G completions of one prompt at one step; its reward is the sum of the reward
    functions (GRPOConfig's default weights, all 1). The baseline of a group is its mean reward, whose
    standard error is s / sqrt(G) with s the group's sample standard deviation (lesson L6).
    """
    rows = logged_completions(run)
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        if not r["rewards"]:
            continue
        key = (r["step"], json.dumps(r["prompt"], sort_keys=True, ensure_ascii=False))
        groups.setdefault(key, []).append(sum(r["rewards"].values()))
    sizes = [len(g) for g in groups.values()]
    stds = [float(np.std(g, ddof=1)) for g in groups.values() if len(g) > 1]
    ses = [float(np.std(g, ddof=1) / math.sqrt(len(g))) for g in groups.values() if len(g) > 1]
    equal = [bool(np.ptp(g) == 0) for g in groups.values() if len(g) > 1]
    return {
        "groups": len(groups),
        "group_size": int(np.median(sizes)) if sizes else None,
        "within_group_std": float(np.mean(stds)) if stds else None,
        "baseline_se": float(np.mean(ses)) if ses else None,
        "equal_reward_share": float(np.mean(equal)) if equal else None,
    }


def e1_rows(runs: Sequence[RunData], threshold: float | None = None) -> list[dict]:
    """E1's comparison, one dict per run (None where a number cannot be computed)."""
    rewards = [r.series(dg.REWARD) for r in runs]
    if threshold is None:
        threshold = shared_threshold([s.values for s in rewards if s is not None])
    out = []
    for run, reward in zip(runs, rewards):
        step_time = run.series("step_time")
        gen = run.series("course/generation_seconds")
        reached = steps_to_threshold(reward.values, reward.steps, threshold) if reward is not None else None
        groups = group_statistics(run)
        out.append(
            {
                "label": run.label,
                "G": run.num_generations,
                "steps": int(reward.n_finite) if reward is not None else 0,
                "reward_first": stats.trend(reward.values, reward.steps)["first_mean"] if reward is not None else None,
                "reward_last": stats.trend(reward.values, reward.steps)["last_mean"] if reward is not None else None,
                "reward_spread": curve_spread(reward.values, reward.steps) if reward is not None else None,
                "threshold": threshold,
                "steps_to_threshold": reached,
                "seconds_to_threshold": seconds_until(run, reached),
                "seconds_per_step": mean_std(step_time.values)[0] if step_time is not None else None,
                "generation_seconds_per_step": mean_std(gen.values)[0] if gen is not None else None,
                "baseline_se": groups["baseline_se"],
                "within_group_std": groups["within_group_std"],
                "base_accuracy": (run.summary or {}).get("base_accuracy"),
                "trained_accuracy": (run.summary or {}).get("trained_accuracy"),
            }
        )
    return out


E1_COLUMNS = {
    "label": "variante",
    "G": "G",
    "steps": "pasos registrados",
    "reward_first": "recompensa al principio",
    "reward_last": "recompensa al final",
    "reward_spread": "dispersión de la curva (std de residuos)",
    "steps_to_threshold": "pasos hasta el umbral",
    "seconds_to_threshold": "segundos hasta el umbral",
    "seconds_per_step": "segundos por paso",
    "generation_seconds_per_step": "de ellos generando",
    "within_group_std": "std de la recompensa dentro del grupo",
    "baseline_se": "error típico de la baseline (s/√G)",
    "base_accuracy": "precisión base (holdout)",
    "trained_accuracy": "precisión entrenado (holdout)",
}
