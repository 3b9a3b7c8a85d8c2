"""A time and disk plan for a run on an RTX 5090, computed before anything runs: planned, not measured.

Nobody on the course team has timed the ``rtx5090`` profile on a 5090 yet, so the route (notebook 00)
gives these figures, labelled "planificado, no medido", until a measurement replaces them.
The arithmetic, with every assumption named:

* **Generation** (vLLM, colocate): decoding is limited by memory bandwidth, so one decode iteration
  reads the bf16 weights once: ``weights / (bandwidth x BANDWIDTH_EFFICIENCY)``. The KV cache the VRAM
  plan leaves to vLLM (``labs.vram.planner``) holds only a few sequences at a time, so a step takes
  ``completions x mean completion length / sequences at a time`` iterations.
* **Training**: a forward is ``2 x parameters`` FLOPs per token; the backward another ``2 x`` with LoRA
  (no weight gradients for the frozen base; ``4 x`` for a full fine-tune); gradient checkpointing one more
  forward; ``beta != 0`` one forward of the reference model. Divided by the card's bf16 tensor rate
  times ``MFU`` (the share a training loop achieves).
* **Evaluation**: the holdout is generated twice (base and trained), greedy, with the same decode cost.
* Completions are assumed to be ``MEAN_LENGTH_SHARE`` of ``max_completion_length`` long on average, and
  prompts ``PROMPT_TOKENS`` tokens (the GSM8K prompt with the lesson's system message).

Card figures: NVIDIA's published GeForce RTX 5090 specification (1792 GB/s of GDDR7 bandwidth) and the
NVIDIA RTX Blackwell GPU architecture whitepaper (209.5 TFLOPS dense FP16/BF16 tensor throughput with
FP32 accumulation). The two efficiencies are fixed guesses, not measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labs.core.spanish import duration_es
from labs.vram.planner import plan as vram_plan
from labs.vram.spec import BF16, FP32, GIB, model_spec

RTX5090_BANDWIDTH = 1792e9  # bytes/s
RTX5090_BF16_FLOPS = 209.5e12  # dense tensor FLOP/s
BANDWIDTH_EFFICIENCY = 0.6  # fixed guess: share of the bandwidth a decode iteration achieves
MFU = 0.3  # fixed guess: share of the tensor rate a training step achieves
MEAN_LENGTH_SHARE = 0.5  # fixed guess: mean completion length / max_completion_length
PROMPT_TOKENS = 200  # fixed guess: GSM8K question plus the lesson's system message
STEP_OVERHEAD_S = 2.0  # fixed guess: weight sync to vLLM, rewards, logging, per step
LABEL_ES = "planificado, no medido"


@dataclass(frozen=True)
class TimePlan:
    profile: str
    steps: int
    generation_s: float  # per step
    training_s: float  # per step
    evaluation_s: float  # both holdout evaluations
    checkpoint_gb: float  # disk while training (save_total_limit checkpoints)
    final_gb: float  # disk left once finished (model/ or the adapter, logs)

    @property
    def step_s(self) -> float:
        return self.generation_s + self.training_s + STEP_OVERHEAD_S

    @property
    def hours(self) -> float:
        return (self.steps * self.step_s + self.evaluation_s) / 3600

    def breakdown_es(self) -> str:
        return (
            f"{self.steps} pasos de unos {self.step_s:.0f} s ({self.generation_s:.0f} s generando, "
            f"{self.training_s:.0f} s entrenando) y {duration_es(self.evaluation_s)} de evaluación"
        )

    def render_es(self) -> str:
        return (
            f"{_es(self.hours)} h ({LABEL_ES}): {self.steps} pasos de unos {self.step_s:.0f} s "
            f"({self.generation_s:.0f} s generando, {self.training_s:.0f} s entrenando) y "
            f"{duration_es(self.evaluation_s)} de evaluación; disco: hasta {_es(self.checkpoint_gb)} GB mientras "
            f"entrena, {_es(self.final_gb)} GB al terminar"
        )


def _es(x: float) -> str:
    return f"{x:.1f}".replace(".", ",")


def _sequences_at_a_time(profile, mean_tokens: float, path: str = "trl") -> int:
    """How many sequences vLLM's KV cache holds at once, from the VRAM plan's KV line."""
    vplan = vram_plan(profile, path, 32.0)
    kv_gib = next(line.gib for line in vplan.lines if line.name.startswith("vLLM: caché KV"))
    tokens = kv_gib * GIB / model_spec(profile.model).kv_bytes_per_token()
    return max(int(tokens // mean_tokens), 1)


def decode_seconds(profile) -> float:
    """One decode iteration: the bf16 weights read once at the achievable bandwidth."""
    return model_spec(profile.model).params * BF16 / (RTX5090_BANDWIDTH * BANDWIDTH_EFFICIENCY)


def time_plan(profile, path: str = "trl") -> TimePlan:
    """The planned hours and disk of one run of ``profile`` on a 5090: ``path`` "trl" (L7.1, TRL + vLLM
    colocate) or "unsloth" (L7.2; the same arithmetic with the KV cache Unsloth's Standby leaves to vLLM)."""
    spec = model_spec(profile.model)
    completion = profile.max_completion_length * MEAN_LENGTH_SHARE
    at_once = _sequences_at_a_time(profile, PROMPT_TOKENS + completion, path)
    iterations = math.ceil(profile.generation_batch_size / at_once) * completion
    generation = iterations * decode_seconds(profile)

    tokens = profile.generation_batch_size * (PROMPT_TOKENS + completion)
    per_token = 2 + (2 if profile.use_lora else 4)  # forward + backward
    per_token += 2 if profile.gradient_checkpointing else 0
    per_token += 2 if profile.beta != 0 else 0  # the reference model's forward (LoRA: adapters disabled)
    training = per_token * spec.params * tokens / (RTX5090_BF16_FLOPS * MFU)

    eval_completion = profile.eval_max_new_tokens * MEAN_LENGTH_SHARE
    eval_at_once = _sequences_at_a_time(profile, PROMPT_TOKENS + eval_completion, path)
    evaluation = 2 * math.ceil(profile.eval_size / eval_at_once) * eval_completion * decode_seconds(profile)

    if profile.use_lora:
        trained = spec.lora_params(profile.lora_r, profile.lora_targets)
        checkpoint = trained * FP32 * 3  # adapter, two AdamW states
        final = trained * FP32
    else:
        checkpoint = spec.params * BF16 * 3
        final = spec.params * BF16
    logs = profile.max_steps * profile.generation_batch_size * completion * 4  # parquet text, about 4 B/token
    return TimePlan(
        profile.name, profile.max_steps, generation, training, evaluation,
        checkpoint_gb=(checkpoint * profile.save_total_limit + final + logs) / 1e9, final_gb=(final + logs) / 1e9,
    )
