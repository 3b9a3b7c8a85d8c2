"""Judge a probe record: a list of checks, each OK, a warning or an error, with a fix in Spanish.

Pure functions of the record (a dict, or a ``ProbeRecord``) and the profile: nothing here looks at
the machine, so a record taken on a student's RTX 5090 can be replayed on the CPU-only CI.

An *error* means a lab cannot run (or would run wrongly without saying so); a *warning* means it
will run, but something differs from what the course was verified with.

The checks live in three modules: ``checks_common`` (``Check``, levels, names, thresholds, helpers),
``checks_stack`` (Python, GPU, driver, torch, packages, vLLM, Unsloth, pins, CPU conflicts) and
``checks_storage`` (model, data, disk, hub, wandb). This module runs them in the table's order and
re-exports their names, so ``from labs.doctor import checks as C; C.GPU`` keeps working.
"""

from __future__ import annotations

from labs.doctor.checks_common import (
    BUSY_GPU_GIB, COURSE_BACKENDS, CPU_BLOCKERS, CPU_CONFLICTS, CPU_PRECISION, DATA, DEFAULT_TORCH_INDEX, DISK, DISK_MARGIN, DRIVER,
    ERROR, GIB, GPU, GPU_PROFILE_MIN_GIB, HUB, LEVEL_LABELS, MIN_BLACKWELL_DRIVER, MIN_CUDA13_DRIVER, MIN_PYTHON,
    MODEL, OK, PACKAGES, PINNED_PACKAGES, PINS, PROFILE, PYTHON, REASONING, REQUIRED, TORCH, UNSLOTH, VLLM, WANDB,
    WARNING,
    Check, _as_dict, arch_supports, matches_pin, range_text, satisfies,
)
from labs.doctor.checks_stack import (
    check_cpu_conflicts, check_cpu_precision, check_driver, check_gpu, check_packages, check_pins, check_python, check_torch,
    check_unsloth, check_vllm, required_driver, resolve_profile,
)
from labs.doctor.checks_storage import (
    check_data, check_disk, check_hub, check_model, check_reasoning, check_wandb, hub_needs,
)
from labs.core.profiles import Profile

__all__ = [
    "BUSY_GPU_GIB", "COURSE_BACKENDS", "CPU_BLOCKERS", "CPU_CONFLICTS", "CPU_PRECISION", "DATA", "DEFAULT_TORCH_INDEX", "DISK",
    "DISK_MARGIN", "DRIVER", "ERROR", "GIB", "GPU", "GPU_PROFILE_MIN_GIB", "HUB", "LEVEL_LABELS",
    "MIN_BLACKWELL_DRIVER", "MIN_CUDA13_DRIVER", "MIN_PYTHON", "MODEL", "OK", "PACKAGES", "PINNED_PACKAGES",
    "PINS", "PROFILE", "PYTHON", "REASONING", "REQUIRED", "TORCH", "UNSLOTH", "VLLM", "WANDB", "WARNING",
    "Check", "arch_supports", "matches_pin", "range_text", "satisfies",
    "check_cpu_conflicts", "check_cpu_precision", "check_data", "check_disk", "check_driver", "check_gpu", "check_hub", "check_model",
    "check_packages", "check_pins", "check_python", "check_reasoning", "check_torch", "check_unsloth", "check_vllm", "check_wandb",
    "hub_needs", "required_driver", "resolve_profile",
    "errors", "evaluate", "verdict",
]


def evaluate(record, profile: Profile | str | None = None,
             backends: tuple[str, ...] = COURSE_BACKENDS) -> list[Check]:
    """Every check, in the order the table prints them.

    ``profile``: a ``Profile``, a profile name, or None for the one the record says the labs pick.
    ``backends``: which training back-ends to vouch for ("trl" for L7.1, "unsloth" for L7.2).
    """
    r = _as_dict(record)
    chosen, profile_check = resolve_profile(r, profile)
    checks = [check_python(r), profile_check]
    if chosen is None:
        return checks
    checks += [
        check_gpu(r, chosen),
        check_driver(r, chosen),
        check_torch(r, chosen),
        check_packages(r, chosen),
        check_vllm(r, chosen),
        check_unsloth(r, chosen, backends),
        check_pins(r, chosen),
        check_cpu_conflicts(r, chosen),
        check_cpu_precision(r, chosen),
        check_model(r, chosen, backends),
        check_reasoning(r, chosen, backends),
        check_data(r, chosen),
        check_disk(r, chosen, backends),
        check_hub(r, chosen, backends),
        check_wandb(r, chosen),
    ]
    return [c for c in checks if c is not None]


def errors(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.level == ERROR]


def verdict(checks: list[Check], profile_name: str | None = None) -> str:
    """One Spanish sentence: can the labs run?"""
    n_err, n_warn = len(errors(checks)), sum(c.level == WARNING for c in checks)
    which = f" con el perfil '{profile_name}'" if profile_name else ""
    if n_err:
        return (f"Hay {n_err} error(es): los labs no pueden arrancar{which} hasta resolverlos "
                "(mira «Cómo arreglarlo»).")
    if n_warn:
        return f"Listo para los labs{which}, con {n_warn} aviso(s) que conviene revisar."
    return f"Todo listo para los labs{which}."
