"""The table the E1-E3 comparisons read: ``metrics_frame`` turns run folders' metrics into one row per variant and step.

What the student's ``comparar_e1`` / ``comparar_e2`` / ``comparar_e3`` compute from it is checked in each notebook, on
tables of its own (tests/test_exercise_wrong_answers.py runs those checks against wrong and right answers).
"""

from __future__ import annotations

import math
from pathlib import Path

from labs import exercises as ex


def run(label: str, rows: list[dict]) -> ex.RunData:
    return ex.RunData(label, Path("no-existe") / label, {}, rows)


def test_the_metrics_frame_has_one_row_per_variant_and_step():
    runs = [run("G=2", [{"step": 1, "reward": 0.5, "grad_norm": 1.0}, {"step": 2, "reward": 0.7, "grad_norm": 2.0}]),
            run("G=4", [{"step": 1, "reward": 0.1, "kl": 0.01}, {"step": 1, "grad_norm": 3.0}, {"step": 2, "reward": 0.2}])]
    frame = ex.metrics_frame(runs)
    assert list(frame.columns[:2]) == ["variante", "step"]
    assert sorted(zip(frame["variante"], frame["step"])) == [("G=2", 1), ("G=2", 2), ("G=4", 1), ("G=4", 2)]
    g4 = frame[(frame["variante"] == "G=4") & (frame["step"] == 1)].iloc[0]
    assert g4["reward"] == 0.1 and g4["grad_norm"] == 3.0 and g4["kl"] == 0.01  # one step's rows merged
    assert math.isnan(frame[frame["variante"] == "G=2"]["kl"].iloc[0])  # a key one run never logged is NaN
    assert ex.metrics_frame([]).columns.tolist() == ["variante", "step"]
