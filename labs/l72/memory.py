"""The vLLM memory fraction in force: what the profile asks for, and what Unsloth hands to vLLM.

Under Standby, Unsloth ignores the profile's ``vllm_gpu_memory_utilization`` and picks its own fraction
from the card's total memory, unless ``UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE=1``. This module reproduces that
choice before loading (:func:`expected_gpu_fraction`), reads back what the running engine holds
(:func:`engine_memory_fraction`) and says both in Spanish (:class:`MemoryFraction`).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from labs.core.profiles import Profile
from labs.l72.standby import STANDBY_ENV, UTIL_OVERRIDE_ENV, standby_on

# gpu_memory_utilization by a target picked from the card's total memory ("ten percent" = total GiB / 10),
# lowered by 5% for vLLM >= 0.11. tests/test_unsloth_lab.py runs the pinned release's own code against
# these tables.
STANDBY_TIERS = ((4.0, 0.925), (2.5, 0.9), (2.0, 0.825), (1.4, 0.8), (1.0, 0.775), (0.0, 0.75))
STANDBY_TIERS_BEFORE_VLLM_0_11 = ((9.0, 0.9), (4.0, 0.875), (2.5, 0.85), (2.0, 0.825), (1.4, 0.8), (1.0, 0.75),
                                  (0.0, 0.7))  # fmt: skip
NEWER_VLLM_FACTOR = 0.95


def _version_tuple(version: str) -> tuple[int, ...]:
    from packaging.version import Version

    return Version(version).release


def standby_target_fraction(total_gib: float, vllm_version: str) -> float:
    """The fraction Unsloth picks under Standby for a card of ``total_gib`` GiB and this vLLM."""
    if total_gib < 0:
        raise ValueError(f"total_gib es la memoria de la tarjeta en GiB: no puede ser negativa ({total_gib}).")
    newer = _version_tuple(vllm_version) >= (0, 11, 0)
    tiers = STANDBY_TIERS if newer else STANDBY_TIERS_BEFORE_VLLM_0_11
    target = next(target for threshold, target in tiers if total_gib * 0.1 >= threshold)  # the last starts at 0
    return target * NEWER_VLLM_FACTOR if newer else target


@dataclass(frozen=True)
class MemoryFraction:
    """How much memory vLLM may take: what the profile asked for, and what is actually in force."""

    requested: float
    in_force: float | None  # None: no vLLM engine in this run
    rule: str  # "standby" | "standby-override" | "no-standby" | "trl-colocate" | "no-vllm"
    card_gib: float | None = None
    vllm_version: str | None = None
    engine_value: float | None = None  # read back from the running engine, when there is one
    device: str = "gpu"  # "gpu" or "cpu" (vLLM's CPU back-end: the fraction is of host RAM)

    def with_engine_value(self, value: float | None) -> "MemoryFraction":
        data = asdict(self)
        data["engine_value"] = value
        if self.rule in ("trl-colocate",) and value is not None:
            data["in_force"] = value  # nothing rewrites it on this path: the engine's value is the one
        return MemoryFraction(**data)

    def as_dict(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    def describe_es(self) -> str:
        memoria = "de la RAM del host (backend CPU de vLLM)" if self.device == "cpu" else "de la memoria de la GPU"
        engine = ""
        if self.engine_value is not None:
            engine = f" Leído del motor vLLM en marcha: {_fmt(self.engine_value)}."
            if self.rule == "standby" and abs(self.engine_value - (self.in_force or 0)) > 5e-4:
                engine += (" (Unsloth aplica su fracción a la memoria libre al cargar y descuenta las "
                           "activaciones del entrenamiento; por eso el motor recibe algo menos.)")
        if self.rule == "no-vllm":
            return "Sin vLLM en este run (use_vllm=False): no hay fracción de memoria reservada para generar."
        if self.rule == "trl-colocate":
            return (f"Fracción de memoria de vLLM en vigor: {_fmt(self.in_force)} {memoria} (la que pide el "
                    f"perfil, vllm_gpu_memory_utilization={_fmt(self.requested)}; sin Unsloth nadie la "
                    f"cambia).{engine}")
        card = f"{self.card_gib:.1f} GiB".replace(".", ",") if self.card_gib else "?"
        if self.rule == "standby":
            return (f"Fracción de memoria de vLLM en vigor: {_fmt(self.in_force)} {memoria}. El perfil pide "
                    f"{_fmt(self.requested)}, pero con Standby Unsloth la ignora y elige la suya según la "
                    f"memoria total de la tarjeta ({card}, vLLM {self.vllm_version}). Para imponer la "
                    f"tuya: {UTIL_OVERRIDE_ENV}=1 antes de importar unsloth.{engine}")
        if self.rule == "standby-override":
            return (f"Fracción de memoria de vLLM en vigor: {_fmt(self.in_force)} {memoria}: Standby activo, "
                    f"pero {UTIL_OVERRIDE_ENV}=1 hace que Unsloth respete la del perfil.{engine}")
        return (f"Fracción de memoria de vLLM en vigor: {_fmt(self.in_force)} {memoria} (Standby apagado: "
                f"se usa la del perfil).{engine}")


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.4g}".replace(".", ",")


def unsloth_memory_fraction(requested: float, total_gib: float, vllm_version: str, *, standby: bool = True,
                            override: bool = False) -> MemoryFraction:
    """The fraction Unsloth hands to vLLM (before its own free-memory adjustment), and why."""
    if standby and not override:
        in_force, rule = standby_target_fraction(total_gib, vllm_version), "standby"
    else:
        in_force, rule = requested, ("standby-override" if standby else "no-standby")
    return MemoryFraction(requested, in_force, rule, total_gib, vllm_version)


def engine_memory_fraction(llm) -> float | None:
    """``gpu_memory_utilization`` as the running vLLM engine holds it (``None`` if it cannot be read)."""
    engine = getattr(llm, "llm_engine", llm)
    for owner in (getattr(engine, "vllm_config", None), engine):
        cache = getattr(owner, "cache_config", None)
        value = getattr(cache, "gpu_memory_utilization", None)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _env_on(environ, name: str) -> bool:
    return environ.get(name, "0") != "0"


def expected_gpu_fraction(profile: Profile, total_gib: float, vllm_version: str, environ=None) -> MemoryFraction:
    """What Unsloth will use on this card with the current environment (read before loading)."""
    environ = os.environ if environ is None else environ
    return unsloth_memory_fraction(profile.vllm_gpu_memory_utilization, total_gib, vllm_version,
                                   standby=standby_on(environ.get(STANDBY_ENV)),
                                   override=_env_on(environ, UTIL_OVERRIDE_ENV))
