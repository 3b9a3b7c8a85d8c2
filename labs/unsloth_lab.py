"""Lab L7.2 (Unsloth): the keyword arguments of its two Unsloth calls, built from the profile.

Only pure builders live here, so that ``tests/test_api_drift.py`` can vet them against the pinned
Unsloth release on any machine, GPU or not. They follow L7.2 of the lesson, with the model name and
every number taken from the profile instead of written into the lab.
"""

from __future__ import annotations

from labs.profiles import Profile


def from_pretrained_kwargs(profile: Profile) -> dict:
    """Keywords for ``FastLanguageModel.from_pretrained``: the model, 4-bit or not, and vLLM inside."""
    return dict(
        model_name=profile.unsloth_model,
        max_seq_length=profile.max_seq_length,
        load_in_4bit=profile.load_in_4bit,
        fast_inference=True,  # vLLM generates the completions
        max_lora_rank=profile.lora_r,
        gpu_memory_utilization=profile.vllm_gpu_memory_utilization,  # ignored under Standby
    )


def get_peft_model_kwargs(profile: Profile) -> dict:
    """Keywords for ``FastLanguageModel.get_peft_model``: the LoRA adapters and Unsloth's checkpointing."""
    return dict(
        r=profile.lora_r,
        lora_alpha=profile.lora_alpha,
        target_modules=list(profile.lora_targets),
        use_gradient_checkpointing="unsloth",
        random_state=profile.seed,
    )
