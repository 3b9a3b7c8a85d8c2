"""Does requirements-gpu.txt resolve to ONE CUDA major, with everything Unsloth's 4-bit path needs?

The GPU stack cannot be installed here (no GPU), but pip can resolve it from metadata alone:
`pip install --dry-run --report` for Linux x86_64 / CPython 3.12. From that report we check:

(a) torch and vLLM are built for the same CUDA major. Rule (see `cuda_majors`): a package's CUDA
    major is read from its own local version tag (`+cu128` -> 12) and from its DIRECT,
    unconditional requirements: a `-cuNN` name suffix (`nvidia-cudnn-cu13`), a `cuNN` extra
    (`nvidia-cutlass-dsl[cu13]`), or the resolved version of a package whose major IS the CUDA major
    (`cuda-toolkit 13.0.3`, `nvidia-cuda-runtime 13.0.96`). All signals must agree. Only direct
    requirements count: transitively, vLLM's CUDA 13 build still pulls `nvidia-cutlass-dsl-libs-cu12`
    (nvidia-cutlass-dsl requires it unconditionally), so a scan of the whole resolution would call
    every stack "mixed". Packages such as cuFFT or cuRAND are versioned on their own (cuFFT 12.0 ships
    with CUDA 13), so their versions are never read as a CUDA major.
(b) every distribution Unsloth's 4-bit fast-inference path imports is in the resolution.

bitsandbytes is not part of (a): one wheel ships libraries for many CUDA versions (0.50.2 has
libbitsandbytes_cuda118 ... cuda130, cuda132) and picks one from torch's CUDA version at run time.

The resolution uses only PyPI (pip configuration is switched off, as on a student's fresh machine)
and is skipped, with the reason, when the index cannot be reached. It downloads metadata for about 230
distributions, one to three minutes, so the two tests that need it are marked ``slow`` and
``gpu_stack_leg``: they check requirements-gpu.txt, so the GPU stack's leg (``make test-gpu-stack``)
runs them and ``make test`` leaves them to it. The helpers' unit tests and the offline check of the
file run in well under a second.
The report is kept for a week in the course cache under the hash of the file and of the resolution's
options (tests/resolution_cache.py): the file unchanged, a later session reads it instead of resolving.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from resolution_cache import ReportCache, resolution_key

from labs.core.paths import cache_dir

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version
except ImportError:  # pip always vendors packaging
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name
    from pip._vendor.packaging.version import Version


# --------------------------------------------------------------------------------------------
# Target and inputs
# --------------------------------------------------------------------------------------------

TARGET_PYTHON = "3.12"
GLIBC_MAX = 35  # Ubuntu 22.04; a wheel needing a newer glibc would not install there either.

# Marker environment of the target (pip evaluates dependency markers against the interpreter it
# runs under, not --python-version; we use the same target here when reading the report).
TARGET_ENV = {
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "python_version": TARGET_PYTHON,
    "python_full_version": TARGET_PYTHON + ".0",
    "implementation_version": TARGET_PYTHON + ".0",
    "platform_release": "",
    "platform_version": "",
}

# Distributions that `FastLanguageModel.from_pretrained(..., load_in_4bit=True,
# fast_inference=True)` and Unsloth's patched GRPOTrainer import.
UNSLOTH_4BIT_FAST_INFERENCE = (
    "torch",
    "triton",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "bitsandbytes",
    "vllm",
    "vllm-bnb-plugin",  # vLLM >= 0.28 has no bitsandbytes in tree; unsloth_zoo.load_vllm raises without it
    "unsloth",
    "unsloth-zoo",
    "xformers",
)

# Packages whose own version major is the CUDA major they belong to.
CUDA_VERSIONED = frozenset(
    canonicalize_name(n)
    for n in (
        "cuda-toolkit",
        "cuda-bindings",
        "cuda-python",
        "nvidia-cuda-runtime",
        "nvidia-cuda-nvrtc",
        "nvidia-cuda-cupti",
        "nvidia-cuda-nvcc",
        "nvidia-cuda-cccl",
        "nvidia-cuda-crt",
        "nvidia-cublas",
        "nvidia-nvjitlink",
        "nvidia-nvtx",
        "nvidia-nvvm",
    )
)

INDEX_PROBE_URL = "https://pypi.org/simple/pip/"

NETWORK_ERROR_PATTERNS = re.compile(
    "|".join(
        (
            r"NewConnectionError",
            r"Failed to establish a new connection",
            r"Temporary failure in name resolution",
            r"Name or service not known",
            r"Network is unreachable",
            r"Connection refused",
            r"ConnectTimeoutError",
            r"Read timed out",
            r"Max retries exceeded",
            r"ProxyError",
            r"Could not fetch URL",
            r"connection broken by",
            r"SSLError",
        )
    ),
    re.IGNORECASE,
)


def find_requirements() -> Path:
    """requirements-gpu.txt from $GPU_REQUIREMENTS, else the nearest one at or above this file."""
    if os.environ.get("GPU_REQUIREMENTS"):
        return Path(os.environ["GPU_REQUIREMENTS"])
    for folder in Path(__file__).resolve().parents:
        candidate = folder / "requirements-gpu.txt"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("requirements-gpu.txt")


# --------------------------------------------------------------------------------------------
# Pure helpers (unit-tested below on synthetic reports)
# --------------------------------------------------------------------------------------------


def platform_args(glibc_max: int = GLIBC_MAX) -> list[str]:
    """pip does not widen --platform: name every manylinux tag a glibc<=glibc_max host accepts."""
    tags = [f"manylinux_2_{minor}_x86_64" for minor in range(glibc_max, 4, -1)]
    tags += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    return [arg for tag in tags for arg in ("--platform", tag)]


def resolution_command(python: str, requirements: Path, report: Path, target: Path) -> list[str]:
    return [
        python, "-m", "pip", "install",
        "--dry-run", "--ignore-installed", "--quiet",
        "--disable-pip-version-check", "--no-input",
        "--retries", "1", "--timeout", "20",
        "--report", str(report),
        "--target", str(target),  # pip 23 refuses --platform without --target; nothing is written
        "--python-version", TARGET_PYTHON,
        "--implementation", "cp",
        "--only-binary=:all:",
        *platform_args(),
        "-r", str(requirements),
    ]


def isolated_pip_env(environ: dict[str, str]) -> dict[str, str]:
    """No pip configuration: no local mirrors, find-links or constraints; PyPI only."""
    env = {k: v for k, v in environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def looks_like_network_failure(output: str) -> bool:
    return bool(NETWORK_ERROR_PATTERNS.search(output or ""))


def index_lost_midway(output: str) -> bool:
    """pip failed because the index stopped answering: network errors AND nothing was found.
    Network warnings alone do not count: an unreachable *extra* index prints them too, and then a
    real conflict must still fail the test."""
    return looks_like_network_failure(output) and "(from versions: none)" in (output or "")


def index_reachable(url: str = INDEX_PROBE_URL, timeout: float = 15.0) -> str | None:
    """None when the index answers; else the reason (honours *_proxy like pip does)."""
    import urllib.request

    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read(1)
        return None
    except Exception as exc:  # URLError, socket.timeout, ssl errors, proxy errors...
        return f"{url}: {type(exc).__name__}: {exc}"


def requirements_text_indexes(text: str) -> list[str]:
    """Index URLs named in a requirements file (--index-url / --extra-index-url / -i)."""
    urls = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        m = re.match(r"^(?:--extra-index-url|--index-url|-i)(?:\s+|=)(\S+)", line)
        if m:
            urls.append(m.group(1))
    return urls


def index_report(report: dict) -> dict[str, dict]:
    """Canonical name -> the report's install entry."""
    return {canonicalize_name(e["metadata"]["name"]): e for e in report["install"]}


def resolved_versions(report: dict) -> dict[str, str]:
    return {name: e["metadata"]["version"] for name, e in index_report(report).items()}


def direct_requirements(entry: dict, env: dict[str, str] = TARGET_ENV) -> list[Requirement]:
    """Requirements that apply on the target: markers true, with the extras pip was asked for."""
    extras = [""] + list(entry.get("requested_extras") or [])
    out = []
    for text in entry["metadata"].get("requires_dist") or []:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({**env, "extra": x}) for x in extras):
            out.append(req)
    return out


def _major_from_cu_tag(digits: str) -> int:
    # cu13 -> 13, cu128 -> 12, cu130 -> 13, cu118 -> 11
    return int(digits if len(digits) <= 2 else digits[:-1])


def cuda_majors(name: str, report: dict, env: dict[str, str] = TARGET_ENV) -> set[int]:
    """Every CUDA major that the resolved `name` signals (see the module docstring)."""
    by_name = index_report(report)
    entry = by_name[canonicalize_name(name)]
    majors: set[int] = set()
    local = Version(entry["metadata"]["version"]).local or ""
    m = re.fullmatch(r"cu(\d+)", local)
    if m:
        majors.add(_major_from_cu_tag(m.group(1)))
    for req in direct_requirements(entry, env):
        dep = canonicalize_name(req.name)
        m = re.search(r"-cu(\d+)$", dep)
        if m:
            majors.add(_major_from_cu_tag(m.group(1)))
        for extra in req.extras:
            m = re.fullmatch(r"cu(\d+)", extra)
            if m:
                majors.add(_major_from_cu_tag(m.group(1)))
        if dep in CUDA_VERSIONED and dep in by_name:
            majors.add(Version(by_name[dep]["metadata"]["version"]).major)
    return majors


def cuda_major_problems(report: dict, names=("torch", "vllm")) -> list[str]:
    """Empty when every named package signals exactly one CUDA major and they all agree."""
    by_name = index_report(report)
    problems, found = [], {}
    for name in names:
        if canonicalize_name(name) not in by_name:
            problems.append(f"{name} is not in the resolution")
            continue
        majors = cuda_majors(name, report)
        version = by_name[canonicalize_name(name)]["metadata"]["version"]
        if len(majors) != 1:
            problems.append(f"{name} {version}: CUDA major unclear or mixed: {sorted(majors)}")
        else:
            found[name] = (majors.pop(), version)
    if len({major for major, _ in found.values()}) > 1:
        problems.append(
            "different CUDA majors: "
            + ", ".join(f"{n} {v} -> CUDA {m}" for n, (m, v) in found.items())
        )
    return problems


def missing_packages(report: dict, required=UNSLOTH_4BIT_FAST_INFERENCE) -> list[str]:
    present = index_report(report)
    return [name for name in required if canonicalize_name(name) not in present]


# --------------------------------------------------------------------------------------------
# Unit tests on synthetic reports (fast, offline)
# --------------------------------------------------------------------------------------------


def _entry(name, version, requires=(), extras=None):
    return {
        "metadata": {"name": name, "version": version, "requires_dist": list(requires)},
        "requested_extras": extras,
    }


def _report(*entries):
    return {"version": "1", "install": list(entries)}


PYPI_CU13 = _report(
    _entry("torch", "2.13.0", [
        'cuda-toolkit[cublas,cudart]==13.0.3; platform_system == "Linux"',
        'nvidia-cudnn-cu13==9.20.0.48; platform_system == "Linux"',
        'triton==3.7.1; platform_system == "Linux" and python_version < "3.15"',
        'pyyaml; extra == "pyyaml"',
    ]),
    _entry("cuda-toolkit", "13.0.3.0"),
    _entry("nvidia-cudnn-cu13", "9.20.0.48"),
    _entry("triton", "3.7.1"),
    _entry("vllm", "0.31.0", [
        "torch==2.13.0",
        "nvidia-cutlass-dsl[cu13]==4.7.1",
        "humming-kernels[cu13]==0.1.16",
        'nvidia-deepstream-videodecode-cu12>=9.0.2; extra == "deepstream"',
    ]),
    # transitive CUDA-12 leftovers must not count for vllm
    _entry("nvidia-cutlass-dsl", "4.7.1", ["nvidia-cutlass-dsl-libs-cu12==4.7.1"]),
    _entry("nvidia-cutlass-dsl-libs-cu12", "4.7.1"),
    _entry("humming-kernels", "0.1.16", ['nvidia-cuda-runtime-cu12; extra == "cu12"']),
)

CU128_TORCH_WITH_CU13_VLLM = _report(
    _entry("torch", "2.13.0+cu128", [
        'nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"',
        'nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux"',
    ]),
    _entry("nvidia-cuda-runtime-cu12", "12.8.90"),
    _entry("nvidia-cudnn-cu12", "9.10.2.21"),
    _entry("vllm", "0.31.0", ["torch==2.13.0", "nvidia-cutlass-dsl[cu13]==4.7.1"]),
    _entry("nvidia-cutlass-dsl", "4.7.1"),
)


def test_cu_tag_majors():
    assert [_major_from_cu_tag(d) for d in ("12", "13", "118", "128", "130")] == [12, 13, 11, 12, 13]


def test_pypi_torch_and_vllm_are_both_cuda13():
    assert cuda_majors("torch", PYPI_CU13) == {13}
    assert cuda_majors("vllm", PYPI_CU13) == {13}  # libs-cu12 two levels down is ignored
    assert cuda_major_problems(PYPI_CU13) == []


def test_cu128_torch_beside_cu13_vllm_is_reported():
    assert cuda_majors("torch", CU128_TORCH_WITH_CU13_VLLM) == {12}
    problems = cuda_major_problems(CU128_TORCH_WITH_CU13_VLLM)
    assert len(problems) == 1 and "different CUDA majors" in problems[0]
    assert "torch 2.13.0+cu128 -> CUDA 12" in problems[0]


def test_cpu_torch_has_no_cuda_major():
    report = _report(_entry("torch", "2.13.0+cpu"), _entry("vllm", "0.31.0", ["nvidia-cutlass-dsl[cu13]"]))
    assert cuda_majors("torch", report) == set()
    assert any("torch 2.13.0+cpu: CUDA major unclear" in p for p in cuda_major_problems(report))


def test_mixed_signals_inside_one_package_are_reported():
    report = _report(_entry("vllm", "0.31.0", ["a-cu12", "b[cu13]"]), _entry("torch", "2.13.0+cu130"))
    assert cuda_majors("vllm", report) == {12, 13}
    assert any("mixed" in p for p in cuda_major_problems(report))


def test_extra_gated_and_other_platform_requirements_are_ignored():
    entry = _entry("x", "1", ['a-cu12; extra == "deepstream"', 'b-cu12; sys_platform == "win32"', "c"])
    assert [r.name for r in direct_requirements(entry)] == ["c"]
    asked = _entry("x", "1", ['a-cu12; extra == "deepstream"'], extras=["deepstream"])
    assert [r.name for r in direct_requirements(asked)] == ["a-cu12"]


def test_missing_packages_uses_canonical_names():
    report = _report(*(_entry(n.replace("-", "_").upper(), "1") for n in UNSLOTH_4BIT_FAST_INFERENCE))
    assert missing_packages(report) == []
    short = _report(_entry("unsloth", "1"), _entry("unsloth_zoo", "1"))
    assert "vllm-bnb-plugin" in missing_packages(short)
    assert "unsloth-zoo" not in missing_packages(short)


def test_network_failure_detection():
    assert looks_like_network_failure(
        "WARNING: Retrying (Retry(total=0, ...)) after connection broken by "
        "'NewConnectionError(...: Failed to establish a new connection: [Errno -3] "
        "Temporary failure in name resolution')': /simple/torch/"
    )
    assert not looks_like_network_failure(
        "ERROR: Cannot install vllm==0.31.0 and torch==2.12.0 because these package versions "
        "have conflicting dependencies."
    )
    # an unreachable extra index warns, but a real conflict is still a failure
    conflict = (
        "WARNING: Could not fetch URL https://download.pytorch.org/whl/cu128/torch/: ...\n"
        "ERROR: Could not find a version that satisfies the requirement bitsandbytes==0.50.2 "
        "(from versions: 0.31.8, 0.42.0)"
    )
    assert looks_like_network_failure(conflict) and not index_lost_midway(conflict)
    assert index_lost_midway(
        "WARNING: Retrying ... NewConnectionError ...\n"
        "ERROR: Could not find a version that satisfies the requirement torch==2.13.0 (from versions: none)"
    )


def test_index_probe_reports_a_dead_address():
    assert "127.0.0.1:9" in index_reachable("http://127.0.0.1:9/simple/", timeout=2)


def test_index_urls_parsed_from_requirements_text():
    text = "# c\n--extra-index-url https://download.pytorch.org/whl/cu128\n-i https://pypi.org/simple\ntorch==2.13.0\n"
    assert requirements_text_indexes(text) == [
        "https://download.pytorch.org/whl/cu128",
        "https://pypi.org/simple",
    ]


def test_platform_args_cover_manylinux_2_24_and_2_27():
    # bitsandbytes 0.50.2 is manylinux_2_24 only, nvidia-cudnn-cu13 manylinux_2_27 only
    args = platform_args()
    assert "manylinux_2_24_x86_64" in args and "manylinux_2_27_x86_64" in args


# --------------------------------------------------------------------------------------------
# Offline check on the real file
# --------------------------------------------------------------------------------------------


def test_requirements_gpu_names_no_pytorch_cuda_index():
    """PyPI's torch 2.13.0 is already the CUDA 13 build; a whl/cuXXX index adds a torch+cuXXX that
    satisfies torch==2.13.0, sorts above it, and can differ from vLLM's CUDA major."""
    text = find_requirements().read_text()
    cuda_indexes = [u for u in requirements_text_indexes(text) if re.search(r"/whl/cu\d+", u)]
    assert cuda_indexes == [], f"requirements-gpu.txt names a CUDA-specific torch index: {cuda_indexes}"


# --------------------------------------------------------------------------------------------
# The real resolution (network; skipped with the reason when PyPI cannot be reached)
# --------------------------------------------------------------------------------------------


def _target_python() -> str:
    """A CPython 3.12 if there is one, so markers such as python_version > "3.11" evaluate right."""
    for candidate in (f"python{TARGET_PYTHON}", sys.executable):
        path = shutil.which(candidate) if not os.path.isabs(candidate) else candidate
        if not path:
            continue
        probe = subprocess.run([path, "-m", "pip", "--version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return path
    pytest.skip("no Python with pip to run the resolution")


def report_cache(requirements: Path) -> ReportCache:
    """Keyed by the file's text and the resolution's options (the command with placeholder paths)."""
    options = resolution_command("python", Path("requirements"), Path("report"), Path("target"))
    return ReportCache(cache_dir() / "gpu-resolution", resolution_key(requirements.read_text(), options))


@pytest.fixture(scope="module")
def gpu_report(tmp_path_factory):
    requirements = find_requirements()
    cache = report_cache(requirements)
    cached = cache.load()
    if cached is not None:
        print(f"reused the resolution of {requirements} from {cache.age_s() / 3600:.1f} h ago ({cache.path})")
        return cached
    unreachable = index_reachable()
    if unreachable:
        pytest.skip(f"package index unreachable, cannot resolve requirements-gpu.txt ({unreachable})")
    work = tmp_path_factory.mktemp("gpu-resolution")
    report_path = work / "report.json"
    cmd = resolution_command(_target_python(), requirements, report_path, work / "target")
    timeout = float(os.environ.get("GPU_RESOLUTION_TIMEOUT", "900"))
    started = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=isolated_pip_env(dict(os.environ))
        )
    except subprocess.TimeoutExpired as exc:
        output = "".join(
            part.decode(errors="replace") if isinstance(part, bytes) else part
            for part in (exc.stdout or "", exc.stderr or "")
        )
        if looks_like_network_failure(output):
            pytest.skip(f"package index unreachable (pip timed out after {timeout:.0f} s retrying)")
        pytest.fail(f"resolution did not finish in {timeout:.0f} s (resolver backtracking?)\n{output[-3000:]}")
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        if index_lost_midway(output):
            pytest.skip("package index stopped answering: " + NETWORK_ERROR_PATTERNS.search(output).group(0))
        pytest.fail(f"requirements-gpu.txt does not resolve:\n{output[-3000:]}")
    print(f"resolved {requirements} in {time.monotonic() - started:.0f} s")
    report = json.loads(report_path.read_text())
    cache.store(report)
    return report


@pytest.mark.slow
@pytest.mark.gpu_stack_leg
def test_torch_and_vllm_resolve_to_one_cuda_major(gpu_report):
    problems = cuda_major_problems(gpu_report)
    assert problems == [], "\n".join(problems)


@pytest.mark.slow
@pytest.mark.gpu_stack_leg
def test_unsloth_4bit_fast_inference_packages_resolve(gpu_report):
    assert missing_packages(gpu_report) == []
