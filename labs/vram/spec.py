"""The numbers a VRAM plan is made of: a model's architecture (:class:`ModelSpec`), the bytes of each
item (one function per item), and the memory of the card.

Pure arithmetic on the architecture: no torch, no download. The only thing read from the machine is the
card's memory, in :func:`card_memory_gib`. Sizes are GiB (2**30 bytes). The estimates are checked against
published figures in ``tests/test_vram.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 2**30
DEFAULT_CARD_GIB = 32.0  # RTX 5090: 32 GB of GDDR7; torch reports a little less once the driver is loaded

BF16 = 2
FP32 = 4
# bitsandbytes NF4 with double quantisation (what Unsloth loads): 4 bits a weight, one 8-bit absmax per
# block of 64 weights, one fp32 constant per 256 blocks. Embeddings, lm_head and norms stay in bf16.
NF4_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)


@dataclass(frozen=True)
class ModelSpec:
    """The architecture numbers a memory estimate needs (dense decoder, gated MLP)."""

    name: str
    n_layers: int
    hidden: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    qk_norm: bool = False  # Qwen3 normalises q and k per head: 2 x head_dim more weights a layer

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    def projection_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear layer of one decoder layer, by the names LoRA targets use."""
        h, q, kv, i = self.hidden, self.q_dim, self.kv_dim, self.intermediate
        return {
            "q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h),
        }  # fmt: skip

    @property
    def linear_params(self) -> int:
        """Weights of the seven projections in all layers: what 4-bit quantises."""
        return self.n_layers * sum(a * b for a, b in self.projection_shapes().values())

    @property
    def embedding_params(self) -> int:
        """Input embeddings plus lm_head when it is not tied to them."""
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def norm_params(self) -> int:
        per_layer = 2 * self.hidden + (2 * self.head_dim if self.qk_norm else 0)
        return self.n_layers * per_layer + self.hidden

    @property
    def params(self) -> int:
        return self.linear_params + self.embedding_params + self.norm_params

    def lora_params(self, rank: int, targets) -> int:
        shapes = self.projection_shapes()
        unknown = sorted(set(targets) - set(shapes))
        if unknown:
            raise ValueError(f"LoRA targets {unknown} are not projections of {self.name}: {sorted(shapes)}")
        return self.n_layers * sum(rank * (shapes[t][0] + shapes[t][1]) for t in targets)

    def activation_bytes_per_token_layer(self) -> int:
        """bf16 tensors one decoder layer keeps for its backward, per token, with FlashAttention/SDPA
        (no seq x seq matrix): both norms' inputs and outputs (4h), q and attention output (2q),
        k and v (2kv), and the gated MLP's gate, up, act(gate) and product (4i)."""
        return BF16 * (4 * self.hidden + 2 * self.q_dim + 2 * self.kv_dim + 4 * self.intermediate)

    def kv_bytes_per_token(self) -> int:
        """K and V of every layer, bf16: what vLLM's cache stores for each token."""
        return 2 * self.n_layers * self.kv_dim * BF16


QWEN3_4B = ModelSpec(
    name="Qwen3-4B-Instruct-2507", n_layers=36, hidden=2560, n_heads=32, n_kv_heads=8, head_dim=128,
    intermediate=9728, vocab=151936, tied_embeddings=True, qk_norm=True,
)  # fmt: skip
SMOLLM2_135M = ModelSpec(
    name="SmolLM2-135M-Instruct", n_layers=30, hidden=576, n_heads=9, n_kv_heads=3, head_dim=64,
    intermediate=1536, vocab=49152, tied_embeddings=True,
)  # fmt: skip

# Names the profiles use. Qwen3-4B-Base has the same architecture as the Instruct-2507 release.
KNOWN_MODELS: dict[str, ModelSpec] = {
    "Qwen/Qwen3-4B-Instruct-2507": QWEN3_4B,
    "unsloth/Qwen3-4B-Instruct-2507": QWEN3_4B,
    "unsloth/Qwen3-4B-Base": QWEN3_4B,
    "Qwen/Qwen3-4B-Base": QWEN3_4B,
    "bundled:SmolLM2-135M-Instruct": SMOLLM2_135M,
    "HuggingFaceTB/SmolLM2-135M-Instruct": SMOLLM2_135M,
}


def model_spec(model) -> ModelSpec:
    """A :class:`ModelSpec` from a known name, a ``config.json``-style dict, or a spec."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, dict):
        heads = model["num_attention_heads"]
        return ModelSpec(
            name=model.get("_name_or_path") or model.get("name") or "config",
            n_layers=model["num_hidden_layers"],
            hidden=model["hidden_size"],
            n_heads=heads,
            n_kv_heads=model.get("num_key_value_heads") or heads,
            head_dim=model.get("head_dim") or model["hidden_size"] // heads,
            intermediate=model["intermediate_size"],
            vocab=model["vocab_size"],
            tied_embeddings=bool(model.get("tie_word_embeddings", False)),
            qk_norm=bool(model.get("qk_norm", model.get("model_type") == "qwen3")),
        )
    if model in KNOWN_MODELS:
        return KNOWN_MODELS[model]
    raise KeyError(
        f"No conozco la arquitectura de '{model}'. Modelos conocidos: {', '.join(sorted(KNOWN_MODELS))}; "
        "para otro, pasa su config.json como dict (model=json.load(...))."
    )


# --------------------------------------------------------------------------------------------------
# The arithmetic, one function per item (the tests check each against published figures)
# --------------------------------------------------------------------------------------------------


def weights_bytes(spec: ModelSpec, four_bit: bool) -> float:
    if not four_bit:
        return spec.params * BF16
    return spec.linear_params * NF4_BYTES + (spec.embedding_params + spec.norm_params) * BF16


def logits_bytes(sequences: int, tokens: int, vocab: int) -> int:
    """One float32 logits tensor: sequences x tokens x vocab x 4 B."""
    return sequences * tokens * vocab * FP32


def checkpoint_bytes(spec: ModelSpec, sequences: int, tokens: int) -> int:
    """Gradient checkpointing keeps each layer's input hidden state: sequences x tokens x h x layers x 2 B."""
    return sequences * tokens * spec.hidden * spec.n_layers * BF16


def layer_activation_bytes(spec: ModelSpec, sequences: int, tokens: int, layers: int) -> int:
    return sequences * tokens * layers * spec.activation_bytes_per_token_layer()


def kv_cache_bytes(spec: ModelSpec, tokens: int) -> int:
    return tokens * spec.kv_bytes_per_token()


def card_memory_gib() -> float:
    """The visible GPU's memory, or :data:`DEFAULT_CARD_GIB` when there is none (or no torch)."""
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_properties(0).total_memory / GIB
    except Exception:  # noqa: BLE001 - no torch, broken driver: fall back to the default card
        pass
    return DEFAULT_CARD_GIB
