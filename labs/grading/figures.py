"""The report's figures: training curves with the trend the grader tested, and the holdout comparison.

Drawn with ``matplotlib.figure.Figure`` directly (no pyplot), so grading from a notebook neither opens
windows nor changes the notebook's backend.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from labs.core import diagnostics as dg
from labs.core import resources, stats

PANELS = (
    (dg.REWARD, "Recompensa total (reward)"),
    (dg.LENGTH, "Longitud media de las respuestas (tokens)"),
    ("rewards", "Componentes de la recompensa (media por función)"),
    (dg.KL, "KL respecto a la referencia (nats/token)"),
)

# Drawn under the four panels when the run logged its memory per step (labs.core.resources.step_memory).
MEMORY_LINES = ((resources.RSS_KEY, "memoria residente (RSS)", "tab:blue"),
                (resources.CUDA_ALLOCATED_KEY, "CUDA asignada (tensores)", "tab:orange"),
                (resources.CUDA_RESERVED_KEY, "CUDA reservada (caché de torch)", "tab:red"))
MEMORY_WARMUP_STEPS = 2

REWARD_COLORS = {"correctness_reward": "tab:green", "format_reward": "tab:orange", "soft_format_reward": "tab:purple"}
OTHER_COLORS = ("tab:brown", "tab:pink", "tab:gray", "tab:olive", "tab:cyan", "tab:red")


def _draw_series(ax, s: dg.Series, label: str, color: str, with_trend: bool) -> None:
    ok = np.isfinite(s.values)
    ax.plot(s.steps[ok], s.values[ok], color=color, alpha=0.25, linewidth=0.8)
    ax.plot(s.steps, stats.smooth(s.values), color=color, linewidth=1.8, label=f"{label} (EMA)")
    if with_trend:
        t = stats.trend(s.values, s.steps)
        if t["slope"] is not None:
            bx, by = stats.block_means(s.values, s.steps, window=t["window"])
            ax.plot(bx, by, "o", color=color, markersize=3)
            ax.plot(bx, t["intercept"] + t["slope"] * bx, "--", color="black", linewidth=1,
                    label=f"Theil-Sen, tau={t['tau']:.2f}, p={t['p_value']:.2g}")


def plot_curves(metrics, path: Path, title: str = "") -> Path | None:
    """Four panels (reward, length, reward components, KL), and the memory per step below them when the run logged
    it; None when there is nothing to draw."""
    if not metrics:
        return None
    from matplotlib.figure import Figure

    memory = [(dg.series(metrics, key), label, color) for key, label, color in MEMORY_LINES]
    memory = [(s, label, color) for s, label, color in memory if s is not None and s.n_finite]
    fig = Figure(figsize=(12, 11 if memory else 8))
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.06, top=0.93 if memory else 0.91, hspace=0.4, wspace=0.18)
    grid = fig.add_gridspec(3 if memory else 2, 2)
    axes = [fig.add_subplot(grid[row, col]) for row in (0, 1) for col in (0, 1)]
    if memory:
        _draw_memory(fig.add_subplot(grid[2, :]), memory)
    drawn = 0
    for ax, (key, heading) in zip(axes, PANELS):
        ax.set_title(heading, fontsize=10)
        ax.set_xlabel("paso")
        if key == "rewards":
            names = dg.reward_function_names(metrics)[: len(OTHER_COLORS)]
            others = iter(OTHER_COLORS)
            for name in names:
                color = REWARD_COLORS.get(name) or next(others)
                s = dg.series(metrics, f"rewards/{name}/mean")
                if s is not None and s.n_finite:
                    _draw_series(ax, s, name, color, with_trend=False)
                    drawn += 1
        else:
            s = dg.series(metrics, key)
            if s is not None and s.n_finite:
                _draw_series(ax, s, key, "tab:blue", with_trend=key != dg.KL)
                drawn += 1
                if key == dg.KL and np.nanmax(s.values) > dg.KL_BOUND / 5:
                    ax.axhline(dg.KL_BOUND, color="tab:red", linestyle=":", label=f"límite {dg.KL_BOUND}")
                elif key == dg.KL:  # drawing the bound would flatten the curve
                    ax.set_title(f"{heading}; límite {dg.KL_BOUND}, muy por encima", fontsize=10)
        if ax.has_data():
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no registrado", ha="center", va="center", transform=ax.transAxes)
    if not drawn:
        return None
    if title:
        fig.suptitle(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    return path


def _draw_memory(ax, memory) -> None:
    """Each memory series per step, with its slope after the first steps (a leak is a slope that does not stop)."""
    ax.set_title("Memoria del proceso en cada paso registrado (GiB)", fontsize=10)
    ax.set_xlabel("paso")
    for s, label, color in memory:
        slope = resources.slope_mib_per_step(s.steps, s.values, MEMORY_WARMUP_STEPS)
        if slope is not None:
            label += f", pendiente {slope:+.1f} MiB/paso desde el paso {MEMORY_WARMUP_STEPS + 1}"
        ax.plot(s.steps, s.values, "o-", color=color, markersize=3, linewidth=1.2, label=label)
    ax.legend(fontsize=7)


def plot_holdout(comparison: dict, path: Path) -> Path:
    """Base against trained accuracy with the flips, from a ``paired_comparison`` dict."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.5))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.1, top=0.88, wspace=0.25)
    left, right = fig.subplots(1, 2)
    accs = [comparison["base_accuracy"], comparison["trained_accuracy"]]
    left.bar(["base", "entrenado"], accs, color=["tab:gray", "tab:blue"])
    for i, a in enumerate(accs):
        left.text(i, a, f"{a:.1%}", ha="center", va="bottom")
    left.set_ylim(0, 1.05)
    left.set_title(f"Precisión en {comparison['n']} problemas de GSM8K test", fontsize=10)
    flips = [comparison["base_wrong_trained_right"], comparison["base_right_trained_wrong"]]
    right.bar(["mal → bien", "bien → mal"], flips, color=["tab:green", "tab:red"])
    right.set_title(f"Problemas que cambian (McNemar p = {comparison['mcnemar_p']:.2g})", fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    return path
