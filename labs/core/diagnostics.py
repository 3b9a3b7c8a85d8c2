"""What a run's own numbers say: the "what to watch" of lesson 7.5, and the reward-hacking detector.

Input is what ``labs.core.runfolder.RunFolder.metrics()`` returns, read into series by
``labs.core.metrics`` (steps merged, non-finite values skipped by every test).

Each check returns a ``Finding``: ``key`` names the statement, ``holds`` says whether it is true
(``None``: the numbers cannot tell), ``warning`` whether the student should act on it, ``message`` is one
Spanish sentence for a notebook or a report, and ``evidence`` holds the numbers behind it.

The thresholds, shared with the C2b grader (``labs/grading/RUBRIC.md`` justifies each):

- ``KL_BOUND`` = 0.5 nats per token for the rolling mean of ``kl``;
- a series "rises" by ``labs.core.stats.is_rising`` (Kendall tau > 0 with p < 0.05 on block means,
  Theil-Sen slope > 0, last 20 % mean above first 20 % mean; at least 10 logged values);
- a holdout gain is measurable when the exact McNemar p < 0.05; when it is not, the holdout was large
  enough to call that a "no" if it had 80 % power to detect ``MIN_GAIN`` (5 points), with the share of
  changed answers taken as at least ``MIN_DISCORDANT_SHARE`` (10 %); otherwise it cannot tell.
"""

from __future__ import annotations

import math

import numpy as np

from labs.core import ceiling, stats
from labs.core.spanish import plural
from labs.core.findings import LABELS, Finding, _fmt, p_text, trend_sentence  # re-exported
from labs.core.metrics import (  # re-exported: notebooks and the grader read series through here
    CORRECTNESS,
    KL,
    LENGTH,
    REWARD,
    ZERO_STD,
    Series,
    correctness_series,
    format_series,
    is_correctness_name,
    is_format_name,
    merged_rows,
    reward_function_names,
    series,
)

# The module's names, its own and those it re-exports (notebooks and the grader read them as dg.<name>).
__all__ = [
    "LABELS", "Finding", "p_text", "trend_sentence", "CORRECTNESS", "KL", "LENGTH", "REWARD", "ZERO_STD",
    "Series", "correctness_series", "format_series", "is_correctness_name", "is_format_name", "merged_rows",
    "reward_function_names", "series", "KL_BOUND", "MIN_GAIN", "MIN_DISCORDANT_SHARE", "ZERO_STD_ALARM",
    "rising", "length_rising", "kl_bounded", "holdout_gain", "arithmetic_comparison", "holdout_pair_sentence",
    "detect_format_hacking", "zero_std_groups", "what_to_watch",
]

KL_BOUND = 0.5
MIN_GAIN = 0.05
MIN_DISCORDANT_SHARE = 0.10
ZERO_STD_ALARM = 0.9  # last-window share of groups whose rewards are all equal


# --------------------------------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------------------------------


def rising(s: Series | None, key: str | None = None, label: str | None = None, alpha: float = stats.ALPHA) -> Finding:
    """Whether ``s`` rose in a sustained way (``labs.core.stats.is_rising``), as a Finding."""
    key = key or f"rising:{s.key if s is not None else '?'}"
    label = label or (LABELS.get(s.key, s.key) if s is not None else "la serie")
    if s is None:
        return Finding(key, None, f"No se puede saber si {label} sube: la métrica no aparece en el registro.")
    t = stats.trend(s.values, s.steps)
    verdict = stats.is_rising(t, alpha)
    if verdict is None:
        return Finding(
            key,
            None,
            f"No se puede saber si {label} sube: solo hay {t['n']} valores registrados y hacen falta al "
            f"menos {stats.MIN_TREND_POINTS}.",
            evidence=t,
        )
    if verdict:
        return Finding(key, True, f"{label.capitalize()} subió de forma sostenida: {trend_sentence(t)}.", evidence=t)
    return Finding(
        key, False, f"{label.capitalize()} no subió de forma sostenida: {trend_sentence(t)}.", warning=True, evidence=t
    )


def length_rising(metrics, max_completion_length=None) -> Finding:
    """``rising`` for the mean length, "cannot tell" when the first steps leave it no room to grow.

    A rise is a rise wherever it starts; a flat curve whose first steps already fill
    ``labs.core.ceiling.LENGTH_FULL_SHARE`` of ``max_completion_length`` says nothing (None).
    """
    finding = rising(series(metrics, LENGTH), key="length_rising")
    room = ceiling.length_room(finding.evidence.get("first_mean"), max_completion_length)
    if finding.holds is False and room is not None and not room["has_room"]:
        evidence = {**finding.evidence, "length_room": room}
        return Finding(finding.key, None, f"{finding.message} {ceiling.length_no_room_sentence(room)}", evidence=evidence)
    return finding


def kl_bounded(metrics, bound: float = KL_BOUND) -> Finding:
    """Whether the KL stayed under ``bound`` (rolling mean over blocks of steps) and was always finite."""
    s = series(metrics, KL)
    key = "kl_bounded"
    if s is None:
        return Finding(
            key,
            None,
            "No se puede saber si la KL quedó acotada: 'kl' no aparece en el registro (TRL no la registra "
            "cuando beta = 0).",
        )
    if s.bad_steps:
        bad = s.bad_steps
        return Finding(
            key,
            False,
            f"La KL no quedó acotada: vale NaN, infinito o falta en {len(bad)} pasos (el primero, el "
            f"{bad[0]}).",
            warning=True,
            evidence={"bad_steps": bad[:20], "bound": bound},
        )
    if s.n_finite == 0:
        return Finding(key, None, "No se puede saber si la KL quedó acotada: no hay valores de 'kl'.")
    window = stats.block_size(s.n_finite)
    rolled = stats.smooth(s.values, "rolling", window=window)
    peak_index = int(np.nanargmax(rolled))
    evidence = {
        "bound": bound,
        "window": window,
        "max_smoothed": float(rolled[peak_index]),
        "max_smoothed_step": int(s.steps[peak_index]),
        "max_raw": float(np.nanmax(s.values)),
        "last": float(s.values[np.isfinite(s.values)][-1]),
    }
    what = "su valor" if window == 1 else f"su media móvil ({window} pasos)"
    if evidence["max_smoothed"] <= bound:
        return Finding(
            key,
            True,
            f"La KL quedó acotada: {what} llegó como mucho a {_fmt(evidence['max_smoothed'])}, por debajo del "
            f"límite {bound}.",
            evidence=evidence,
        )
    return Finding(
        key,
        False,
        f"La KL se disparó: {what} llegó a {_fmt(evidence['max_smoothed'])} en el "
        f"paso {evidence['max_smoothed_step']}, por encima del límite {bound}. Baja el learning rate o sube beta.",
        warning=True,
        evidence=evidence,
    )


def holdout_gain(summary: dict | None, alpha: float = stats.ALPHA) -> Finding:
    """Whether the trained model beat the base model on the holdout, from a ``paired_comparison`` dict.

    True: p < alpha and the difference is positive. False: p < alpha and it is negative, or the
    holdout had 80 % power to detect ``MIN_GAIN`` and did not. None: too few problems to tell.
    """
    key = "holdout_gain"
    if not isinstance(summary, dict):
        return Finding(key, None, "No se puede saber si mejoró la precisión: no hay evaluación en el holdout.")
    try:
        n = int(summary["n"])
        diff = float(summary["difference"])
        p = float(summary["mcnemar_p"])
        gained = int(summary["base_wrong_trained_right"])
        lost = int(summary["base_right_trained_wrong"])
        base_acc = float(summary["base_accuracy"])
        trained_acc = float(summary["trained_accuracy"])
        low, high = (float(v) for v in summary["ci95"])
    except (KeyError, TypeError, ValueError):
        return Finding(key, None, "No se puede saber si mejoró la precisión: el resumen de la evaluación está incompleto.")
    values = (diff, p, base_acc, trained_acc, low, high)
    if n <= 0 or not all(math.isfinite(v) for v in values):
        return Finding(key, None, "No se puede saber si mejoró la precisión: el resumen tiene valores no válidos.")
    share = (gained + lost) / n
    assumed_share = max(share, MIN_DISCORDANT_SHARE)
    needed = stats.mcnemar_sample_size(assumed_share, MIN_GAIN, alpha=alpha)
    detectable = stats.mcnemar_detectable_difference(n, assumed_share, alpha=alpha)
    evidence = {
        "n": n,
        "base_accuracy": base_acc,
        "trained_accuracy": trained_acc,
        "difference": diff,
        "ci95": [low, high],
        "base_wrong_trained_right": gained,
        "base_right_trained_wrong": lost,
        "mcnemar_p": p,
        "discordant_share": share,
        "n_needed": needed,
        "detectable_difference": detectable,
        "min_gain": MIN_GAIN,
        "assumed_share": assumed_share,
        "max_gain": ceiling.max_gain(base_acc),
        "wrong_share_needed": ceiling.wrong_share_needed(assumed_share, MIN_GAIN),
    }
    numbers = (
        f"precisión base {base_acc:.1%} y entrenado {trained_acc:.1%} en {n} problemas, diferencia "
        f"{diff * 100:+.1f} puntos (IC 95 % {low * 100:+.1f} a {high * 100:+.1f}), {plural(gained, 'problema ganado', 'problemas ganados')} y "
        f"{plural(lost, 'perdido')}, McNemar exacto {p_text(p)}"
    )
    if p < alpha and diff > 0:
        return Finding(key, True, f"La precisión en el holdout mejoró de forma medible: {numbers}.", evidence=evidence)
    if p < alpha:
        return Finding(key, False, f"La precisión en el holdout empeoró de forma medible: {numbers}.", warning=True, evidence=evidence)
    if n >= needed and not ceiling.holdout_has_room(base_acc, assumed_share, MIN_GAIN):
        return Finding(key, None, f"No se puede saber si mejoró la precisión: {numbers}. {ceiling.no_room_sentence(evidence)}", evidence=evidence)
    if n >= needed:
        return Finding(
            key,
            False,
            f"No hay mejora medible en el holdout: {numbers}. Con {n} problemas la prueba tenía un 80 % de "
            f"potencia para detectar +{MIN_GAIN * 100:.0f} puntos (bastaban {needed}) y no la encuentra.",
            warning=True,
            evidence=evidence,
        )
    return Finding(
        key,
        None,
        f"No se puede saber si mejoró la precisión: {numbers}. Con {n} problemas solo se detectarían de forma "
        f"fiable mejoras de unos {detectable * 100:.0f} puntos; para +{MIN_GAIN * 100:.0f} puntos hacen falta "
        f"unos {needed} problemas.",
        evidence=evidence,
    )


def arithmetic_comparison(summary: dict | None) -> dict | None:
    """The holdout comparison on the format-independent reading (``correct_last_number``), if recorded.

    ``eval/summary.json`` and the grader's recomputed comparison carry it under ``"last_number"``; without
    it (an older run) the tag-gated comparison itself is returned.
    """
    if not isinstance(summary, dict):
        return None
    last = summary.get("last_number")
    return last if isinstance(last, dict) else summary


def holdout_pair_sentence(summary: dict | None) -> str:
    """Format against arithmetic on the holdout, base -> trained, in one Spanish sentence ("" if unknown)."""
    if not isinstance(summary, dict):
        return ""
    last = summary.get("last_number")
    last = last if isinstance(last, dict) else {}
    parts = []
    for label, first, second in (
        ("el formato pedido", summary.get("base_format_rate"), summary.get("trained_format_rate")),
        ("los aciertos dentro de <answer>", summary.get("base_accuracy"), summary.get("trained_accuracy")),
        ("los aciertos leyendo el último número (la aritmética, con o sin formato)", last.get("base_accuracy"), last.get("trained_accuracy")),
    ):
        if isinstance(first, (int, float)) and isinstance(second, (int, float)):
            parts.append(f"{label} pasó de {first:.0%} a {second:.0%}")
    return ("En el holdout, " + "; ".join(parts) + ".") if parts else ""


def detect_format_hacking(metrics, eval_summary: dict | None = None) -> Finding:
    """The E2 pattern: the format reward rises while correctness does not.

    ``holds`` is True when the pattern is there. Correctness comes from the logged correctness reward;
    a measurable gain on the holdout rules the pattern out even when that reward is flat (a model near
    the ceiling). When the run logs no correctness (E2 drops it), the holdout decides: a measurable
    gain rules the pattern out, a measured lack of gain confirms it, and without a conclusive
    evaluation it cannot tell. The holdout gain is read on ``correct_last_number`` when the summary
    has it (``arithmetic_comparison``): answers that only became readable inside ``<answer>`` raise the
    tag-gated accuracy without any arithmetic learned, and must not rule the pattern out. The
    messages put format and both accuracies side by side (``holdout_pair_sentence``).
    """
    pair = holdout_pair_sentence(eval_summary)
    pair = f" {pair}" if pair else ""
    arithmetic = arithmetic_comparison(eval_summary)
    key = "format_hacking"
    fmt = format_series(metrics)
    if fmt is None:
        return Finding(key, None, "No se puede comprobar el hacking de formato: no hay ninguna recompensa de formato en el registro.")
    fmt_rise = rising(fmt, key="format_rising")
    evidence = {"format": fmt_rise.evidence}
    if fmt_rise.holds is None:
        return Finding(key, None, f"No se puede comprobar el hacking de formato: {fmt_rise.message}", evidence=evidence)
    if not fmt_rise.holds:
        return Finding(key, False, "No hay hacking de formato: la recompensa de formato no subió de forma sostenida.", evidence=evidence)
    corr = correctness_series(metrics)
    if corr is not None:
        corr_rise = rising(corr, key="correctness_rising")
        evidence["correctness"] = corr_rise.evidence
        if corr_rise.holds is None:
            return Finding(key, None, f"No se puede comprobar el hacking de formato: {corr_rise.message}", evidence=evidence)
        if corr_rise.holds:
            return Finding(
                key, False, "No hay hacking de formato: la recompensa de formato subió, pero la de corrección también.", evidence=evidence
            )
        gain = holdout_gain(arithmetic)
        if gain.holds:  # e.g. a model near the ceiling: the logged correctness cannot rise much
            evidence["holdout"] = gain.evidence
            return Finding(
                key,
                False,
                "No hay hacking de formato: la recompensa de corrección registrada no subió, pero la precisión en "
                "el holdout mejoró de forma medible.",
                evidence=evidence,
            )
        return Finding(
            key,
            True,
            "Posible hacking de formato: la recompensa de formato subió de forma sostenida "
            f"({trend_sentence(fmt_rise.evidence)}) y la de corrección no ({trend_sentence(corr_rise.evidence)}).{pair} "
            "Baja el peso del formato o enseña el formato antes con una pasada supervisada.",
            warning=True,
            evidence=evidence,
        )
    gain = holdout_gain(arithmetic)
    evidence["holdout"] = gain.evidence
    if gain.holds is None:
        return Finding(
            key,
            None,
            "La recompensa de formato subió y el entrenamiento no registra la corrección; no se puede saber si "
            f"es hacking de formato sin una evaluación concluyente en el holdout.{pair} {gain.message}",
            evidence=evidence,
        )
    if gain.holds:
        return Finding(key, False, f"No hay hacking de formato: la recompensa de formato subió y además {gain.message[0].lower()}{gain.message[1:]}", evidence=evidence)
    return Finding(
        key,
        True,
        "Hacking de formato: la recompensa de formato subió de forma sostenida y la precisión en el holdout no "
        f"mejoró.{pair} {gain.message}",
        warning=True,
        evidence=evidence,
    )


def zero_std_groups(metrics) -> Finding:
    """Whether most groups ended with identical rewards (no advantage, nothing to learn from)."""
    key = "zero_std_groups"
    s = series(metrics, ZERO_STD)
    if s is None or s.n_finite == 0:
        return Finding(key, None, "No se registró 'frac_reward_zero_std'.")
    t = stats.trend(s.values, s.steps, min_points=1)
    last = t["last_mean"]
    evidence = {"last_mean": last, "alarm": ZERO_STD_ALARM, "edge": t["edge"]}
    if last >= ZERO_STD_ALARM:
        return Finding(
            key,
            True,
            f"Al final, en el {last:.0%} de los grupos todas las respuestas tuvieron la misma recompensa: "
            "esos grupos no aportan señal (ventaja 0). Si es al principio, enseña el formato antes; si es al "
            "final, el modelo ya resuelve (o falla) todo igual.",
            warning=True,
            evidence=evidence,
        )
    return Finding(key, False, f"Al final, el {last:.0%} de los grupos no tuvo variación de recompensa; el resto aporta señal.", evidence=evidence)


def what_to_watch(metrics, eval_summary: dict | None = None, max_completion_length=None) -> list[Finding]:
    """Lesson 7.5's checks, in order, computed from the run's own numbers (Spanish messages).

    ``max_completion_length`` (the run's profile) lets the length check say when it had no room to grow.
    """
    findings = [
        rising(series(metrics, REWARD), key="reward_rising"),
        length_rising(metrics, max_completion_length),
        rising(correctness_series(metrics), key="correctness_rising", label=LABELS[CORRECTNESS]),
        kl_bounded(metrics),
        detect_format_hacking(metrics, eval_summary),
        zero_std_groups(metrics),
    ]
    if eval_summary is not None:
        findings.append(holdout_gain(eval_summary))
    return findings
