"""What a profile will download, and how big it is.

Sizes are computed from parameter counts and bytes per parameter, not copied from a web page, so the
notebook can show the arithmetic. Anything not in ``MODEL_BYTES`` is an unknown size.
"""

from __future__ import annotations

from dataclasses import dataclass

from labs.core.profiles import BUNDLED_MODEL, PROFILES, Profile
from labs.doctor.gpu_stack import RECORDED_UNSLOTH_REPOS, unsloth_repo
from labs.vram.spec import QWEN3_4B, weights_bytes

GB = 1e9  # disk sizes in decimal gigabytes, as the hub and `df -H` show them

# Qwen3-4B-Instruct-2507: 4.02 B parameters (model card), stored in bf16 (2 bytes each).
QWEN3_4B_PARAMS = 4.02e9
BF16_BYTES = 2
QWEN3_4B_BF16_BYTES = QWEN3_4B_PARAMS * BF16_BYTES

MODEL_BYTES = {
    "Qwen/Qwen3-4B-Instruct-2507": QWEN3_4B_BF16_BYTES,
    # Unsloth's copy holds the same bf16 weights (what it loads with load_in_4bit=False).
    "unsloth/Qwen3-4B-Instruct-2507": QWEN3_4B_BF16_BYTES,
    # What it loads with load_in_4bit=True (labs.doctor.gpu_stack): linear weights in NF4, embeddings
    # and norms in bf16 (labs.vram's byte formula). Unsloth's dynamic quant keeps a few more layers in
    # 16 bits, so the download is somewhat larger than this.
    RECORDED_UNSLOTH_REPOS["unsloth/Qwen3-4B-Instruct-2507"]["4bit"]: weights_bytes(QWEN3_4B, four_bit=True),
    # Qwen3-4B-Base (profile rtx5090-base): the same architecture and parameter count (labs.vram.spec), bf16.
    "unsloth/Qwen3-4B-Base": QWEN3_4B_BF16_BYTES,
    "Qwen/Qwen3-4B-Base": QWEN3_4B_BF16_BYTES,
    # SmolLM2-135M-Instruct converted from the bundled GGUF to float32 (538 MB measured, stack.md).
    BUNDLED_MODEL: 538e6,
}

HF_CACHE = "hf_cache"  # huggingface_hub's cache (HF_HOME / HF_HUB_CACHE)
COURSE_CACHE = "course_cache"  # labs.core.paths.cache_dir() (COURSE_CACHE)


@dataclass(frozen=True)
class Download:
    name: str
    where: str  # HF_CACHE or COURSE_CACHE
    bytes: float | None  # None: size unknown
    from_hub: bool


def is_hub_id(name: str) -> bool:
    """A model name the hub would resolve (``owner/name``), as opposed to the bundled one or a path."""
    return name != BUNDLED_MODEL and not name.startswith((".", "/", "~")) and name.count("/") == 1


def models_for(profile: Profile, backends: tuple[str, ...], repo_map: dict | None = None) -> list[str]:
    """The model repos the chosen labs load under ``profile``.

    For L7.2 that is the repo Unsloth's own mapping picks (``repo_map``, from the probe; the recorded
    table without one): with ``load_in_4bit`` a pre-quantised repo, not ``profile.unsloth_model``.
    """
    names = [profile.model]
    # On CPU the Unsloth lab runs the same recipe on transformers + PEFT with profile.model.
    if "unsloth" in backends and not profile.use_cpu:
        names.append(unsloth_repo(profile.unsloth_model, profile.load_in_4bit, repo_map))
    return list(dict.fromkeys(names))


def downloads_for(profile: Profile, backends: tuple[str, ...], repo_map: dict | None = None) -> list[Download]:
    result = []
    for name in models_for(profile, backends, repo_map):
        if name == BUNDLED_MODEL:
            result.append(Download(name, COURSE_CACHE, MODEL_BYTES[name], from_hub=False))
        elif is_hub_id(name):
            result.append(Download(name, HF_CACHE, MODEL_BYTES.get(name), from_hub=True))
    if profile.format_pass and is_hub_id(profile.model):
        # The format pass writes a full checkpoint of the model (bf16, the LoRA merged in) to the course
        # cache once (labs.training.format_pass); counted until a probe can tell it is there.
        result.append(Download(f"{profile.model} + pase de formato", COURSE_CACHE, MODEL_BYTES.get(profile.model), from_hub=False))
    return result


def hub_models_of_all_profiles(repo_map: dict | None = None) -> list[str]:
    """Every hub model any profile names: the probe looks each one up in the hub cache."""
    names = []
    for profile in PROFILES.values():
        names += [n for n in (profile.model, profile.unsloth_model) if is_hub_id(n)]
        if is_hub_id(profile.unsloth_model):
            names += [unsloth_repo(profile.unsloth_model, four_bit, repo_map) for four_bit in (True, False)]
    return list(dict.fromkeys(names))


def download_seconds(size_bytes: float, megabits_per_second: float) -> float:
    """Time to move ``size_bytes`` at a link speed given in Mbit/s (how ISPs quote it)."""
    return size_bytes * 8 / (megabits_per_second * 1e6)
