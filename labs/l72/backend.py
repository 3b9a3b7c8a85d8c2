"""Which back-end runs L7.2: Unsloth's GPU path on a GPU profile, transformers + PEFT on a CPU profile.

A GPU profile never falls back: without CUDA or without Unsloth it stops with the reason (see
:func:`choose_backend`).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from labs.core.profiles import Profile

BACKEND_UNSLOTH = "unsloth+vllm-standby"
BACKEND_FALLBACK = "transformers+peft"

WHY_NO_UNSLOTH_ON_CPU_ES = (
    "Unsloth 2026.10.9 solo entrena SFT en CPU: FastLanguageModel.from_pretrained(fast_inference=True) "
    "lanza NotImplementedError y el GRPOTrainer de TRL se queda sin parchear. Por eso aquí NO se usa la "
    "ruta GPU de Unsloth: la misma receta (mismos datos, recompensas, hiperparámetros y evaluación) corre "
    "con transformers + PEFT, con un adaptador LoRA del mismo rango, alfa y módulos."
)


class BackendUnavailable(RuntimeError):
    """A GPU profile on a machine that cannot run Unsloth's GPU path."""


@dataclass(frozen=True)
class Backend:
    name: str  # BACKEND_UNSLOTH or BACKEND_FALLBACK
    reason_es: str

    @property
    def is_unsloth(self) -> bool:
        return self.name == BACKEND_UNSLOTH


def gpu_path(profile: Profile) -> tuple[bool, str]:
    """Whether Unsloth's GPU path runs here with this profile, and why (never raises)."""
    try:
        backend = choose_backend(profile)
    except BackendUnavailable as exc:
        return False, str(exc)
    return backend.is_unsloth, backend.reason_es


def unsloth_installed() -> bool:
    """Whether ``import unsloth`` could work, without importing it (the import itself patches trl)."""
    return importlib.util.find_spec("unsloth") is not None


def choose_backend(profile: Profile, cuda: bool | None = None, installed: bool | None = None) -> Backend:
    """Unsloth on a GPU profile; transformers + PEFT on a CPU profile. A GPU profile never falls back.

    A GPU profile without CUDA or without Unsloth raises (the doctor says the same, earlier): quietly
    training Qwen3-4B another way would not be lab L7.2.
    """
    if profile.use_cpu:
        return Backend(BACKEND_FALLBACK, f"el perfil '{profile.name}' es de CPU. {WHY_NO_UNSLOTH_ON_CPU_ES}")
    from labs.core.profiles import cuda_available

    cuda = cuda_available() if cuda is None else cuda
    installed = unsloth_installed() if installed is None else installed
    missing = []
    if not cuda:
        missing.append("no se ve ninguna GPU CUDA")
    if not installed:
        missing.append("Unsloth no está instalado (pip install -r requirements-gpu.txt)")
    if missing:
        raise BackendUnavailable(
            f"El perfil '{profile.name}' es de GPU, pero {' y '.join(missing)}. Usa el perfil 'cpu' o 'ci' "
            "para la versión de CPU del lab, o `python -m labs doctor` para ver qué falta."
        )
    return Backend(BACKEND_UNSLOTH, "GPU CUDA visible y Unsloth instalado: Unsloth + vLLM con Standby.")
