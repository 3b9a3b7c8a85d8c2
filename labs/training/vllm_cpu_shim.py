"""The one compatibility shim that lets TRL's vLLM colocate mode train on a CPU.

Why it exists
-------------
vLLM's CPU back-end repacks the weight of every linear layer for its fast GEMM kernels when the
model is loaded (``dispatch_cpu_unquantized_gemm`` in ``vllm.model_executor.layers.utils``), and for
most layers it then replaces the original ``weight`` parameter with an empty one. That is right for
serving, but GRPO in colocate mode pushes the trained weights into the vLLM model after every
optimizer step (``model.load_weights(...)``), which then fails with
``AttributeError: 'Parameter' object has no attribute 'weight_loader'``. Worse, a layer that kept its
weight but computes from a packed copy would silently keep generating with the old weights.

What it does
------------
1. Before the engine is built, replace that dispatch with one that still packs every 2-D weight for
   vLLM's fast kernel (oneDNN) but keeps the weight itself, so weight sync can write into it; after each
   TRL sync (``VLLMGeneration.sync_weights``) ``repack`` rebuilds every packed copy from the live weights.
   (Computing with ``torch.nn.functional.linear`` on the live weights, as this shim did before, made a
   ci step's generation 3.37 s against 1.99 s packed, and a 4-problem evaluation 1.81 s against 1.11 s:
   one thread, December 2026; the packed copies cost 0.45 GiB more resident memory in a ci run, 5.28
   against 4.83 GiB.) Layers that are not plain linear layers (3-D weights) still go through vLLM's own
   dispatch.
2. Build TRL's colocated engine in float32. vLLM's CPU back-end otherwise down-casts a float32
   checkpoint to bfloat16: the synced weights would differ from the trainer's by bf16 rounding, and
   bf16 matrix products are very slow on CPUs without native bf16 instructions. The trainer's
   weights are float32 on a CPU (the ci profile's ``bf16=True`` is autocast: only its matrix products
   run in bf16), so the engine matches them exactly. The same wrapper turns on
   ``enforce_eager``: compiling the model graph on CPU took minutes of start-up here against
   seconds without it, for no gain that a 135M model's short generations can use.
3. Size the engine's KV cache explicitly, for what it can hold at once (``VLLM_CPU_KVCACHE_SPACE``,
   in GiB, overrides it). On CPU, vLLM reads ``gpu_memory_utilization`` as a fraction of the machine's
   RAM and gives the KV cache that amount minus the whole process's resident memory (torch, the
   training model, vLLM's own copy). With 0.3 that reserves ~7 GiB on a 24 GiB machine, refuses to
   start when other programs use the RAM, and with 0.1 it is negative. TRL caps the engine at
   ``max_num_seqs`` = one generation batch (per_device_train_batch_size x steps_per_generation; the
   evaluation too goes through in waves of that many), each at most ``max_model_len`` tokens, so
   ``kv_cache_bytes_for`` gives it that many sequences plus one, in whole 128-token blocks: 0.15 GiB
   on the cpu profile, where a fixed 1 GiB (23,000 tokens of SmolLM2's float32 cache, for at most
   8 x 320) was resident and mostly unused (benchmarks/bench_footprint.py).

It is applied only when vLLM runs on its CPU back-end, never on CUDA. ``apply()`` is idempotent.
``engine_weight_diff(trainer)`` measures, after a step, how far the engine's weights (and what its kernels
compute with) are from the trainer's: the tests and the L7.1 lab use it to show the sync really happened.
"""

from __future__ import annotations

import functools
import os

_APPLIED = False
CPU_KV_CACHE_BYTES = 1 << 30  # when the model's config cannot be read (and the most it gets)
CPU_BLOCK_TOKENS = 128  # vLLM's CPU back-end's default KV block size (vllm.platforms.cpu)


def vllm_runs_on_cpu() -> bool:
    """True when vLLM is installed and its platform is the CPU back-end."""
    try:
        from vllm.platforms import current_platform
    except Exception:  # vLLM missing or broken: nothing to patch
        return False
    return bool(current_platform.is_cpu())


PACKED = "_course_packed"  # marks a layer whose fast kernel computes from a packed copy of its weight


def _keep_weight_dispatch(original):
    @functools.wraps(original)
    def dispatch(layer, remove_weight: bool) -> None:
        weight = getattr(layer, "weight", None)
        if weight is not None and not weight.is_meta and weight.ndim == 2:
            # vLLM's own fast kernel (oneDNN), but the weight stays: weight sync writes into it, and
            # ``repack`` rebuilds the kernel's packed copy from it after every sync.
            original(layer, remove_weight=False)
            setattr(layer, PACKED, True)
            return
        original(layer, remove_weight=remove_weight)

    dispatch.__course_shim__ = True  # pyright: ignore[reportAttributeAccessIssue] - a marker on the wrapper, read back with getattr
    dispatch.__course_original__ = original  # pyright: ignore[reportAttributeAccessIssue] - a marker on the wrapper, read back with getattr
    return dispatch


def repack(model) -> int:
    """Rebuild the packed copy of every linear weight of a vLLM model from its live weight; layers repacked."""
    import vllm.model_executor.layers.utils as utils_mod

    original = getattr(utils_mod.dispatch_cpu_unquantized_gemm, "__course_original__", None)
    if original is None:
        return 0
    layers = [m for m in model.modules() if getattr(m, PACKED, False)]
    for layer in layers:
        original(layer, remove_weight=False)
    return len(layers)


def _repacking_sync(sync_weights):
    @functools.wraps(sync_weights)
    def sync_then_repack(self, *args, **kwargs):
        result = sync_weights(self, *args, **kwargs)
        if self.mode == "colocate":  # the engine lives in this process
            repack(_llm_model_runner(self.llm).model)
        return result

    sync_then_repack.__course_shim__ = True  # pyright: ignore[reportAttributeAccessIssue] - a marker on the wrapper, read back with getattr
    return sync_then_repack


PROBE_COLUMNS = 8  # weight columns read back through each packed kernel by engine_weight_diff


def kernel_columns(layer, columns):
    """Columns ``columns`` of the weight a linear layer's kernel really computes with (shape: out x len).

    One-hot inputs make every output one product with 1.0 plus zeros, exact in float32: the columns equal the
    live weight's when the kernel's packed copy is fresh, and differ where it still holds old weights (every
    weight moves in an AdamW step, so a few columns show it).
    """
    import torch

    weight = layer.weight.detach()
    probes = torch.eye(weight.shape[1], dtype=weight.dtype)[columns]
    with torch.no_grad():
        return layer.cpu_linear(probes, weight, None).T


def kv_bytes_per_token(model: str) -> int | None:
    """Float32 K and V of every layer for one token, from the model's ``config.json`` (None if unreadable)."""
    import json
    from pathlib import Path

    try:
        config = json.loads((Path(model) / "config.json").read_text())
        heads = config["num_attention_heads"]
        head_dim = config.get("head_dim") or config["hidden_size"] // heads
        kv_heads = config.get("num_key_value_heads") or heads
        return 2 * config["num_hidden_layers"] * kv_heads * head_dim * 4
    except (OSError, ValueError, KeyError, TypeError):
        return None


def kv_cache_bytes_for(model: str, max_num_seqs: int | None, max_model_len: int | None) -> int:
    """Bytes of a float32 KV cache that holds ``max_num_seqs + 1`` sequences of ``max_model_len`` tokens.

    In whole blocks of ``CPU_BLOCK_TOKENS``; ``CPU_KV_CACHE_BYTES`` when the model's config or a length
    is missing, and never more than that.
    """
    per_token = kv_bytes_per_token(model)
    if not per_token or not max_num_seqs or not max_model_len:
        return CPU_KV_CACHE_BYTES
    blocks = -(-max_model_len // CPU_BLOCK_TOKENS) * (max_num_seqs + 1)
    return min(CPU_KV_CACHE_BYTES, blocks * CPU_BLOCK_TOKENS * per_token)


def _float32_llm(llm_cls):
    class Float32LLM(llm_cls):
        __course_shim__ = True

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("dtype", "float32")
            kwargs.setdefault("enforce_eager", True)
            if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
                size = kv_cache_bytes_for(
                    str(kwargs.get("model", args[0] if args else "")), kwargs.get("max_num_seqs"),
                    kwargs.get("max_model_len"),
                )
                kwargs.setdefault("kv_cache_memory_bytes", size)
            super().__init__(*args, **kwargs)

    Float32LLM.__name__ = Float32LLM.__qualname__ = "LLM"
    return Float32LLM


def apply() -> bool:
    """Install the shim if vLLM runs on CPU. Returns True when the shim is (now) in place."""
    global _APPLIED
    if _APPLIED:
        return True
    if not vllm_runs_on_cpu():
        return False
    import vllm.model_executor.layers.linear as linear_mod
    import vllm.model_executor.layers.utils as utils_mod

    if not getattr(utils_mod.dispatch_cpu_unquantized_gemm, "__course_shim__", False):
        utils_mod.dispatch_cpu_unquantized_gemm = _keep_weight_dispatch(
            utils_mod.dispatch_cpu_unquantized_gemm
        )
    # linear.py imports the function inside a method today; patch a module-level copy too in case a
    # vLLM release imports it at the top.
    if hasattr(linear_mod, "dispatch_cpu_unquantized_gemm"):
        linear_mod.dispatch_cpu_unquantized_gemm = utils_mod.dispatch_cpu_unquantized_gemm  # pyright: ignore[reportAttributeAccessIssue] - guarded by hasattr: only some vLLM releases have it

    import trl.generation.vllm_generation as trl_vllm

    if not getattr(trl_vllm.LLM, "__course_shim__", False):
        trl_vllm.LLM = _float32_llm(trl_vllm.LLM)
    if not getattr(trl_vllm.VLLMGeneration.sync_weights, "__course_shim__", False):
        trl_vllm.VLLMGeneration.sync_weights = _repacking_sync(trl_vllm.VLLMGeneration.sync_weights)
    _APPLIED = True
    return True


def is_applied() -> bool:
    return _APPLIED


# vLLM fuses some projections into one matrix; these are the trainer-side parts, in order.
_FUSED = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "gate_up_proj": ("gate_proj", "up_proj"),
}


def _llm_model_runner(llm):
    return llm.llm_engine.model_executor.driver_worker.model_runner


def _model_runner(trainer):
    return _llm_model_runner(trainer.vllm_generation.llm)


def vllm_model(trainer):
    """The vLLM model object inside a colocate-mode GRPOTrainer."""
    return _model_runner(trainer).model


def engine_kv_cache_bytes(trainer) -> int:
    """Bytes of the KV cache tensors the colocated engine allocated (every layer)."""
    flat = []
    for cache in _model_runner(trainer).kv_caches:
        flat.extend(cache if isinstance(cache, (list, tuple)) else [cache])
    return sum(t.numel() * t.element_size() for t in flat)


def engine_weight_diff(trainer) -> dict:
    """Compare every weight of the colocated vLLM engine with the trainer's.

    Returns ``{"max_abs_diff": float, "compared": int, "missing": [names]}``. Fused vLLM matrices
    (``qkv_proj``, ``gate_up_proj``) are compared with the concatenation of the trainer's parts. A linear
    layer counts both its live weight and ``PROBE_COLUMNS`` columns read back through its packed kernel
    (``kernel_columns``), so a kernel left with old weights shows as a difference.
    """
    import torch

    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_adapter"):
        raise ValueError("engine_weight_diff compares full models; merge the LoRA adapter first")
    engine = vllm_model(trainer)
    theirs = dict(engine.named_parameters())
    # a packed layer computes from its kernel's copy: compare that copy, not only the live parameter
    packed = {f"{name}.weight": module for name, module in engine.named_modules() if getattr(module, PACKED, False)}
    ours = {name: p.detach() for name, p in model.named_parameters()}
    max_diff, compared, missing = 0.0, 0, []
    for name, param in theirs.items():
        if param.numel() == 0:
            missing.append(name)
            continue
        expected = ours.get(name)
        if expected is None:
            for fused, parts in _FUSED.items():
                if f".{fused}." in name:
                    pieces = [ours.get(name.replace(fused, part)) for part in parts]
                    if all(p is not None for p in pieces):
                        expected = torch.cat(pieces, dim=0)
                    break
        if expected is None or expected.shape != param.shape:
            missing.append(name)
            continue
        diff = (param.detach().float() - expected.float()).abs().max().item()
        if name in packed:  # and what its kernel computes with, read back on a few columns
            columns = torch.linspace(0, param.shape[1] - 1, PROBE_COLUMNS).long().unique()
            used = kernel_columns(packed[name], columns)
            diff = max(diff, (used.float() - expected[:, columns].float()).abs().max().item())
        max_diff = max(max_diff, diff)
        compared += 1
    return {"max_abs_diff": max_diff, "compared": compared, "missing": missing}
