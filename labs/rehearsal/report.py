"""The rehearsal's verdicts and its Spanish page (``informe.md``), from ``rehearsal.json`` alone."""

from __future__ import annotations

from labs.core.profiles import Profile
from labs.training import recipe

# Exceptions whose text is already the labs' Spanish message with its fix.
OWN_MESSAGES = {"EnvironmentNotReady", "PreflightError", "LoraNotLoaded", "UnslothLoadFailed", "ImportOrderError",
                "BackendUnavailable", "ProfileError", "DataError", "ModelNotAvailable"}

CHECK_LABELS = {
    "engine_uses_trained_weights": "El motor de generación usa los pesos entrenados",
    "adapter_changes_model": "El adaptador LoRA cambia el modelo",
    "trained_eval_through_lora_request": "La evaluación del modelo entrenado pasa por lora_request",
    "rewards_see_reasoning": "Las recompensas ven <think>…</think> tal como TRL decodifica",
}

NOT_CHECKED_ON_CPU = (
    "La ruta GPU de L7.2: Unsloth con Standby, el modelo en 4 bits dentro de vLLM (vllm-bnb-plugin) y la "
    "evaluación del entrenado a través de lora_request. En CPU, L7.2 corre con transformers + PEFT.",
    "Los kernels CUDA de torch y de vLLM, el controlador NVIDIA y el CUDA 13 del entorno de GPU.",
    "El modelo real (Qwen3-4B-Instruct-2507) en bf16: aquí es SmolLM2-135M con sus pesos en float32.",
    "La memoria de la GPU: aquí se mide la RAM (pico de memoria residente) y la fracción de vLLM es de la RAM.",
    "Las horas y el disco estimados son los de este perfil en esta máquina, no los de una RTX 5090.",
)
NOT_CHECKED_ALWAYS = (
    "Si el modelo aprende: 2-3 pasos no dicen si las curvas subirán (eso lo dice el run completo).",
    "Respuestas largas: el ensayo corta las respuestas de entrenamiento; con max_completion_length completo "
    "el pico de memoria puede ser mayor (compáralo con el plan de `python -m labs vram`).",
)


def classify(exc: BaseException, profile: Profile) -> dict:
    """The labs' classification (OOM, plugin, driver, hub, disk, ...) and its Spanish message."""
    cause = exc.__cause__ if isinstance(exc, recipe.RunFailed) and exc.__cause__ is not None else exc
    failure = recipe.classify_failure(cause, profile)
    own = type(exc).__name__ in OWN_MESSAGES or isinstance(exc, recipe.RunFailed)
    message = str(exc) if own and failure.kind == "error" else failure.message_es
    return {"kind": failure.kind, "message_es": message, "error": f"{type(exc).__name__}: {exc}"[:2000]}


def check_rows(report: dict) -> list[tuple[str, str, str]]:
    """(part, check label, verdict) for every check of every part."""
    rows = []
    for part in report.get("parts", {}).values():
        for key, check in (part.get("checks") or {}).items():
            ok = check.get("ok")
            verdict = "sí" if ok else ("NO" if ok is False else f"no comprobado: {check.get('why_es', '')}")
            rows.append((part.get("lab", "?"), CHECK_LABELS.get(key, key), verdict))
    return rows


def failed_checks(report: dict) -> list[str]:
    return [f"{lab}: {label}" for lab, label, verdict in check_rows(report) if verdict == "NO"]


def _gib(memory: dict) -> str:
    gpu = (memory or {}).get("gpu")
    if gpu and gpu.get("device_used_peak_gib") is not None:
        return f"{_es(gpu['device_used_peak_gib'])} GiB de GPU (pico, toda la tarjeta)"
    rss = (memory or {}).get("sampled_rss_peak_gib")
    return f"{_es(rss)} GiB de RAM (pico del proceso)" if rss else "?"


def _es(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}f}".replace(".", ",")


def _time(hours: float) -> str:
    return f"{hours * 60:.0f} min" if hours < 1 else f"{_es(hours)} h"


def render_es(report: dict) -> str:
    """A short page a student can send to the instructor."""
    device = report.get("device") or {}
    lines = [f"# Ensayo del curso — {device.get('name') or 'sin GPU'} (perfil '{report.get('profile')}')", ""]
    lines.append(f"Fecha: {report.get('created')}. Estado: **{'correcto' if report.get('status') == 'ok' else 'FALLÓ'}**"
                 f" en {_es(report.get('elapsed_seconds') or 0, 0)} s.")
    versions = ", ".join(f"{k} {v}" for k, v in (device.get("packages") or {}).items() if v)
    if device.get("driver"):
        versions = f"controlador {device['driver']}, " + versions
    lines += [f"Entorno: {versions}.", ""]
    for part in report.get("parts", {}).values():
        if part.get("profile_note_es"):  # L7.2 on rtx5090-base runs the instruct profile (labs.l72.profile_for_l72)
            lines += [f"**{part.get('lab', '?')}**: {part['profile_note_es']}", ""]
    failure = report.get("failure")
    if failure:
        lines += ["## Qué falló", "", f"**{failure['kind']}**: {failure['message_es']}", "",
                  f"Error original: `{failure['error'][:300]}`", ""]
    lines += ["## Medidas", "", "| lab | pasos | s/paso | memoria | fracción de vLLM en vigor |", "|---|---|---|---|---|"]
    for part in report.get("parts", {}).values():
        if not part.get("step_seconds"):
            continue
        steady = min(part["step_seconds"][1:] or part["step_seconds"])
        fraction = (part.get("vllm_fraction") or {}).get("in_force")
        lines.append(f"| {part['lab']} | {part['steps']} | {_es(steady)} | {_gib(part.get('memory'))} | "
                     f"{'-' if fraction is None else _es(fraction, 3)} |")
    holdout = report.get("base_holdout")
    if holdout:
        lines += ["", f"Holdout del modelo base ({holdout['model']}): {holdout['n']} problemas de test de GSM8K, "
                      f"{_es(100 * holdout['accuracy'])} % de aciertos con la respuesta entre etiquetas"
                  + (f", {_es(100 * holdout['accuracy_last_number'])} % tomando el último número"
                     if holdout.get("accuracy_last_number") is not None else "") + "."]
    advice = report.get("headroom")
    if advice:
        lines += ["", f"**Lo que el criterio 3 podrá detectar.** {advice['text_es']}", "",
                  f"**Perfil recomendado: `{advice['recommended_profile']}`.** {advice['why_es']}"]
    if report.get("level4_outlook"):
        lines += ["", f"**Lo que el nivel 4 podrá mostrar.** {report['level4_outlook']['text_es']}"]
    lines += ["", "## Comprobaciones", "", "| lab | comprobación | resultado |", "|---|---|---|"]
    lines += [f"| {lab} | {label} | {verdict} |" for lab, label, verdict in check_rows(report)]
    estimates = report.get("estimates")
    if estimates:
        lines += ["", "## Lo que costarán los runs completos (estimado a partir de estas medidas)", "",
                  "| run | pasos | tiempo | disco máx. (GB) | disco al terminar (GB) |", "|---|---|---|---|---|"]
        for r in estimates["runs"]:
            lines.append(f"| {r['name']} | {r['steps']} | {_time(r['hours_low'])} a {_time(r['hours_high'])} | "
                         f"{_es(r['disk_peak_gb'], 2)} | {_es(r['disk_final_gb'], 2)} |")
        t = estimates["total"]
        lines += [f"| **total** | | {_time(t['hours_low'])} a {_time(t['hours_high'])} | "
                  f"{_es(t['disk_peak_gb'], 2)} | {_es(t['disk_final_gb'], 2)} |", "",
                  "Tiempo: la cifra baja supone respuestas tan cortas como las del ensayo; la alta, que todas llegan "
                  "a max_completion_length. Si tu L7.1 terminó con los ajustes de la receta, la fila de referencia "
                  "de los ejercicios es ese mismo run y no se repite."]
    lines += ["", "## Lo que este ensayo no comprobó", ""]
    lines += [f"- {item}" for item in report.get("not_checked", [])]
    return "\n".join(lines) + "\n"
