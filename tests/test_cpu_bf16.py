"""labs.core.cpu_bf16: which CPUs get the ci profile's bf16 autocast, read from /proc/cpuinfo's text."""

import pytest

from labs.core.cpu_bf16 import has_bf16_units
from labs.core.profiles import CI, CPU, get_profile

EPYC = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
SAPPHIRE_RAPIDS = "flags\t\t: fpu avx512f avx512_vnni amx_bf16 amx_tile amx_int8\n"
SKYLAKE = "flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni\n"
LAPTOP = "flags\t\t: fpu sse2 avx avx2 fma\n"
GRAVITON3 = "processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"
GRAVITON2 = "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n"


@pytest.mark.parametrize("text,units", [
    (EPYC, True), (SAPPHIRE_RAPIDS, True), (GRAVITON3, True),
    (SKYLAKE, False), (LAPTOP, False), (GRAVITON2, False), ("", False),
    ("model name\t: AMD with avx512_bf16 in its name\nflags\t\t: fpu avx2\n", False),  # only the flags line
])
def test_bf16_units_are_read_from_the_flags_or_features_line(text, units):
    assert has_bf16_units(text) is units


def test_only_ci_follows_the_cpu_and_a_run_can_still_choose():
    assert CI.bf16 is has_bf16_units() and get_profile("ci").bf16 is CI.bf16
    assert CPU.bf16 is False and get_profile("cpu").bf16 is False  # the lab that must show learning: float32
    assert get_profile("ci", bf16=False).bf16 is False  # --set bf16=false gives float32 on any CPU
