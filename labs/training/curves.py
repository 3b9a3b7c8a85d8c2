"""The training curves of a run, the lesson's reading of them, and the live "what to watch".

The drawing itself is shared with the C2b grader (labs.grading.figures.plot_curves), so a student
sees in the lab exactly the curves, smoothing and trend lines the instructor grades.
"""

from __future__ import annotations

import json
from pathlib import Path

from labs.core import diagnostics
from labs.core.runfolder import EVAL_SUMMARY, RUN_JSON, RunFolder, read_json

TRAINING_PNG = "training.png"
GRADING_DIR = "grading"

# Lesson 7.5, "what to watch", one line per curve.
READING_ES = {
    "reward": "Recompensa total: debe subir. Es la suma ponderada de las tres funciones.",
    "rewards/correctness_reward/mean": (
        "Corrección (2.0 por acierto): la precisión en GSM8K durante el entrenamiento; la señal real."
    ),
    "completions/mean_length": (
        "Longitud media: en el 'aha moment' crece sola, porque razonar más largo resuelve más problemas."
    ),
    "kl": "KL respecto al modelo de referencia: debe quedar acotada; si se dispara, baja el LR o sube beta.",
}


def draw(run: RunFolder) -> Path | None:
    """Draw the training curves (raw and smoothed) into ``curves/training.png``, with the memory per step below them."""
    from labs.grading.figures import plot_curves

    return plot_curves(run.metrics(), run.curves_dir / TRAINING_PNG, title=run.root.name)


def eval_summary(run: RunFolder) -> dict | None:
    try:
        return read_json(run.path(EVAL_SUMMARY))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def max_completion_length(run: RunFolder):
    """The run's completion budget from run.json (None when the file or the field is missing)."""
    try:
        record = read_json(run.path(RUN_JSON))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    profile = record.get("profile") if isinstance(record, dict) else None
    return profile.get("max_completion_length") if isinstance(profile, dict) else None


def what_to_watch(run: RunFolder):
    """Lesson 7.5's checks computed from this run's own numbers (labs.core.diagnostics)."""
    return diagnostics.what_to_watch(run.metrics(), eval_summary(run), max_completion_length(run))


def what_to_watch_lines(run: RunFolder) -> list[str]:
    return [("AVISO: " if f.warning else "") + f.message for f in what_to_watch(run)]


def grade(run: RunFolder) -> Path:
    """Write the C2b grading report for this run into ``<run>/grading/`` and return its path."""
    from labs.grading.cli import grade_one
    from labs.grading.report import REPORT_NAME

    out = run.root / GRADING_DIR
    grade_one(run.root, out)
    return out / REPORT_NAME
