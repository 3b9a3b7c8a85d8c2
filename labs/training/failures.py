"""Why a training run stopped, in words a student can act on.

``classify_failure`` turns an exception (CUDA OOM, a full disk, a NaN loss, a missing plugin or driver, a
hub that cannot be reached, Ctrl+C, ...) into a ``Failure``: a kind for ``status.json`` and a Spanish
message that says what to change. ``labs.training.recipe`` records it when training stops.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Any

from labs.core.profiles import Profile


class RunFailed(RuntimeError):
    """A training run stopped; ``status.json`` holds the same reason. The message is for students."""


@dataclass
class Failure:
    kind: str  # "oom" | "nan" | "disk" | "plugin" | "driver" | "hub" | "interrupted" | "reward_timeout" | "error"
    message_es: str
    details: dict = field(default_factory=dict)  # extra status.json fields (e.g. the reward function's name)


def reward_timeout(exc: BaseException) -> Any:
    """The ``labs.training.phases.RewardTimeout`` in ``exc``'s chain, if any (TRL may wrap it)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ == "RewardTimeout" and hasattr(exc, "function"):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def lower_lr_hint_es(profile: Profile) -> str:
    """Which learning rate to try instead: LoRA and a full fine-tune live an order of magnitude apart."""
    if profile.use_lora or profile.backend == "unsloth":
        return ("prueba la mitad; con LoRA el punto de partida es ~1e-5, unas diez veces el ~1e-6 de un "
                "fine-tuning completo")
    return "en un fine-tuning completo prueba ~1e-6 (con LoRA serían unas diez veces más)"


# Failures of the GPU stack itself, recognised by their text (the exception types live in vLLM,
# unsloth_zoo, torch and huggingface_hub, which may not even import): kind, phrases, what to do.
STACK_FAILURES = (
    ("plugin", ("vllm-bnb-plugin", "vllm_bnb_plugin"),
     "Falta vllm-bnb-plugin: con vLLM 0.28 o posterior, cargar en 4 bits con vLLM (load_in_4bit=True) lo "
     "necesita. Instálalo con `pip install -r requirements-gpu.txt` (fija su versión) y vuelve a lanzar."),
    ("driver", ("driver version is insufficient", "nvidia driver on your system is too old",
                "cudaerrorinsufficientdriver", "libcudart.so.13", "libnvrtc.so.13"),
     "El controlador NVIDIA es demasiado antiguo para el CUDA de torch o de vLLM (CUDA 13 pide la rama 580 "
     "o posterior), o torch y vLLM son de CUDA distintos. `python -m labs doctor` dice cuál; actualiza el "
     "controlador (y reinicia) o reinstala el entorno: pip install -r requirements-gpu.txt en un venv nuevo."),
    ("hub", ("localentrynotfounderror", "offlinemodeisenabled", "cannot reach https://huggingface.co",
             "couldn't connect to 'https://huggingface.co'", "gatedrepoerror", "repositorynotfounderror"),
     "No se pudo descargar el modelo del hub de Hugging Face y no está en la caché. Conéctate (o quita "
     "HF_HUB_OFFLINE=1) para la primera descarga; si el hub responde 401, `hf auth login`. Luego queda en "
     "la caché y el mismo comando funciona sin red."),
)


def classify_failure(exc: BaseException, profile: Profile) -> Failure:
    """Turn an exception into a kind and a Spanish message that says what to change."""
    text = f"{type(exc).__name__}: {exc}"
    chain, seen, cur = [], set(), exc
    while cur is not None and id(cur) not in seen:  # wrapped errors: look at the causes too
        seen.add(id(cur))
        chain.append(f"{type(cur).__name__}: {cur}".lower())
        cur = cur.__cause__ or cur.__context__
    for kind, phrases, message in STACK_FAILURES:
        if any(p in t for p in phrases for t in chain):
            return Failure(kind, message)
    timeout = reward_timeout(exc)
    if timeout is not None:
        step = f" en el paso {timeout.step}" if timeout.step else ""
        return Failure(
            "reward_timeout",
            f"La función de recompensa {timeout.function} tardó más de {timeout.limit:g} s en una llamada{step} "
            "(reward_timeout_s del perfil) y paré el run en lugar de dejarlo colgado. Lo habitual es una expresión "
            "regular que se dispara con una respuesta larga (cuantificadores anidados como (a+)+ o .*.*) o un bucle "
            "que no termina: pruébala con una respuesta de max_completion_length tokens. El último checkpoint "
            "guardado se conserva. Si la corriges, el run no continúa solo, porque su código ya no es el que "
            "consta en run.json: relanza con --accept-changes (queda apuntado en run.json) o empieza otro con "
            "--fresh. Si de verdad necesita más tiempo, sube reward_timeout_s (--set reward_timeout_s=...).",
            {"reward_function": timeout.function, "reward_timeout_s": timeout.limit},
        )
    if isinstance(exc, KeyboardInterrupt):
        return Failure(
            "interrupted",
            "Entrenamiento interrumpido a mano. Vuelve a lanzar el mismo comando: continuará desde el "
            "último checkpoint guardado.",
        )
    if isinstance(exc, NonFiniteLoss):
        return Failure(
            "nan",
            f"La pérdida o la norma del gradiente dejó de ser un número finito ({exc}). Suele ser un "
            f"learning rate demasiado alto para RL (ahora {profile.learning_rate:g}; {lower_lr_hint_es(profile)}) "
            "o una beta demasiado baja. Cambia el ajuste y empieza un run nuevo (--fresh).",
        )
    if disk_full(exc):
        return Failure(
            "disk",
            "El disco se llenó mientras entrenaba (No space left on device). Libera espacio (`df -h` dice "
            "cuánto queda): borra runs que ya no necesites en runs/ o la caché de compilación de torch en "
            "/tmp/torchinductor_*. Cada checkpoint guarda el modelo y el estado del optimizador; para que "
            f"ocupen menos, baja save_total_limit (ahora {profile.save_total_limit}). Después relanza el "
            "mismo comando: un checkpoint a medio escribir no se usa, continúa desde el último completo.",
        )
    oom = "out of memory" in text.lower() or type(exc).__name__ in {"OutOfMemoryError", "MemoryError"}
    if oom:
        return Failure(
            "oom",
            "Memoria agotada (OOM). Prueba, en este orden: bajar per_device_train_batch_size "
            f"(ahora {profile.per_device_train_batch_size}) manteniendo la divisibilidad por "
            f"num_generations ({profile.num_generations}); bajar max_completion_length "
            f"(ahora {profile.max_completion_length}); bajar vllm_gpu_memory_utilization "
            f"(ahora {profile.vllm_gpu_memory_utilization}); activar gradient_checkpointing. "
            "Con `python -m labs vram` ves el plan de memoria antes de cargar nada. "
            "Reinicia el kernel antes de volver a cargar vLLM.",
        )
    return Failure(
        "error",
        f"El entrenamiento falló con {type(exc).__name__}: {exc}. El registro completo está en "
        "status.json (campo 'traceback').",
    )


# How a full disk shows up: an OSError with ENOSPC, or only its text when a library re-raised it
# (torch.compile's C++ build, torch.save's "unexpected pos" when the zip writer could not write).
DISK_FULL_PHRASES = ("no space left on device", "unexpected pos", "pytorchstreamwriter failed writing")


def disk_full(exc: BaseException) -> bool:
    """True if ``exc`` or an exception it was raised from says the disk is full."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return True
        if any(phrase in str(exc).lower() for phrase in DISK_FULL_PHRASES):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class NonFiniteLoss(RuntimeError):
    pass
