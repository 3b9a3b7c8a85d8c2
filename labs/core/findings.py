"""The building blocks of a run's findings: the ``Finding`` record and the Spanish wording of numbers.

``labs.core.diagnostics`` states its checks with these; the C2b grader and the labs print them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from labs.core import stats
from labs.core.metrics import CORRECTNESS, KL, LENGTH, REWARD

LABELS = {
    REWARD: "la recompensa total",
    LENGTH: "la longitud media de las respuestas",
    KL: "la KL",
    CORRECTNESS: "la recompensa de corrección",
    "format": "la recompensa de formato",
}


@dataclass(frozen=True)
class Finding:
    """One statement about a run, with whether it holds and the numbers behind it."""

    key: str
    holds: bool | None
    message: str
    warning: bool = False
    evidence: dict = field(default_factory=dict)


def _fmt(x, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/d"
    return f"{x:.{digits}g}"


def p_text(p) -> str:
    """A p-value as Spanish text: "p = 0.0123" or "p < 0.0001"."""
    if p is None:
        return "p n/d"
    return "p < 0.0001" if p < 1e-4 else f"p = {p:.4f}"


def trend_sentence(t: dict) -> str:
    """The numbers of a ``stats.trend`` dict as a Spanish clause."""
    text = (
        f"media del primer {int(stats.EDGE_FRACTION * 100)} % de pasos {_fmt(t['first_mean'])} y del último "
        f"{_fmt(t['last_mean'])}"
    )
    if t.get("tau") is not None:
        over = f"los {t['points']} valores" if t["window"] == 1 else f"{t['points']} medias de bloques de {t['window']} pasos"
        text += (
            f"; tau de Kendall {t['tau']:.2f} ({p_text(t['p_value'])}) sobre {over}; "
            f"pendiente de Theil-Sen {_fmt(t['slope'])} por paso"
        )
    return text
