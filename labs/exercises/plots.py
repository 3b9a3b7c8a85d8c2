"""Tables and figures for the exercise notebooks (Spanish headings: students read them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from labs.core import stats
from labs.core.paths import runs_dir
from labs.core.profiles import Profile
from labs.exercises.runs import RunData

FIGURES_DIR = "_ejercicios"


def table(rows: Sequence[dict], columns: dict[str, str]):
    """A pandas DataFrame with the Spanish column names, indexed by variant; None shows as NaN."""
    import pandas as pd

    frame = pd.DataFrame([{columns[k]: r.get(k) for k in columns} for r in rows])
    return frame.set_index(columns["label"])


def figure_path(profile: Profile, name: str, runs_root=None) -> Path:
    path = Path(runs_root or runs_dir()) / FIGURES_DIR / f"{name}-{profile.name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def plot_series(runs: Sequence[RunData], panels: Sequence[tuple], path: Path, title: str = "") -> Path:
    """One panel per ``(key, heading)``, one colour per run (raw faint, EMA solid).

    ``key`` is a metrics key, or a callable ``run -> (steps, values)`` for a derived curve.
    """
    from matplotlib.figure import Figure

    cols = min(2, len(panels))
    rows_n = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(6 * cols, 3.6 * rows_n))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.09, top=0.88 if title else 0.94, hspace=0.45, wspace=0.2)
    axes = np.atleast_1d(fig.subplots(rows_n, cols)).ravel()
    for ax, (key, heading) in zip(axes, panels):
        ax.set_title(heading, fontsize=10)
        ax.set_xlabel("paso")
        for color, run in zip(COLORS, runs):
            if callable(key):
                steps, values = key(run)
                steps, values = np.asarray(steps, dtype=float), stats.to_array(values)
            else:
                s = run.series(key)
                if s is None:
                    continue
                steps, values = s.steps, s.values
            ok = np.isfinite(values)
            if not ok.any():
                continue
            ax.plot(steps[ok], values[ok], "o-", color=color, alpha=0.3, markersize=3, linewidth=0.8)
            ax.plot(steps, stats.smooth(values), color=color, linewidth=1.8, label=run.label)
        if ax.has_data():
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no registrado", ha="center", va="center", transform=ax.transAxes)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=90)
    return path


def plot_bars(rows: Sequence[dict], keys: Sequence[tuple], path: Path, title: str = "") -> Path:
    """One bar panel per ``(key, heading)``, one bar per row (missing values are left empty)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4 * len(keys), 3.6))
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.3, top=0.82 if title else 0.9, wspace=0.35)
    axes = np.atleast_1d(fig.subplots(1, len(keys))).ravel()
    labels = [str(r["label"]) for r in rows]
    for ax, (key, heading) in zip(axes, keys):
        values = [r.get(key) for r in rows]
        heights = [v if isinstance(v, (int, float)) and v is not None and math.isfinite(v) else 0.0 for v in values]
        bars = ax.bar(range(len(rows)), heights, color=[COLORS[i % len(COLORS)] for i in range(len(rows))])
        for bar, v in zip(bars, values):
            text = "n/d" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.3g}"
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), text, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
        ax.set_title(heading, fontsize=10)
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=90)
    return path


def fmt(value, digits: int = 3) -> str:
    """A number for a Spanish sentence ("n/d" when there is none)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/d"
    return f"{value:.{digits}g}"
