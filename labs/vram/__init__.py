"""A VRAM plan computed before anything is loaded: will this profile fit on this card, and why.

``plan(profile, path="trl" | "unsloth", card_gib=None)`` returns a :class:`VramPlan` with one line per
item (name, GiB, the arithmetic as text); ``VramPlan.render_es()`` prints it for the student, with a
warning and the knobs to turn when it does not fit. Pure arithmetic on the model's architecture and the
profile: no torch, no download. The only thing read from the machine is the card's memory, and only
when ``card_gib`` is not given and a CUDA GPU is visible.

The modules: ``spec`` (the model's architecture, the bytes of each item, the card's memory),
``planner`` (the plan of each path, its rendering and the knobs) and ``cli`` (``python -m labs vram``).
"""

from __future__ import annotations

import functools

from labs.vram import planner
from labs.vram.cli import main
from labs.vram.planner import (
    CUDA_CONTEXT_GIB, KV_BLOCK_TOKENS, STANDBY_UTILIZATION, VLLM_OVERHEAD_GIB, Line, VramPlan,
)
from labs.vram.spec import (
    BF16, DEFAULT_CARD_GIB, FP32, GIB, KNOWN_MODELS, NF4_BYTES, QWEN3_4B, SMOLLM2_135M, ModelSpec, card_memory_gib,
    checkpoint_bytes, kv_cache_bytes, layer_activation_bytes, logits_bytes, model_spec, weights_bytes,
)

__all__ = [
    "BF16", "CUDA_CONTEXT_GIB", "DEFAULT_CARD_GIB", "FP32", "GIB", "KNOWN_MODELS", "KV_BLOCK_TOKENS", "NF4_BYTES",
    "QWEN3_4B", "SMOLLM2_135M", "STANDBY_UTILIZATION", "VLLM_OVERHEAD_GIB", "Line", "ModelSpec", "VramPlan",
    "card_memory_gib", "checkpoint_bytes", "kv_cache_bytes", "layer_activation_bytes", "logits_bytes", "main",
    "model_spec", "plan", "weights_bytes",
]


@functools.wraps(planner.plan)
def plan(profile, path: str = "trl", card_gib: float | None = None, **options) -> VramPlan:
    # The card is read here, through this package, so that replacing ``labs.vram.card_memory_gib`` (a test,
    # a notebook on a machine without a GPU) reaches ``labs.vram.plan``, as when all this was one module.
    return planner.plan(profile, path, card_memory_gib() if card_gib is None else card_gib, **options)
