"""What criterion 3 could detect from a measured base accuracy, and which 5090 profile to train.

The rehearsal measures the base model's accuracy on a sample of the holdout before the long run;
these functions turn that number into a Spanish sentence and a recommendation. Pure functions: the
rule is criterion 3's (``labs.core.diagnostics.holdout_gain``: exact McNemar test, a flat result is
"no cumple" only when the holdout had 80 % power to detect ``MIN_GAIN`` with at least
``MIN_DISCORDANT_SHARE`` of answers changing) and its headroom condition (``labs.core.ceiling``: the
base model must get at least ``(share + MIN_GAIN) / 2`` of the problems wrong).

- ``headroom(p0, n)``: the numbers (largest possible gain, smallest detectable gain, whether a flat
  result can be graded);
- ``describe_headroom_es(p0, n, measured_on=None)``: the same in Spanish;
- ``recommend_profile(p0_tagged, p0_last_number)``: ``("rtx5090", why)`` while the lesson's instruct
  model has room to improve its arithmetic on the holdout, ``("rtx5090-base", why)`` otherwise.
"""

from __future__ import annotations

import math

from labs.core import ceiling, stats
from labs.core.diagnostics import MIN_DISCORDANT_SHARE, MIN_GAIN

INSTRUCT_PROFILE = "rtx5090"
BASE_PROFILE = "rtx5090-base"


def _check(p: float, what: str) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 0 <= p <= 1:
        raise ValueError(f"{what} debe ser una proporción entre 0 y 1 (por ejemplo 0.82), no {p!r}.")
    return float(p)


def headroom(p0: float, n: int, *, alpha: float = stats.ALPHA) -> dict:
    """Criterion 3's arithmetic for a base accuracy ``p0`` on a holdout of ``n`` problems.

    Keys: ``max_gain`` (1 - p0), ``detectable_gain`` (smallest gain detected with 80 % power when the
    rule's minimum share of answers changes), ``n_needed`` (problems for 80 % power at ``MIN_GAIN``),
    ``wrong_share_needed`` and ``highest_base_with_room`` (the headroom condition), ``room`` (the base
    leaves room for the rule's alternative), ``flat_gradable`` (a flat result can be "no cumple").
    """
    p0 = _check(p0, "La precisión base")
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError(f"El tamaño del holdout debe ser un entero positivo, no {n!r}.")
    share = MIN_DISCORDANT_SHARE
    needed = stats.mcnemar_sample_size(share, MIN_GAIN, alpha=alpha)
    room = ceiling.holdout_has_room(p0, share, MIN_GAIN)
    return {
        "p0": p0,
        "n": n,
        "max_gain": ceiling.max_gain(p0),
        "detectable_gain": stats.mcnemar_detectable_difference(n, share, alpha=alpha),
        "n_needed": needed,
        "discordant_share": share,
        "min_gain": MIN_GAIN,
        "wrong_share_needed": ceiling.wrong_share_needed(share, MIN_GAIN),
        "highest_base_with_room": ceiling.highest_base_with_room(share, MIN_GAIN),
        "room": room,
        "flat_gradable": room and n >= needed,
    }


def _points(x: float) -> str:
    return f"{x * 100:.1f}"


def _wilson(p: float, n: int, z: float = 1.96) -> tuple[float, float]:
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def describe_headroom_es(p0: float, n: int, *, measured_on: int | None = None) -> str:
    """What criterion 3 could detect from a base accuracy ``p0`` on a holdout of ``n`` problems (Spanish).

    ``n`` is the holdout of the full run (the profile's ``eval_size``); ``measured_on``, when given, is the
    number of problems ``p0`` was measured on (the rehearsal's sample), to quote its 95 % interval.
    """
    h = headroom(p0, n)
    text = f"Precisión base: {_points(h['p0'])} %"
    if measured_on:
        low, high = _wilson(h["p0"], int(measured_on))
        text += f" (medida en {measured_on} problemas; IC 95 % {_points(low)}-{_points(high)} %)"
    text += (
        f". Mejora máxima posible: +{_points(h['max_gain'])} puntos (todos los fallos corregidos). Con {n} problemas "
        f"de holdout, el criterio 3 detecta con un 80 % de potencia mejoras de unos +{_points(h['detectable_gain'])} "
        f"puntos (si cambia un {h['discordant_share']:.0%} de las respuestas; con más cambios hace falta más)."
    )
    if h["max_gain"] < h["detectable_gain"]:
        text += (
            " Ni corrigiendo todos los fallos se llegaría a esa mejora: lo más probable es que el criterio 3 quede en "
            "«no se puede determinar» por falta de margen, no por culpa del entrenamiento."
        )
    elif not h["room"]:
        text += (
            f" Una mejora así daría «cumple», pero un resultado plano no podrá ser «no cumple»: el base falla menos del "
            f"{_points(h['wrong_share_needed'])} % que exige la regla (precisión base como mucho del "
            f"{_points(h['highest_base_with_room'])} %), así que quedaría en «no se puede determinar» por falta de margen."
        )
    elif not h["flat_gradable"]:
        text += (
            f" Hay margen, pero el holdout es pequeño: un resultado plano quedaría en «no se puede determinar» (para "
            f"+{MIN_GAIN * 100:.0f} puntos hacen falta unos {h['n_needed']} problemas)."
        )
    else:
        text += (
            f" Hay margen: una mejora así da «cumple», y un resultado plano, «no cumple» (el holdout podía detectar "
            f"+{MIN_GAIN * 100:.0f} puntos)."
        )
    return text


def recommend_profile(p0_tagged: float, p0_last_number: float | None = None) -> tuple[str, str]:
    """``(profile name, reason in Spanish)``: the lesson's instruct model, or the base-model profile.

    ``p0_tagged`` is the base model's accuracy counted inside ``<answer>`` (what the rewards see);
    ``p0_last_number`` the accuracy of the last number of the completion (arithmetic without format),
    None when it was not measured. The arithmetic decides: when the instruct model already solves
    nearly every problem, GRPO can only teach it the format, and criterion 3 cannot grade a flat
    result. The rule's own headroom condition (``labs.core.ceiling``) is the threshold.
    """
    tagged = _check(p0_tagged, "La precisión con etiquetas")
    arithmetic = tagged if p0_last_number is None else max(tagged, _check(p0_last_number, "La precisión del último número"))
    best = ceiling.highest_base_with_room(MIN_DISCORDANT_SHARE, MIN_GAIN)
    what = "con etiquetas" if p0_last_number is None else f"del último número; con etiquetas, {_points(tagged)} %"
    if arithmetic > best + 1e-12:
        return BASE_PROFILE, (
            f"El modelo de la lección ya resuelve el {_points(arithmetic)} % de los problemas (precisión {what}): "
            f"más del {_points(best)} % con el que el criterio 3 aún puede juzgar una mejora de "
            f"+{MIN_GAIN * 100:.0f} puntos. Lo que GRPO le enseñe será sobre todo formato, y la longitud de un modelo "
            f"instruct que ya razona apenas tiene por qué crecer. Para ver el fenómeno (precisión y longitud que suben), "
            f"entrena el perfil {BASE_PROFILE}: Qwen3-4B-Base con el pase de formato, la receta de Unsloth."
        )
    return INSTRUCT_PROFILE, (
        f"El modelo de la lección resuelve el {_points(arithmetic)} % de los problemas (precisión {what}): queda "
        f"margen para que el criterio 3 mida una mejora (la regla lo admite hasta el {_points(best)} %). Sigue con el "
        f"perfil {INSTRUCT_PROFILE}. Si además quieres ver crecer la longitud de las respuestas (el «aha» de R1-Zero, "
        f"que partía de un modelo base), el perfil {BASE_PROFILE} lo muestra mejor."
    )
