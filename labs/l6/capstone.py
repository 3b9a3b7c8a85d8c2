"""The L6 capstone: the student's GRPO loss against ``trl.GRPOTrainer.compute_loss`` on one real batch.

``labs.l6.trainer_check.run_trainer_check`` runs one real step of the trainer on the bundled model and keeps
the trainer and the batch its loss saw (prompt and completion ids and masks, advantages, the token count).
``compare_with_trl`` takes them and, for each configuration in ``CONFIGS`` (``beta`` 0 and 0.04, ``loss_type``
``"grpo"`` and ``"dapo"``):

1. gives the batch old and reference log-probabilities: the current ones (``token_logps``) plus a fixed,
   seeded noise. On the first step after generation both equal the current ones, so the ratio is 1 (nothing
   to clip) and k3 is 0 with a zero gradient: a loss without clipping or without KL would pass. The noise
   (``NOISE``) moves ratios to both sides of ``[1 - eps, 1 + eps]`` and makes k3 bite;
2. asks TRL for the loss (``trainer.compute_loss``, its public method, with ``trainer.beta`` and
   ``trainer.loss_type`` set for the configuration) and backpropagates it;
3. runs the model on the same ids, hands the logits to the student's ``token_logps`` and those, with the
   student's advantages, to the student's ``loss``, and backpropagates that;
4. reports the absolute difference of the two losses and the largest absolute difference of the gradients
   of one named parameter (``PARAMETER``), divided by the largest absolute TRL gradient.

The reference implementations (``token_logps``, ``reference_loss``) are what the repository's tests pass as
the "student"; the notebook's checks compare against them on random tensors.

Tolerances: float32 model, TRL scores the completion through its fused LM head (in tiles, on a GPU with a
Triton kernel) and the student through the full logits, so the two differ by rounding only:
``LOSS_ATOL = 1e-5`` on the loss (measured at most 1.2e-6 on a CPU with TRL 1.16) and ``GRAD_RTOL = 1e-4`` on
the gradient relative to its largest entry (measured at most 1.6e-5). A wrong piece (no KL, no clipping, one
normalisation for all, an unshifted log-probability) misses by at least 100 times a tolerance:
``tests/test_trainer_check.py``.

On a GPU (not measured here: no card) the same tolerances should hold, for these reasons read from TRL 1.15's
source: ``create_model_from_path`` loads the model in float32 unless told otherwise, the check's config sets
``bf16=False`` (no autocast), and the loss's fused LM head (``ChunkedLogProbFunction`` in
``trl/kernels/chunked_logprob.py``, which ``trl/trainer/utils.py`` applies to the completion tokens) projects in
cuBLAS tiles of 32768 vocabulary entries and folds each tile with a Triton kernel into online-logsumexp statistics
in float32: another summation order than torch's ``log_softmax``, a difference of float32 rounding (about 1e-7
relative per token). What would break them is lower precision in the matrix products: TF32 (about 1e-3 relative)
or a half-precision model. ``precision_problem`` refuses both before comparing (the micro-step's comparison too),
so a mismatch on a card is the student's, not the arithmetic's.
"""

from __future__ import annotations

import contextlib

import torch

CONFIGS: tuple[tuple[float, str], ...] = ((0.0, "grpo"), (0.0, "dapo"), (0.04, "grpo"), (0.04, "dapo"))
PARAMETER = "model.layers.29.mlp.down_proj.weight"  # the last layer's: a short backward, so the check stays quick
NOISE = 0.3  # std of the shift of old and reference log-probabilities (exp(0.3) = 1.35: beyond 1 + 0.2)
LOSS_ATOL = 1e-5
GRAD_RTOL = 1e-4


def token_logps(logits: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Log-probability of each completion token: position ``t`` of ``logits`` predicts token ``t + 1`` of ``ids``.

    ``logits`` (B, L, V) over the whole sequence (prompt then completion), ``ids`` (B, L), ``mask`` (B, C) the
    completion mask. Returns (B, C), 0 where the mask is 0.
    """
    width = mask.shape[1]
    logp = torch.log_softmax(logits[:, :-1], dim=-1)
    chosen = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return chosen[:, -width:] * mask


def reference_loss(logp, old_logp, ref_logp, advantages, mask, beta: float, loss_type: str,
                   epsilon: float = 0.2, max_completion_length: int | None = None) -> torch.Tensor:
    """TRL's GRPO loss for ``loss_type`` in ``"grpo"``, ``"dapo"``, ``"dr_grpo"`` (one process, no accumulation)."""
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(1)
    per_token = -torch.min(ratio * adv, torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * adv)
    if beta != 0.0:
        per_token = per_token + beta * (torch.exp(ref_logp - logp) - (ref_logp - logp) - 1)
    mask = mask.to(per_token.dtype)
    if loss_type == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "dapo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    if loss_type == "dr_grpo":
        return (per_token * mask).sum() / (per_token.shape[0] * max_completion_length)
    raise ValueError(f"loss_type desconocido: {loss_type!r}")


def _parameter(model, name: str) -> torch.nn.Parameter:
    params = dict(model.named_parameters())
    if name not in params:
        raise KeyError(f"El modelo no tiene el parámetro {name!r}.")
    return params[name]


def _gradient(model, param, loss: torch.Tensor, retain_graph: bool = False) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    loss.backward(retain_graph=retain_graph)
    grad = param.grad.detach().clone()
    model.zero_grad(set_to_none=True)
    return grad


def matmul_precision(device_type: str) -> str:
    """How float32 matrix products run on ``device_type``: ``"ieee"`` (full float32), ``"tf32"`` or ``"bf16"``.

    Read through torch's per-backend ``fp32_precision`` (cuBLAS for ``"cuda"``, oneDNN otherwise), which reflects
    both APIs: ``torch.set_float32_matmul_precision("high")`` reads ``"tf32"`` here. The legacy getters
    (``torch.get_float32_matmul_precision()``, ``torch.backends.cuda.matmul.allow_tf32``) raise on torch 2.13 once
    anything has set the new one ("you have used mix of the legacy and new APIs").
    """
    backend = torch.backends.cuda.matmul if device_type == "cuda" else torch.backends.mkldnn.matmul  # pyright: ignore[reportAttributeAccessIssue] - torch sets the submodule at import; its stub omits it
    value = backend.fp32_precision
    return "ieee" if value == "none" else value  # "none": never set, torch's default (full precision)


def precision_problem(model) -> str | None:
    """Spanish reason why the comparison's tolerances cannot hold on this model and machine, or None."""
    param = next(model.parameters())
    if param.dtype != torch.float32:
        return (f"El modelo del trainer está en {param.dtype} y la comparación necesita float32: con menos precisión "
                "la pérdida de TRL y la tuya difieren más que la tolerancia aunque tu código sea correcto.")
    device = param.device.type
    if (precision := matmul_precision(device)) != "ieee":
        backend = "cuda" if device == "cuda" else "mkldnn"
        return (f"Los productos de matrices en float32 usan {precision.upper()} (torch.backends.{backend}.matmul."
                f"fp32_precision = {precision!r}; TF32 o bf16 redondean ~1e-3): la comparación necesita 'ieee'. "
                f"Ponlo con torch.backends.{backend}.matmul.fp32_precision = 'ieee' antes de la comparación.")
    return None


@contextlib.contextmanager
def only_parameter_trains(trainer, parameter: str, num_threads: int | None, train_mode: bool | None = None):
    """While comparing: only ``parameter`` of the trainer's model takes a gradient (the others are frozen), torch
    runs ``num_threads`` threads (``None`` leaves them) and, with ``train_mode``, the model is in that mode (TRL's
    ``compute_loss`` reads it). Yields the parameter; the trainer's ``beta``, ``loss_type``, the flags, the mode and
    the threads are restored after."""
    threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    model = trainer.model
    saved = trainer.beta, trainer.loss_type
    frozen = {name: p.requires_grad for name, p in model.named_parameters()}
    was_training = model.training
    try:
        param = _parameter(model, parameter)
        for p in model.parameters():
            p.requires_grad_(p is param)
        if train_mode is not None:
            model.train(train_mode)
        yield param
    finally:
        trainer.beta, trainer.loss_type = saved
        for name, p in model.named_parameters():
            p.requires_grad_(frozen[name])
        model.train(was_training)
        torch.set_num_threads(threads)


def prepared_tensors(report: dict, seed: int = 0, noise: float = NOISE, min_length: int = 4) -> dict:
    """The step's real batch, ready for the comparison: completions cut at seeded lengths, old and reference
    log-probabilities shifted by a seeded noise.

    With 16 new tokens every completion of the bundled model runs to the limit, and with equal lengths
    ``"grpo"``, ``"dapo"`` and ``"dr_grpo"`` give the same number: cutting each completion's mask at a random
    length (as if it had ended there) tells them apart. The kept tokens do not see the cut ones (causal model).

    Every tensor made here lands on the batch's device (CUDA when the trainer ran on a GPU). The seeded draws
    come from a CPU generator and are then moved, so the cut and the noise are the same numbers on any device.
    """
    trainer, batch = report["trainer"], report["batch"]
    if (problem := precision_problem(trainer.model)) is not None:
        raise ValueError(problem)
    gen = torch.Generator().manual_seed(seed)
    mask = batch["completion_mask"].clone()
    device, width = mask.device, mask.shape[1]
    lengths = torch.randint(min(min_length, width), width + 1, (mask.shape[0],), generator=gen).to(device)
    mask = mask * (torch.arange(width, device=device).unsqueeze(0) < lengths.unsqueeze(1)).to(mask.dtype)
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], mask], dim=1)
    with torch.no_grad():
        logits = trainer.model(input_ids=ids, attention_mask=attention, logits_to_keep=width + 1).logits
        now = token_logps(logits, ids[:, -(width + 1):], mask)
    old = (now + noise * torch.randn(now.shape, generator=gen).to(now)) * mask
    ref = (now + noise * torch.randn(now.shape, generator=gen).to(now)) * mask
    inputs = {**batch, "completion_mask": mask, "num_items_in_batch": mask.sum(),
              "old_per_token_logps": old, "ref_per_token_logps": ref}
    return {"inputs": inputs, "ids": ids, "attention": attention, "width": width, "now": now}


def prepared_batch(report: dict, seed: int = 0, noise: float = NOISE, min_length: int = 4) -> dict:
    """``prepared_tensors`` plus what the table reports of it: the fraction of clipped ratios and the lengths."""
    batch = prepared_tensors(report, seed, noise, min_length)
    mask = batch["inputs"]["completion_mask"]
    ratio = torch.exp(batch.pop("now") - batch["inputs"]["old_per_token_logps"])[mask.bool()]
    eps = report["trainer"].args.epsilon
    return {**batch, "clipped_fraction": float(((ratio < 1 - eps) | (ratio > 1 + eps)).float().mean()),
            "lengths": mask.sum(dim=1).tolist()}


def compare_with_trl(report: dict, student_token_logps, student_loss, configs=CONFIGS, parameter: str = PARAMETER,
                     seed: int = 0, num_threads: int | None = 1) -> list[dict]:
    """One row per configuration: TRL's loss and the student's, and the gradient difference of ``parameter``.

    ``report``: what ``run_trainer_check`` returned (its ``trainer`` and ``batch``). ``student_token_logps(logits,
    ids, mask)`` and ``student_loss(logp, old_logp, ref_logp, advantages, mask, beta, loss_type, epsilon,
    max_completion_length)`` are the student's functions; the advantages are the batch's (TRL shuffles the
    batch after generation; section 6 compares the student's advantages with TRL's).

    Only ``parameter`` takes a gradient during the comparison (the others are frozen and restored after). The
    model runs once for the student whatever the number of configurations, and TRL's loss and gradient are
    kept in ``report`` for later calls with the same seed and parameter (the model does not change in between).
    """
    trainer = report["trainer"]
    model = trainer.model
    with only_parameter_trains(trainer, parameter, num_threads) as param:
        batch = report.setdefault("_capstone_batches", {}).get(seed) or prepared_batch(report, seed)
        report["_capstone_batches"][seed] = batch
        cache = report.setdefault("_capstone_trl", {})
        for beta, loss_type in configs:
            if (seed, parameter, beta, loss_type) not in cache:
                trainer.beta, trainer.loss_type = beta, loss_type
                loss = trainer.compute_loss(model, batch["inputs"])
                cache[seed, parameter, beta, loss_type] = float(loss.detach()), _gradient(model, param, loss)
        inputs, width = batch["inputs"], batch["width"]
        logits = model(input_ids=batch["ids"], attention_mask=batch["attention"], logits_to_keep=width + 1).logits
        rows = []
        for k, (beta, loss_type) in enumerate(configs):
            logp = student_token_logps(logits, batch["ids"][:, -(width + 1):], inputs["completion_mask"])
            loss = student_loss(logp, inputs["old_per_token_logps"], inputs["ref_per_token_logps"],
                                inputs["advantages"], inputs["completion_mask"], beta, loss_type,
                                trainer.args.epsilon, trainer.args.max_completion_length)
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.requires_grad:
                raise TypeError("Tu pérdida debe ser un tensor escalar que dependa de las log-probabilidades del modelo.")
            grad = _gradient(model, param, loss, retain_graph=k < len(configs) - 1)
            trl_value, trl_grad = cache[seed, parameter, beta, loss_type]
            scale, value = float(trl_grad.abs().max()), float(loss.detach())
            rows.append({
                "beta": beta,
                "loss_type": loss_type,
                "trl_loss": trl_value,
                "loss": value,
                "loss_diff": abs(trl_value - value),
                "grad_diff": float((grad - trl_grad).abs().max()) / max(scale, 1e-30),
                "grad_scale": scale,
                "clipped_fraction": batch["clipped_fraction"],
                "lengths": batch["lengths"],
            })
        return rows


def matches(row: dict) -> bool:
    return row["loss_diff"] <= LOSS_ATOL and row["grad_diff"] <= GRAD_RTOL


def verdict(diff: float, tol: float) -> str:
    """nn-zero-to-hero's ``cmp()`` in words: exact, within the tolerance, or not."""
    if diff == 0.0:
        return "exacta"
    return "coincide" if diff <= tol else "NO coincide"


def format_comparison(rows: list[dict], parameter: str = PARAMETER) -> str:
    """The rows as a Spanish table, one line per configuration, the measured differences and the verdicts."""
    head = (f"{'beta':>5} {'loss_type':>9} | {'pérdida TRL':>12} {'la tuya':>12} {'|dif|':>8} | "
            f"{'gradiente: máx |dif| / máx |g|':>31}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['beta']:>5g} {r['loss_type']:>9} | {r['trl_loss']:>+12.6f} {r['loss']:>+12.6f} "
                     f"{r['loss_diff']:>8.1e} | {r['grad_diff']:>19.1e} -> {verdict(r['grad_diff'], GRAD_RTOL)}")
    worst_loss = max(r["loss_diff"] for r in rows)
    worst_grad = max(r["grad_diff"] for r in rows)
    lines += [
        "",
        f"tu pérdida = la de TRL: diferencia máxima {worst_loss:.1e} -> {verdict(worst_loss, LOSS_ATOL)} "
        f"(tolerancia {LOSS_ATOL:.0e})",
        f"tu gradiente de {parameter} = el de TRL: diferencia relativa máxima {worst_grad:.1e} -> "
        f"{verdict(worst_grad, GRAD_RTOL)} (tolerancia {GRAD_RTOL:.0e})",
        f"tokens con el ratio fuera de [1-ε, 1+ε]: {rows[0]['clipped_fraction']:.0%} (el recorte actúa)",
    ]
    return "\n".join(lines)
