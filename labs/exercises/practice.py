"""What the student's comparison code in E1-E3 reads, and the check that compares it with the course's analysis.

``metrics_frame`` turns run folders' ``metrics.jsonl`` into one pandas table (one row per variant and step,
the way ``labs.core.metrics.merged_rows`` merges TRL's rows). ``practice_runs`` builds a small table of the
same shape in code, from the exercise's planned variants (``variants.planned_variants``: their G, beta, rewards),
so the notebook's instant check runs in a second without any run folder; the notebook then applies the
same student function to the real runs. ``check_table`` says, in Spanish, where the student's table
differs from the numbers ``e1_rows`` / ``e2_rows`` / ``e3_rows`` compute.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from labs.core import metrics as mt
from labs.core.profiles import Profile
from labs.exercises.runs import RunData
from rewards import REWARD_NAMES

PRACTICE_STEPS = 30
PRACTICE_ROOT = Path("tabla-de-practica")  # never created: the practice runs exist only in memory


def metrics_frame(runs: Sequence[RunData]):
    """All runs' metrics in one DataFrame: columns ``variante``, ``step`` and every logged key."""
    import pandas as pd

    rows = [{"variante": run.label, "step": step, **{k: v for k, v in row.items() if k != "step"}}
            for run in runs for step, row in mt.merged_rows(run.metrics)]
    frame = pd.DataFrame(rows)
    if "variante" not in frame:
        frame = pd.DataFrame(columns=["variante", "step"])
    cols = ["variante", "step"] + [c for c in frame.columns if c not in ("variante", "step")]
    return frame[cols]


def _ramp(rng, start: float, end: float, noise: float, steps: int) -> np.ndarray:
    return np.linspace(start, end, steps) + rng.normal(0.0, noise, steps)


def practice_metrics(profile: Profile, reward_names: Sequence[str], steps: int = PRACTICE_STEPS, seed: int = 0) -> list[dict]:
    """TRL-like metrics rows for one variant, shaped by its settings: a larger G leaves fewer groups with equal
    rewards and a steadier gradient; without correctness only the format rises; beta = 0 logs no ``kl``."""
    rng = np.random.default_rng(seed)
    g = max(2, int(profile.num_generations))
    beta = float(profile.beta)
    parts = {}
    if "correctness_reward" in reward_names:
        parts["correctness_reward"] = np.clip(_ramp(rng, 0.3, 1.0, 0.4 / math.sqrt(g), steps), 0, 2)
    parts["format_reward"] = np.clip(_ramp(rng, 0.05, 0.45, 0.03, steps), 0, 0.5)
    parts["soft_format_reward"] = np.clip(_ramp(rng, 0.05, 0.18, 0.01, steps), 0, 0.2)
    drift = 0.02 / (1.0 + 25 * beta)  # a shorter leash (larger beta) keeps the policy nearer the reference
    rows = []
    for i in range(steps):
        row = {"step": i + 1, "loss": float(rng.normal(0, 0.01))}
        row["reward"] = float(sum(p[i] for p in parts.values()))
        for name, values in parts.items():
            row[f"rewards/{name}/mean"] = float(values[i])
        row[mt.ZERO_STD] = float(np.clip(0.6 ** (g / 2) + rng.normal(0, 0.03), 0, 1))
        row["grad_norm"] = float(abs(rng.normal(0.5, 0.3 / math.sqrt(g))))
        row["step_time"] = float(2.0 * g / 4 + abs(rng.normal(0, 0.1)))
        row[mt.LENGTH] = float(180 + (60 + 4000 * drift) * i / steps + rng.normal(0, 8))
        if beta > 0:
            row[mt.KL] = float(abs(drift * (i + 1) / steps + rng.normal(0, drift / 10)))
        rows.append(row)
    return rows


def practice_runs(variants, profile: Profile, steps: int = PRACTICE_STEPS, seed: int = 0) -> list[RunData]:
    """One in-memory run per variant (its label, its settings, synthetic metrics): the instant check's input."""
    runs = []
    for i, v in enumerate(variants):
        p = v.profile(profile)
        names = list(v.rewards) if v.rewards is not None else list(REWARD_NAMES)
        record = {"profile": p.as_dict(), "reward_functions": [{"name": n, "weight": 1.0} for n in names]}
        runs.append(RunData(v.label, PRACTICE_ROOT / v.name, record, practice_metrics(p, names, steps, seed + i)))
    return runs


COMPARISON_COLUMNS = {  # the student's column -> the key of the course's row (e1_rows, e2_rows, e3_rows)
    "E1": {"grupos_sin_varianza": "zero_std_share", "grad_norm_media": "grad_norm_mean", "grad_norm_std": "grad_norm_std"},
    "E2": {"formato_al_principio": "format_first", "formato_al_final": "format_last"},
    "E3": {"kl_media": "kl_logged_mean", "longitud_al_principio": "length_first", "longitud_al_final": "length_last"},
}


def course_rows(exercise: str, runs: Sequence[RunData]) -> list[dict]:
    """The course's analysis of ``runs`` for one exercise, without any model (E3: text measures only)."""
    from labs.exercises.e1 import e1_rows
    from labs.exercises.e2 import e2_rows
    from labs.exercises.e3 import e3_rows

    if exercise == "E1":
        return e1_rows(runs)
    if exercise == "E2":
        return e2_rows(runs, golds={})
    return [r for r in e3_rows(runs, 0, measure_model=False) if r.get("beta") is not None]


def check_comparison(exercise: str, table, rows: Sequence[dict], who: str | None = None) -> list[str]:
    """``check_table`` with the exercise's columns; ``rows`` from ``course_rows`` or the notebook's own table.
    Rows without a variant's runs (E3's base-model row) are left out."""
    rows = [r for r in rows if not (exercise == "E3" and r.get("beta") is None)]
    return check_table(table, rows, COMPARISON_COLUMNS[exercise], who or f"comparar_{exercise.lower()}")


def _same(a, b, tol: float = 1e-6) -> bool:
    missing_a = a is None or (isinstance(a, float) and math.isnan(a))
    missing_b = b is None or (isinstance(b, float) and math.isnan(b))
    if missing_a or missing_b:
        return missing_a and missing_b
    return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)


def check_table(table, rows: Sequence[dict], columns: dict[str, str], who: str = "tu función") -> list[str]:
    """Where ``table`` (the student's DataFrame, one row per variant, indexed by ``variante``) differs from the
    course's ``rows``; ``columns`` maps the student's column names to the keys of the rows. Spanish lines."""
    import pandas as pd

    if table is None or table is Ellipsis:
        return [f"{who} devuelve None: te falta el return (o aún no la escribiste)."]
    if not isinstance(table, pd.DataFrame):
        return [f"{who} debe devolver un DataFrame de pandas; devuelve {type(table).__name__}."]
    missing = [c for c in columns if c not in table.columns]
    if missing:
        return [f"A la tabla le faltan las columnas {missing}; tiene {list(table.columns)}."]
    problems = []
    for row in rows:
        label = row["label"]
        if label not in table.index:
            problems.append(f"Falta la variante '{label}' en el índice (usa groupby('variante')); el índice es {list(table.index)}.")
            continue
        for col, key in columns.items():
            mine, course = table.loc[label, col], row.get(key)
            mine = None if mine is None or (isinstance(mine, float) and math.isnan(mine)) else float(mine)
            if not _same(mine, course):
                problems.append(f"'{label}', columna {col}: la tuya da {mine!r} y el análisis del curso {course!r}.")
    return problems
