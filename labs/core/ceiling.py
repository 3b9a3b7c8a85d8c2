"""Headroom: how much room a run's starting point leaves for the change a criterion looks for.

Two criteria of C2b judge a change from a starting point, and both can be impossible to meet through
no fault of the run:

- **Holdout gain (criterion 3).** A flat result is graded "no cumple" only when the holdout had 80 %
  power to detect a gain of ``min_gain`` (5 points) with a share ``s`` of changed answers (at least
  10 %). Under that alternative the trained model turns ``(s + min_gain) / 2`` of the problems from
  wrong to right and ``(s - min_gain) / 2`` from right to wrong: McNemar's discordant cells, whose sum
  is ``s`` and whose difference is the gain. It can only turn a problem from wrong to right if the base
  model got it wrong, so the alternative exists only when the base model's error share ``1 - p0`` is at
  least ``(s + min_gain) / 2``: 7.5 % at the rule's floor of 10 % (a base accuracy of at most 92.5 %).
  Above that the power statement is about a model that cannot exist, and a flat result says nothing.
  The largest gain any model could show is ``1 - p0`` (every wrong answer corrected, none lost).
- **Length growth (criterion 2, "what to watch").** A completion cannot be longer than
  ``max_completion_length``. When the mean length of the first steps already fills
  ``LENGTH_FULL_SHARE`` (80 %) of it, the mean can grow by at most a quarter, and most of the
  completions that would grow are cut at the limit (TRL logs them as clipped): a flat length curve
  then says nothing about whether the model learned to reason longer.

Pure arithmetic; ``labs.core.diagnostics`` turns it into findings and ``labs.grading.headroom`` into
sentences for the rehearsal.
"""

from __future__ import annotations

import math

# The mean length of the first steps at or above this share of max_completion_length leaves no room.
LENGTH_FULL_SHARE = 0.8


def max_gain(base_accuracy: float) -> float:
    """The largest gain in accuracy any trained model could show: every wrong answer corrected."""
    return max(0.0, 1.0 - float(base_accuracy))


def wrong_share_needed(discordant_share: float, min_gain: float) -> float:
    """Share of problems the base model must get wrong for a gain of ``min_gain`` with that many changes.

    The trained model gains ``(s + g) / 2`` of the problems (wrong to right) and loses ``(s - g) / 2``.
    """
    return (float(discordant_share) + float(min_gain)) / 2.0


def holdout_has_room(base_accuracy: float, discordant_share: float, min_gain: float) -> bool:
    """Whether the gain the rule's power statement is about can happen from this base accuracy."""
    return 1.0 - float(base_accuracy) >= wrong_share_needed(discordant_share, min_gain) - 1e-12


def highest_base_with_room(discordant_share: float, min_gain: float) -> float:
    """The highest base accuracy that still leaves room for the rule's alternative (92.5 % at 10 % and 5 points)."""
    return 1.0 - wrong_share_needed(discordant_share, min_gain)


def length_room(first_mean_length: float | None, max_completion_length) -> dict | None:
    """The numbers behind "can the mean length still grow?", or None when they are not known.

    ``first_mean_length`` is the mean of the first steps' ``completions/mean_length`` (the window the
    course's rising rule compares against); ``max_completion_length`` comes from the run's profile.
    """
    if isinstance(max_completion_length, bool) or isinstance(first_mean_length, bool):
        return None
    try:
        cap = float(max_completion_length)
        start = float(first_mean_length)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(cap) and math.isfinite(start)) or cap <= 0:
        return None
    share = start / cap
    return {
        "first_mean_length": start,
        "max_completion_length": cap,
        "share_of_max": share,
        "full_share": LENGTH_FULL_SHARE,
        "has_room": share < LENGTH_FULL_SHARE,
        "max_growth": max(0.0, cap / start - 1.0) if start > 0 else math.inf,
    }


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def no_room_sentence(evidence: dict) -> str:
    """Why a flat holdout result cannot be graded from this base accuracy, with the arithmetic (Spanish).

    ``evidence`` is a ``holdout_gain`` evidence dict (n, base_accuracy, discordant_share, min_gain).
    """
    n, base = int(evidence["n"]), float(evidence["base_accuracy"])
    share = max(float(evidence["discordant_share"]), float(evidence.get("assumed_share") or 0.0))
    gain = float(evidence["min_gain"])
    needed = wrong_share_needed(share, gain)
    wrong = round((1 - base) * n)
    return (
        f"Falta margen: el modelo base ya acertaba el {_pct(base)} y solo fallaba {wrong} de {n} problemas "
        f"({_pct(1 - base)}). La regla solo da «no cumple» si el holdout podía detectar +{gain * 100:.0f} puntos "
        f"con un {share:.0%} de respuestas que cambian, y eso exige pasar de mal a bien un "
        f"({share * 100:.0f} + {gain * 100:.0f}) / 2 = {_pct(needed)} de los problemas, más de los que el base "
        f"fallaba. La mejora máxima posible desde esa base es +{max_gain(base) * 100:.1f} puntos: un resultado "
        "plano no dice nada del entrenamiento. Para juzgarlo hace falta un modelo base con margen (el perfil "
        "rtx5090-base parte de Qwen3-4B-Base)."
    )


def length_no_room_sentence(room: dict) -> str:
    """Why a flat length curve cannot be judged when the first steps already fill the limit (Spanish)."""
    return (
        f"La longitud media ya empezaba en {room['first_mean_length']:.0f} tokens, el "
        f"{room['share_of_max']:.0%} de max_completion_length = {room['max_completion_length']:.0f} (el límite de "
        f"este criterio es el {room['full_share']:.0%}): sin margen para crecer, una longitud plana no dice si el "
        "modelo aprendió a razonar más largo. Sube max_completion_length o parte de un modelo que empiece corto "
        "(el perfil rtx5090-base)."
    )
