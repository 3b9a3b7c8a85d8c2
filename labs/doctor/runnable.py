"""The guard a lab calls first: fail at once, in Spanish, instead of with a stack trace later."""

from __future__ import annotations

import sys
import warnings

from labs.doctor.checks import ERROR, WARNING, evaluate, hub_needs
from labs.doctor.probe import hub_reachability, probe
from labs.core.profiles import Profile, get_profile


class EnvironmentNotReady(RuntimeError):
    """The environment cannot run the lab; the message is the doctor's Spanish diagnosis."""


class EnvironmentWarning(UserWarning):
    """The lab will run, but something differs from what the course was verified with."""


def _explain(checks, level: str) -> str:
    lines = []
    for c in checks:
        if c.level == level:
            lines.append(f"- {c.name}: {c.detail}")
            if c.fix_es:
                lines.append(f"  Cómo arreglarlo: {c.fix_es}")
    return "\n".join(lines)


def require_runnable(profile: Profile | str | None = None) -> None:
    """Raise ``EnvironmentNotReady`` if this machine cannot run a lab with ``profile``.

    Fast: torch is imported only for a GPU profile (or if already imported), nvidia-smi is asked
    only for a GPU profile, and the hub is contacted only when something must still be downloaded.
    Warnings are issued as ``EnvironmentWarning`` and do not stop the lab.
    """
    if not isinstance(profile, Profile):
        profile = get_profile(profile)
    gpu = not profile.use_cpu
    record = probe(
        import_torch=gpu or "torch" in sys.modules,
        check_hub=False,
        nvidia_smi=gpu,
        profile={"name": profile.name, "reason": "perfil del lab"},
    )
    backends = (profile.backend,)
    models, data = hub_needs(record.to_dict(), profile, backends)
    if models or data:
        record.hub = hub_reachability()
    checks = evaluate(record, profile, backends=backends)
    if any(c.level == ERROR for c in checks):
        raise EnvironmentNotReady(
            f"El entorno no está listo para el perfil '{profile.name}':\n{_explain(checks, ERROR)}\n"
            "Ejecuta `python -m labs doctor` para ver el informe completo."
        )
    if any(c.level == WARNING for c in checks):
        warnings.warn(f"Avisos del entorno (el lab sigue):\n{_explain(checks, WARNING)}",
                      EnvironmentWarning, stacklevel=2)
