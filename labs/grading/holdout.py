"""Check and pair the holdout evaluation of a run folder (criterion 3's input).

The grader does not trust ``eval/summary.json``: it pairs ``eval/base.jsonl`` and ``eval/trained.jsonl``
by problem id and recomputes ``labs.core.stats.paired_comparison`` itself, after checking that every id is a
GSM8K test problem (``gsm8k-test-<index>``) and that the summary, if it names a data set, names that one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from labs.core import runfolder as rf
from labs.core import stats
from labs.core.spanish import plural

from .inputs import RunData

ID_PREFIX = "gsm8k-test-"
GSM8K_TEST_SIZE = 1319


@dataclass
class Holdout:
    # labs.core.stats.paired_comparison of "correct" over the paired ids (what criterion 3 grades), plus
    # "last_number" (the same on "correct_last_number") and the format rates, when the files have them
    comparison: dict | None = None
    problems: list[str] = field(default_factory=list)  # why it cannot be evaluated (Spanish)
    notes: list[str] = field(default_factory=list)  # warnings that do not stop the evaluation


def _is_test_id(value) -> bool:
    if not isinstance(value, str) or not value.startswith(ID_PREFIX):
        return False
    suffix = value[len(ID_PREFIX) :]
    return suffix.isdigit() and 0 <= int(suffix) <= GSM8K_TEST_SIZE


def _dataset_ok(name) -> bool:
    lowered = str(name).lower()
    return "gsm8k" in lowered and "test" in lowered


def _by_id(rows: list[dict], label: str, out: Holdout | None, field: str = "correct") -> dict[str, object]:
    records: dict[str, object] = {}
    duplicates = 0
    for row in rows:
        key = row.get("id")
        if not isinstance(key, str):
            continue
        if key in records:
            duplicates += 1
            continue
        records[key] = row.get(field)
    if duplicates and out is not None:
        out.notes.append(f"El archivo del modelo {label} repite {duplicates} ids; se usa la primera aparición de cada uno.")
    return records


def _side_readings(data: RunData, common: list[str], comparison: dict) -> None:
    """Beside the graded comparison: the format-independent one and the format rates (for the hack detector)."""
    base_last = _by_id(data.base, "base", None, "correct_last_number")
    trained_last = _by_id(data.trained, "entrenado", None, "correct_last_number")
    try:
        comparison["last_number"] = stats.paired_comparison([base_last[i] for i in common], [trained_last[i] for i in common])
    except ValueError:
        pass  # an older run folder without correct_last_number
    for label, rows in (("base", data.base), ("trained", data.trained)):
        formats = _by_id(rows, label, None, "format_ok")
        flags = [formats[i] for i in common if isinstance(formats.get(i), bool)]
        if flags:
            comparison[f"{label}_format_rate"] = flags.count(True) / len(flags)


def _foreign_ids(rows: list[dict]) -> list[str]:
    return [repr(row.get("id"))[:60] for row in rows if not _is_test_id(row.get("id"))]


def check_holdout(data: RunData) -> Holdout:
    out = Holdout()
    if data.base is None or data.trained is None:
        out.problems.extend(data.problems_for("eval") or ["No se puede evaluar la mejora en el holdout porque falta la evaluación."])
        return out
    out.notes.extend(data.problems_for("eval"))
    if not data.base or not data.trained:
        empty = rf.EVAL_BASE if not data.base else rf.EVAL_TRAINED
        out.problems.append(f"No se puede evaluar la mejora en el holdout porque {empty} no tiene ningún problema.")
        return out
    summary = data.summary or {}
    if "dataset" in summary and not _dataset_ok(summary.get("dataset")):
        out.problems.append(
            "No se puede evaluar la mejora en el holdout porque la evaluación es de otro conjunto de datos: "
            f"{rf.EVAL_SUMMARY} dice dataset = {str(summary.get('dataset'))[:80]!r} y el criterio pide GSM8K test."
        )
        return out
    for label, rows in (("base", data.base), ("entrenado", data.trained)):
        foreign = _foreign_ids(rows)
        if foreign:
            hint = " (son problemas de entrenamiento)" if any("train" in f for f in foreign) else ""
            out.problems.append(
                "No se puede evaluar la mejora en el holdout porque la evaluación no es de GSM8K test: "
                f"{len(foreign)} de {len(rows)} ids del modelo {label} no tienen la forma '{ID_PREFIX}<número>' "
                f"(por ejemplo {foreign[0]}){hint}."
            )
    if out.problems:
        return out
    base = _by_id(data.base, "base", out)
    trained = _by_id(data.trained, "entrenado", out)
    common = sorted(set(base) & set(trained))
    only = len(set(base) ^ set(trained))
    if not common:
        out.problems.append("No se puede evaluar la mejora en el holdout porque los modelos base y entrenado no comparten ningún problema.")
        return out
    if only:
        out.notes.append(f"{plural(only, 'problema aparece', 'problemas aparecen')} solo en uno de los dos archivos; la comparación usa los {len(common)} comunes.")
    try:
        comparison = stats.paired_comparison([base[i] for i in common], [trained[i] for i in common])
    except ValueError:
        out.problems.append(
            "No se puede evaluar la mejora en el holdout porque ningún problema tiene 'correct' verdadero o falso en los dos archivos."
        )
        return out
    if comparison["n_skipped"]:
        out.notes.append(f"{plural(comparison['n_skipped'], 'problema no tiene', 'problemas no tienen')} 'correct' verdadero o falso y "
                         f"{'se deja' if comparison['n_skipped'] == 1 else 'se dejan'} fuera.")
    _compare_with_summary(summary, comparison, out)
    _side_readings(data, common, comparison)
    out.comparison = comparison
    return out


def _compare_with_summary(summary: dict, comparison: dict, out: Holdout) -> None:
    if not summary:
        return
    differ = []
    for key in ("n", "base_accuracy", "trained_accuracy", "base_wrong_trained_right", "base_right_trained_wrong"):
        if key not in summary:
            continue
        claimed = stats.as_float(summary[key])
        if not (math.isfinite(claimed) and abs(claimed - comparison[key]) < 1e-6):
            differ.append(f"{key}: dice {str(summary[key])[:20]}, recalculado {comparison[key]:.4g}")
    if differ:
        out.notes.append(
            f"{rf.EVAL_SUMMARY} no coincide con los archivos por problema ({'; '.join(differ)}); se usan los valores recalculados."
        )
