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


def has_bf16_units(cpuinfo: str | None = None) -> bool:
    """True when the CPU lists bf16 instructions in ``/proc/cpuinfo`` (or in ``cpuinfo``, for tests)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                cpuinfo = fh.read()
        except OSError:
            return False
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        words = value.split()
        if key.strip() == "flags" and any(flag in words for flag in X86_FLAGS):
            return True
        if key.strip() == "Features" and ARM_FEATURE in words:
            return True
    return False
