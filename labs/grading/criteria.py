"""The four C2b criteria, each computed from a run folder's data into a ``Criterion``.

Verdicts: ``CUMPLE``, ``NO_CUMPLE``, ``NO_SE_PUEDE`` ("no se puede determinar"), and for criterion 4,
which only a person can judge, ``MANUAL``. A criterion made of several checks is "no cumple" if any
check fails, otherwise "no se puede determinar" if any check cannot tell, otherwise "cumple".
Thresholds come from ``labs.core.diagnostics`` and ``labs.core.stats``; RUBRIC.md justifies them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from labs.core import ceiling
from labs.core import diagnostics as dg
from labs.core import runfolder as rf
from labs.core import stats
from labs.core.spanish import plural
from rewards import REWARD_NAMES

from .holdout import ID_PREFIX, Holdout, check_holdout
from .inputs import RunData, find_value, reward_functions
from .written import ANSWER_TEMPLATE, PLACEHOLDER, Written, written_answer  # noqa: F401  (PLACEHOLDER: cr.PLACEHOLDER)

CUMPLE = "cumple"
NO_CUMPLE = "no cumple"
NO_SE_PUEDE = "no se puede determinar"
MANUAL = "revisión manual"

COURSE_REWARDS = REWARD_NAMES  # the lesson's three functions; level 4 needs others
CORE_KEYS = ("loss", dg.REWARD, dg.KL, "grad_norm", dg.LENGTH)

FAILURE_TEXT = {
    "oom": "se quedó sin memoria (OOM)",
    "nan": "produjo valores NaN",
    "disk": "se quedó sin disco",
    "interrupted": "se interrumpió",
    "error": "falló con un error",
}


@dataclass
class Criterion:
    number: int
    title: str
    verdict: str
    threshold: str
    reasons: list[str] = field(default_factory=list)  # why this verdict, in Spanish
    evidence: list[str] = field(default_factory=list)  # the numbers, in Spanish
    notes: list[str] = field(default_factory=list)  # warnings that did not decide the verdict
    values: dict = field(default_factory=dict)  # numbers for the class CSV


def combine(checks: list[bool | None]) -> str:
    if any(c is False for c in checks):
        return NO_CUMPLE
    if not checks or any(c is None for c in checks):
        return NO_SE_PUEDE
    return CUMPLE


def _add(c: Criterion, finding: dg.Finding, checks: list) -> None:
    checks.append(finding.holds)
    (c.evidence if finding.holds else c.reasons).append(finding.message)


# --------------------------------------------------------------------------------------------------
# 1. stable training
# --------------------------------------------------------------------------------------------------


def _status_check(data: RunData, c: Criterion) -> bool | None:
    status = data.status
    if status is None:
        c.reasons.extend(data.problems_for("status") or [f"No se puede evaluar si el entrenamiento terminó porque falta {rf.STATUS_JSON}."])
        return None
    state, step, max_steps = status["state"], status["step"], status["max_steps"]
    c.values.update(state=state, step=step, max_steps=max_steps, kind=status.get("kind"))
    if state == rf.STATE_FINISHED and step >= max_steps:
        c.evidence.append(f"{rf.STATUS_JSON}: terminado ('finished') en el paso {step} de {max_steps}.")
        if max_steps < stats.MIN_TREND_POINTS:
            c.reasons.append(
                f"No se puede evaluar la estabilidad porque la ejecución solo tiene {max_steps} pasos; hacen falta al menos "
                f"{stats.MIN_TREND_POINTS} para juzgarla (C2b pide la receta completa)."
            )
            return None
        return True
    if state == rf.STATE_FINISHED:
        c.reasons.append(f"El entrenamiento dice 'finished' pero se detuvo en el paso {step} de {max_steps}.")
        return False
    if state == rf.STATE_FAILED:
        kind = str(status.get("kind") or "error")
        what = FAILURE_TEXT.get(kind, f"falló ({kind[:40]})")
        detail = str(status.get("message_es") or status.get("message") or status.get("error") or "")[:300]
        c.reasons.append(f"El entrenamiento {what} en el paso {step} de {max_steps}." + (f" Mensaje: {detail}" if detail else ""))
        return False
    c.reasons.append(
        f"El entrenamiento no terminó: {rf.STATUS_JSON} sigue en 'running' en el paso {step} de {max_steps} "
        "(o sigue en marcha, o el proceso murió sin poder registrarlo)."
    )
    return False


def _nan_check(data: RunData, c: Criterion) -> bool | None:
    bad = []
    for key in CORE_KEYS:
        s = dg.series(data.metrics, key)
        if s is not None and s.bad_steps:
            bad.append(f"'{key}' en {plural(len(s.bad_steps), 'paso')} (el primero, el {s.bad_steps[0]})")
    if bad:
        c.reasons.append("Hay valores NaN, infinitos o vacíos en las métricas: " + "; ".join(bad) + ".")
        return False
    c.evidence.append(f"Sin NaN ni infinitos en {', '.join(CORE_KEYS)} ({len(dg.merged_rows(data.metrics))} pasos registrados).")
    return True


def stability(data: RunData) -> Criterion:
    c = Criterion(
        1,
        "Entrenamiento estable",
        NO_SE_PUEDE,
        threshold=(
            f"{rf.STATUS_JSON} en 'finished' con step ≥ max_steps (y al menos {stats.MIN_TREND_POINTS} pasos); ni OOM ni NaN; "
            f"sin valores NaN/infinitos en {', '.join(CORE_KEYS)}; KL acotada: la media móvil de 'kl' (bloques de "
            f"~1/{stats.TREND_BLOCKS} de los pasos) nunca supera {dg.KL_BOUND} nats por token."
        ),
    )
    checks = [_status_check(data, c)]
    if not data.metrics:
        c.reasons.extend(data.problems_for("metrics") or [f"No se puede evaluar NaN ni KL porque {rf.METRICS_JSONL} está vacío."])
        checks.append(None)
    else:
        c.notes.extend(data.problems_for("metrics"))
        checks.append(_nan_check(data, c))
        kl = dg.kl_bounded(data.metrics)
        if kl.holds is None:
            beta = find_value(data.run, "beta")
            if beta == 0:
                kl = dg.Finding(kl.key, None, "No se puede evaluar la KL porque run.json dice beta = 0: sin término KL, TRL no la registra.")
        _add(c, kl, checks)
        c.values["kl_max_smoothed"] = kl.evidence.get("max_smoothed")
    c.verdict = combine(checks)
    return c


# --------------------------------------------------------------------------------------------------
# 2. reward and length rising
# --------------------------------------------------------------------------------------------------


def curves(data: RunData) -> Criterion:
    c = Criterion(
        2,
        "Recompensa y longitud media suben de forma sostenida",
        NO_SE_PUEDE,
        threshold=(
            f"Para 'reward' y '{dg.LENGTH}': tau de Kendall > 0 con p < {stats.ALPHA} sobre medias de bloques sin solapar "
            f"(unas {stats.TREND_BLOCKS}), pendiente de Theil-Sen > 0, y media del último {int(stats.EDGE_FRACTION * 100)} % de "
            f"pasos mayor que la del primero; al menos {stats.MIN_TREND_POINTS} pasos registrados."
        ),
    )
    c.threshold += (
        f" Si la longitud no sube y la media de los primeros pasos ya llenaba el {ceiling.LENGTH_FULL_SHARE:.0%} de "
        "max_completion_length, no se puede determinar: no tenía margen para crecer."
    )
    if not data.metrics:
        c.reasons.extend(data.problems_for("metrics") or [f"No se pueden evaluar las curvas porque {rf.METRICS_JSONL} está vacío."])
        return c
    checks: list = []
    for key, label in ((dg.REWARD, dg.LABELS[dg.REWARD]), (dg.LENGTH, dg.LABELS[dg.LENGTH])):
        if key == dg.LENGTH:  # a curve that starts at the completion limit has no room to rise
            finding = dg.length_rising(data.metrics, find_value(data.run, "max_completion_length"))
        else:
            finding = dg.rising(dg.series(data.metrics, key), key=key, label=label)
        _add(c, finding, checks)
        t = finding.evidence
        short = "reward" if key == dg.REWARD else "length"
        c.values.update({f"{short}_tau": t.get("tau"), f"{short}_p": t.get("p_value"), f"{short}_first": t.get("first_mean"), f"{short}_last": t.get("last_mean")})
    corr = dg.rising(dg.correctness_series(data.metrics), key="correctness", label=dg.LABELS[dg.CORRECTNESS])
    c.notes.append(f"(Informativo) {corr.message}")
    c.verdict = combine(checks)
    return c


# --------------------------------------------------------------------------------------------------
# 3. holdout gain
# --------------------------------------------------------------------------------------------------


def holdout(data: RunData, checked: Holdout | None = None) -> Criterion:
    c = Criterion(
        3,
        "Mejora medible de corrección en el holdout (GSM8K test)",
        NO_SE_PUEDE,
        threshold=(
            f"Se califica el campo 'correct' de {rf.EVAL_BASE} y {rf.EVAL_TRAINED}: el número dentro del único bloque <answer>, "
            "lo que paga la recompensa de corrección y pide la receta (responder en el formato, y bien). 'correct_last_number' "
            "(el último número, sin exigir formato) no decide este criterio: lo usa el detector de hacking de formato. "
            f"Mismos problemas de GSM8K test (ids '{ID_PREFIX}…') para el modelo base y el entrenado. Cumple si la diferencia es "
            f"positiva y McNemar exacto da p < {stats.ALPHA}. No cumple si empeora con p < {stats.ALPHA}, o si no es significativa "
            f"y el holdout tenía un 80 % de potencia para detectar +{dg.MIN_GAIN * 100:.0f} puntos (con al menos un "
            f"{dg.MIN_DISCORDANT_SHARE:.0%} de respuestas que cambian). Con menos problemas: no se puede determinar."
        ),
    )
    best = ceiling.highest_base_with_room(dg.MIN_DISCORDANT_SHARE, dg.MIN_GAIN)
    c.threshold += (
        f" Margen: ese «no cumple» exige que el modelo base falle al menos (cambios + {dg.MIN_GAIN * 100:.0f} puntos) / 2 "
        f"de los problemas (el {(1 - best) * 100:.1f} % con un {dg.MIN_DISCORDANT_SHARE:.0%} de cambios, es decir, precisión "
        f"base como mucho del {best * 100:.1f} %); con menos margen, un resultado plano no se puede determinar."
    )
    checked = checked or check_holdout(data)
    c.notes.extend(checked.notes)
    if checked.comparison is None:
        c.reasons.extend(checked.problems)
        return c
    finding = dg.holdout_gain(checked.comparison)
    (c.evidence if finding.holds else c.reasons).append(finding.message)
    comp = checked.comparison
    c.values.update(
        n=comp["n"],
        base_accuracy=comp["base_accuracy"],
        trained_accuracy=comp["trained_accuracy"],
        difference=comp["difference"],
        ci_low=comp["ci95"][0],
        ci_high=comp["ci95"][1],
        mcnemar_p=comp["mcnemar_p"],
        gained=comp["base_wrong_trained_right"],
        lost=comp["base_right_trained_wrong"],
    )
    c.verdict = combine([finding.holds])
    return c


# --------------------------------------------------------------------------------------------------
# 4. explanations (manual)
# --------------------------------------------------------------------------------------------------

ANSWER_TAGS = {
    "c2b-respuesta-funciones": "Explica cada función de recompensa: qué premia, cuánto y por qué.",
    "c2b-respuesta-separacion": "¿Por qué la corrección va separada del formato (y con más peso)? ¿Qué hacking evita?",
    "c2b-respuesta-hack": "(Nivel 4) ¿Qué reward hacking concreto evitan tus funciones propias y qué ejecución lo demuestra?",
}


def all_reward_names(data: RunData) -> list[tuple[str, float | None]]:
    """Reward functions from run.json, plus any that only the metrics name."""
    names = reward_functions(data.run)
    known = {n for n, _ in names}
    names += [(n, None) for n in dg.reward_function_names(data.metrics) if n not in known]
    return names


def notebook_answers(notebook: dict | None) -> dict[str, Written]:
    """The student's written answers by tag: their own text, or why there is none (``written.written_answer``:
    the template, even partly replaced, is not an answer)."""
    return {tag: written_answer(notebook, tag, ANSWER_TEMPLATE) for tag in ANSWER_TAGS}


def own_source_lines(run: dict | None) -> list[str]:
    """The student's own reward functions as run.json records them (file and SHA-256 of the source)."""
    sources = run.get("reward_sources") if isinstance(run, dict) else None
    lines = []
    for r in sources[:20] if isinstance(sources, list) else []:
        if not (isinstance(r, dict) and r.get("own") is True and isinstance(r.get("name"), str)):
            continue
        digest = r.get("source_sha256")
        digest = digest[:12] if isinstance(digest, str) and digest.isalnum() else "n/d"
        file = str(r.get("file") or "").replace("\\", "/").rsplit("/", 1)[-1][:80] or "n/d"
        lines.append(f"Función propia {r['name'][:100]}: archivo {file}, SHA-256 del código {digest}… (el código está en run.json).")
    return lines


def explanations(data: RunData, notebook: dict | None = None) -> Criterion:
    c = Criterion(
        4,
        "Explicaciones",
        MANUAL,
        threshold="Lo valora el instructor: explica cada función de recompensa y por qué la corrección va separada del formato.",
    )
    names = all_reward_names(data)
    if names:
        listed = ", ".join(f"{n} (peso {w:g})" if w is not None else n for n, w in names)
        c.evidence.append(f"Funciones de recompensa de la ejecución: {listed}.")
    else:
        c.reasons.append("No se puede listar las funciones de recompensa porque ni run.json ni las métricas las nombran.")
    c.values["reward_functions"] = [n for n, _ in names]
    c.evidence.extend(own_source_lines(data.run))
    c.values["answers"] = notebook_answers(notebook)
    if notebook is None:
        c.reasons.append("No se encontró el notebook C2b_rubrica.ipynb en la entrega: pide las explicaciones por escrito.")
    return c
