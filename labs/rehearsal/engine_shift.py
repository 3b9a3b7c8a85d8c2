"""Does L7.1's colocated vLLM engine follow the trainer? The log-probability of fixed completions, before and after.

A weight comparison is weak evidence on a GPU: TRL syncs LoRA by merging it in bf16, and after two or three
small steps the merged change sits near bf16's rounding, so "engine weights = trainer weights" cannot tell
a synced engine from a stale one. This check can: a few greedy completions are fixed before training, and
both the engine (vLLM's ``prompt_logprobs``) and the trainer's own model score those same tokens before and
after the steps. If the trainer's log-probabilities moved and the engine's did not, the engine generates
from stale weights (:func:`shift_verdict`).
"""

from __future__ import annotations

import math

SHIFT_MIN = 1e-3  # nats summed over one completion: below this, "did not move"
SHIFT_MAX_RATIO = 10.0  # an engine that moves far more than the trainer holds other weights


def fixed_completions(outputs) -> list[tuple[list[int], list[int]]]:
    """``(prompt token ids, completion token ids)`` of vLLM ``RequestOutput`` objects (empty ones dropped)."""
    return [(list(o.prompt_token_ids), list(o.outputs[0].token_ids)) for o in outputs if o.outputs[0].token_ids]


def engine_logprobs(llm, fixed) -> list[float]:
    """The engine's log-probability of each fixed completion given its prompt (``prompt_logprobs=0``)."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=1, prompt_logprobs=0)
    outputs = llm.generate([{"prompt_token_ids": p + c} for p, c in fixed], params, use_tqdm=False)
    totals = []
    for out, (prompt, completion) in zip(outputs, fixed, strict=True):
        positions = out.prompt_logprobs[len(prompt):len(prompt) + len(completion)]
        totals.append(sum(float(entry[token].logprob) for entry, token in zip(positions, completion, strict=True)))
    return totals


def trainer_logprobs(model, fixed) -> list[float]:
    """The trainer's model's log-probability of each fixed completion (one forward pass each, no gradient)."""
    import torch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    totals = []
    try:
        with torch.no_grad():
            for prompt, completion in fixed:
                ids = torch.tensor([prompt + completion], device=device)
                logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()
                target = torch.tensor(completion, device=device).unsqueeze(1)
                totals.append(float(torch.log_softmax(logits, dim=-1).gather(1, target).sum()))
    finally:
        model.train(was_training)
    return totals


def _largest_shift(before: list[float], after: list[float]) -> float:
    return max((abs(a - b) for a, b in zip(after, before, strict=True)), default=0.0)


def shift_verdict(engine_before, engine_after, trainer_before, trainer_after) -> dict:
    """``ok``: True if the engine moved with the trainer, False if it did not, None if the trainer did not move."""
    values = [*engine_before, *engine_after, *trainer_before, *trainer_after]
    engine, trainer = _largest_shift(engine_before, engine_after), _largest_shift(trainer_before, trainer_after)
    out = {"how": "log-probabilidad de respuestas fijas en el motor vLLM, antes y después de los pasos",
           "completions": len(engine_before), "engine_shift": engine, "trainer_shift": trainer}
    if not values or not all(math.isfinite(v) for v in values):
        return {**out, "ok": False, "why_es": "log-probabilidades ausentes o no finitas"}
    if trainer <= SHIFT_MIN:
        return {**out, "ok": None, "why_es": (f"los pasos apenas movieron las log-probabilidades del propio trainer "
                                              f"({trainer:.2g} nats): no hay cambio que el motor deba seguir")}
    if engine <= SHIFT_MIN:
        return {**out, "ok": False, "why_es": (f"el trainer cambió {trainer:.3g} nats y el motor {engine:.2g}: el "
                                               "motor genera con pesos viejos")}
    if engine > SHIFT_MAX_RATIO * trainer + 1.0:
        return {**out, "ok": False, "why_es": (f"el motor cambió {engine:.3g} nats y el trainer solo {trainer:.3g}: "
                                               "el motor tiene otros pesos")}
    return {**out, "ok": True}
