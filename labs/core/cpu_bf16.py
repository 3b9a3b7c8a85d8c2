"""Does this CPU have bf16 units? Read from the operating system, without importing torch.

Under ``torch.autocast("cpu", dtype=torch.bfloat16)`` a CPU with bf16 instructions computes the matrix
products of a forward and backward pass faster than in float32; one without them converts back and forth
and can be slower (``benchmarks/bench_cpu_bf16.py``: 6.9 s against 4.1 s in float32 on an Intel Xeon
without AMX, November 2026). The units: ``avx512_bf16`` or ``amx_bf16`` on x86 (Linux's ``flags`` line), ``bf16``
on 64-bit Arm (Linux's ``Features`` line). Elsewhere (macOS, Windows) this answers False: float32, which is
right on every CPU.
"""

from __future__ import annotations

X86_FLAGS = ("avx512_bf16", "amx_bf16")
ARM_FEATURE = "bf16"


def _read_cpuinfo() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def cpu_facts(cpuinfo: str | None = None) -> dict:
    """The CPU's name and the bf16 flags it lists: ``{"model": str, "bf16_flags": [...]}`` (the doctor's record)."""
    cpuinfo = _read_cpuinfo() if cpuinfo is None else cpuinfo
    model, flags = "", []
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key, words = key.strip(), value.split()
        if key in ("model name", "Model", "CPU part") and not model:
            model = value.strip()
        if key == "flags" and not flags:
            flags = [flag for flag in X86_FLAGS if flag in words]
        if key == "Features" and not flags and ARM_FEATURE in words:
            flags = [ARM_FEATURE]
    return {"model": model, "bf16_flags": flags}


def has_bf16_units(cpuinfo: str | None = None) -> bool:
    """True when the CPU lists bf16 instructions in ``/proc/cpuinfo`` (or in ``cpuinfo``, for tests)."""
    return bool(cpu_facts(cpuinfo)["bf16_flags"])
