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


@pytest.mark.parametrize("text,flags", [
    ("model name\t: AMD EPYC 9R14\n" + EPYC, ["avx512_bf16"]),
    ("model name\t: Intel(R) Xeon(R) Platinum\n" + SAPPHIRE_RAPIDS, ["amx_bf16"]),
    (GRAVITON3, ["bf16"]),
    ("model name\t: Intel(R) Core(TM) i7\n" + LAPTOP, []),
])
def test_cpu_facts_name_the_bf16_flags_the_doctor_reports(text, flags):
    from labs.core.cpu_bf16 import cpu_facts

    facts = cpu_facts(text)
    assert facts["bf16_flags"] == flags and bool(flags) is has_bf16_units(text)


@pytest.mark.parametrize("flags", [["avx512_bf16", "amx_bf16"], []])
def test_the_doctor_says_which_precision_each_cpu_profile_trains_in(flags):
    """From the record's CPU, not this machine's: a record replayed on another CPU reads the same."""
    from labs.doctor import checks as C

    record = {"python": "3.11.7", "cpu": {"model": "Some CPU", "bf16_flags": flags},
              "profile": {"name": "cpu", "reason": "", "known": True}}
    (line,) = [c for c in C.evaluate(record, "cpu") if c.name == C.CPU_PRECISION]
    assert line.level == C.OK and line.detail.startswith("Some CPU")
    if flags:
        assert "avx512_bf16, amx_bf16" in line.detail and "'ci' calcula los productos de matrices de GRPO en bf16" in line.detail
        assert "'cpu' y el pase de formato de todos, en float32" in line.detail
    else:
        assert "sin instrucciones bf16" in line.detail and "'cpu' y 'ci' entrenan en float32" in line.detail
    assert not [c for c in C.evaluate(record, "rtx5090") if c.name == C.CPU_PRECISION]  # a GPU profile: no line
