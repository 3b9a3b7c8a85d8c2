"""The CPU stand-in for Unsloth's ``FastLanguageModel`` in the L7.2 notebook: transformers + PEFT.

Unsloth 2026.10.9 cannot do GRPO on a CPU (``fast_inference=True`` raises ``NotImplementedError``), so on the
CPU profiles the student's own cells call this class instead: the same two methods with the same keywords,
answered as the lab's CPU path answers them (labs.l72.fallback: the profile's model in float32, a PEFT LoRA
adapter of the rank, alpha and targets asked for). Each call says, in Spanish, what it does instead.
"""

from __future__ import annotations

from labs.core.profiles import LORA_TARGETS, Profile
from labs.l72.backend import WHY_NO_UNSLOTH_ON_CPU_ES


class CpuFastLanguageModel:
    """``from_pretrained`` and ``get_peft_model`` with Unsloth's keywords, done with transformers + PEFT."""

    def __init__(self, profile: Profile, show=print):
        self.profile = profile
        self.show = show

    # Unsloth 2026.10.9's defaults (labs.l72.rules.DEFAULTS), so a call that leaves one out works here too.
    def from_pretrained(self, model_name="unsloth/Llama-3.2-1B-Instruct", max_seq_length=2048, dtype=None,
                        load_in_4bit=True, *_args, fast_inference=False, max_lora_rank=64,
                        gpu_memory_utilization=0.5, **_ignored):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from labs.training import models

        path = models.model_path(self.profile)
        self.show(f"[sustituto CPU] from_pretrained(model_name={model_name!r}, ...): en CPU cargo {self.profile.model} "
                  f"con transformers, en float32; sin 4 bits (load_in_4bit={load_in_4bit}), sin vLLM dentro "
                  f"(fast_inference={fast_inference}) y sin fracción de GPU ({gpu_memory_utilization}). "
                  f"{WHY_NO_UNSLOTH_ON_CPU_ES}")
        tokenizer = AutoTokenizer.from_pretrained(path)
        tokenizer.model_max_length = max_seq_length
        model = AutoModelForCausalLM.from_pretrained(path)
        return model, tokenizer

    def get_peft_model(self, model, r=16, target_modules=LORA_TARGETS, lora_alpha=16, *_args,
                       use_gradient_checkpointing="unsloth", random_state=3407, **_ignored):
        import torch
        from peft import LoraConfig, get_peft_model

        torch.manual_seed(random_state)  # what Unsloth's random_state seeds: the adapter's initial weights
        self.show(f"[sustituto CPU] get_peft_model(r={r}, lora_alpha={lora_alpha}): adaptador LoRA de PEFT en "
                  f"{', '.join(target_modules)}; sin el checkpointing de Unsloth "
                  f"(use_gradient_checkpointing={use_gradient_checkpointing!r}).")
        config = LoraConfig(r=r, lora_alpha=lora_alpha, target_modules=list(target_modules), task_type="CAUSAL_LM")
        return get_peft_model(model, config)
