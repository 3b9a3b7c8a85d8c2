"""The student's GRPO micro-batch step against a real ``GRPOTrainer`` step with gradient accumulation (L6, section 8).

What a training step does around the loss, as Stanford CS336's assignment 5 asks for it
(``compute_entropy``, ``get_response_log_probs``, ``grpo_microbatch_train_step``): the logits divided by the
sampling temperature, per-token log-probabilities and entropy, the loss of one micro-batch scaled for gradient
accumulation, and ``backward()``. With ``gradient_accumulation_steps=2`` TRL 1.15/1.16 (``_compute_loss``) divides
``"grpo"`` and ``"dr_grpo"`` by the accumulation steps and normalises ``"dapo"`` by ``num_items_in_batch``, the
real tokens of the whole accumulated batch (TRL's base trainer turns off transformers' own division); the sum of
the micro-batches' gradients is the step's gradient.

``run_accumulation_check`` runs one real step on the bundled model (``loss_type="dapo"``, TRL's default; two
micro-batches of one group each; temperature ``TEMPERATURE``; reward ``ids_reward``, a function of the completion's
token ids, so the advantages can be recomputed from the recorded batch, which TRL shuffles) and keeps both
micro-batches, the accumulated gradient of ``PARAMETER`` (a hook: before clipping and the optimizer) and the
logged entropy. ``compare_with_trl`` replays TRL's ``compute_loss`` (its own accumulation rules) for the three loss
types on the same micro-batches, cut at seeded lengths so that they hold different numbers of tokens, runs the
student's functions on them; ``replay_vs_step`` shows that the replay on the uncut micro-batches is the real step
(``tests/test_microstep.py``).

Tolerances: as ``labs.l6.capstone`` (float32, two summation orders): ``LOSS_ATOL`` on the accumulated loss,
``GRAD_RTOL`` on the gradient relative to its largest entry, ``ENTROPY_ATOL`` on the mean entropy (nats; TRL's
fused head sums the 49,152-entry vocabulary in tiles). Measured on a CPU with TRL 1.16 (the references as the
student): loss at most 3e-8, gradient 4.3e-6, entropy 3e-6.
``tests/test_microstep.py`` measures them against the references and shows that each wrong piece (no temperature,
no accumulation scaling, ``"dapo"`` normalised per micro-batch) misses by far more.
"""

from __future__ import annotations

import numpy as np
import torch

from labs.l6 import capstone, trainer_check

ACCUMULATION = 2
NUM_GENERATIONS = 4
NUM_PROMPTS = 2  # one group per micro-batch
TEMPERATURE = 0.7  # not 1: a step that forgets to divide the logits by it must not match
PARAMETER = capstone.PARAMETER
LOSS_TYPES = ("grpo", "dapo", "dr_grpo")
LOSS_ATOL = 1e-5
GRAD_RTOL = 1e-4
ENTROPY_ATOL = 5e-5
EPS_ADVANTAGE = 1e-4  # TRL's, as in the student's ventaja_grupo


def ids_reward(completion_ids, **kwargs):
    """A reward that reads only the completion's token ids (TRL passes them): recomputable from a recorded batch."""
    return [float(sum(ids) % 7) for ids in completion_ids]


# --------------------------------------------------------------------------------------------------
# The references (what the notebook's checks compare the student's functions with)
# --------------------------------------------------------------------------------------------------


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax over the last axis, in nats, stable for large logits (log-softmax, not softmax then log)."""
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def response_logps_and_entropy(model, ids, attention, mask, temperature):
    """Per-token log-probability and entropy of the completion (the last ``C`` tokens of ``ids``), both ``(B, C)``
    and 0 in the padding, from the model's logits divided by the sampling temperature (as TRL scores them)."""
    width = mask.shape[1]
    logits = model(input_ids=ids, attention_mask=attention).logits[:, -(width + 1):] / temperature
    logp = capstone.token_logps(logits, ids[:, -(width + 1):], mask)
    return logp, token_entropy(logits[:, :-1]) * mask


def microbatch_loss(logp, old_logp, ref_logp, advantages, mask, beta, loss_type, epsilon, max_completion_length,
                    accumulation_steps, batch_tokens) -> torch.Tensor:
    """One micro-batch's share of the accumulated loss: ``"grpo"``/``"dr_grpo"`` divided by the accumulation steps,
    ``"dapo"``'s token sum divided by the real tokens of the whole accumulated batch (``batch_tokens``)."""
    loss = capstone.reference_loss(logp, old_logp, ref_logp, advantages, mask, beta, loss_type, epsilon,
                                   max_completion_length)
    if loss_type == "dapo":
        return loss * mask.sum() / batch_tokens
    return loss / accumulation_steps


def microbatch_step(*args) -> torch.Tensor:
    """``microbatch_loss`` and ``backward()``: what the trainer does per micro-batch. Returns the loss, detached."""
    loss = microbatch_loss(*args)
    loss.backward()
    return loss.detach()


def group_advantages_by_prompt(rewards, prompt_keys, advantage_fn) -> np.ndarray:
    """``advantage_fn(rewards of one group)`` applied to each group of rows sharing a prompt, in row order."""
    rewards = np.asarray(rewards, dtype=float)
    out = np.empty_like(rewards)
    for key in dict.fromkeys(prompt_keys):
        rows = [i for i, k in enumerate(prompt_keys) if k == key]
        out[rows] = np.asarray(advantage_fn(rewards[rows]), dtype=float)
    return out


# --------------------------------------------------------------------------------------------------
# The real step
# --------------------------------------------------------------------------------------------------


def _recording_all(trainer_class):
    class RecordingTrainer(trainer_class):
        recording = False  # on during train() only: the comparison calls compute_loss again on what was kept

        def compute_loss(self, model, inputs, *args, **kwargs):
            if self.recording:
                self.recorded.append({k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()})
            return super().compute_loss(model, inputs, *args, **kwargs)

    return RecordingTrainer


def run_accumulation_check(output_dir: str | None = None, num_threads: int | None = 1) -> dict:
    """One real ``GRPOTrainer`` step with ``gradient_accumulation_steps=2`` on the bundled model; see the module."""
    import tempfile

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from labs.core.profiles import BUNDLED_MODEL, get_profile
    from labs.training.models import model_path

    threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        out = output_dir or tempfile.mkdtemp(prefix="l6-microstep-")
        kwargs = trainer_check.grpo_config_kwargs(out, NUM_GENERATIONS, NUM_PROMPTS, "group")
        kwargs.update(per_device_train_batch_size=NUM_GENERATIONS, gradient_accumulation_steps=ACCUMULATION,
                      temperature=TEMPERATURE, loss_type="dapo", learning_rate=0.0, log_completions=False)
        prompts = [{"prompt": [{"role": "user", "content": p}]} for p in trainer_check.PROMPTS[:NUM_PROMPTS]]
        model = model_path(get_profile().replace(model=BUNDLED_MODEL))
        trainer = _recording_all(GRPOTrainer)(model=model, reward_funcs=[ids_reward], args=GRPOConfig(**kwargs),
                                              train_dataset=Dataset.from_list(prompts))
        trainer.recorded, trainer.recording = [], True
        param = dict(trainer.model.named_parameters())[PARAMETER]
        grads = []
        handle = param.register_hook(lambda g: grads.append(g.detach().clone()))
        try:
            with trainer_check._quiet():
                trainer.train()
        finally:
            handle.remove()
            trainer.recording = False
        logged = next((h for h in trainer.state.log_history if "entropy" in h), {})
        return {"trainer": trainer, "micro_batches": trainer.recorded, "dapo_step_grad": sum(grads),
                "hooked_backwards": len(grads), "logged_entropy": logged.get("entropy"),
                "logged_loss": logged.get("loss")}
    finally:
        torch.set_num_threads(threads)


def _row_keys(batch: dict) -> tuple[list, list]:
    """Per row: the unpadded completion ids and a hashable key of the prompt (its real tokens)."""
    ids, mask = batch["completion_ids"].tolist(), batch["completion_mask"].tolist()
    pids, pmask = batch["prompt_ids"].tolist(), batch["prompt_mask"].tolist()
    completions = [[t for t, m in zip(row, ms) if m] for row, ms in zip(ids, mask)]
    prompts = [tuple(t for t, m in zip(row, ms) if m) for row, ms in zip(pids, pmask)]
    return completions, prompts


def student_advantages(report: dict, advantage_fn) -> list[torch.Tensor]:
    """The student's advantages for each recorded micro-batch: ``ids_reward`` on the recorded completions, grouped by
    prompt across the whole accumulated batch (TRL shuffles rows before splitting it)."""
    keyed = [_row_keys(b) for b in report["micro_batches"]]
    completions = [c for cs, _ in keyed for c in cs]
    prompts = [p for _, ps in keyed for p in ps]
    adv = group_advantages_by_prompt(ids_reward(completions), prompts, advantage_fn)
    out, start = [], 0
    for batch in report["micro_batches"]:
        n = batch["completion_ids"].shape[0]
        out.append(torch.tensor(adv[start:start + n], dtype=torch.float32, device=batch["advantages"].device))
        start += n
    return out


def _trl_replay(trainer, param, micro_batches, loss_type) -> tuple[float, torch.Tensor]:
    trainer.loss_type = loss_type
    trainer.model.zero_grad(set_to_none=True)
    total = 0.0
    for inputs in micro_batches:
        loss = trainer.compute_loss(trainer.model, dict(inputs))
        loss.backward()
        total += float(loss.detach())
    grad = param.grad.detach().clone()
    trainer.model.zero_grad(set_to_none=True)
    return total, grad


def cut_micro_batches(micro_batches: list[dict], seed: int = 0, min_length: int = 4) -> list[dict]:
    """The recorded micro-batches with each completion cut at a seeded length (``num_items_in_batch`` updated).

    The bundled model writes to the 16-token limit, so both micro-batches hold the same number of real tokens, and
    ``"dapo"`` normalised per micro-batch would equal ``"dapo"`` over the whole batch: cut, they differ (the kept
    tokens do not see the cut ones: a causal model). Done on the CPU generator, moved to the batch's device.
    """
    gen = torch.Generator().manual_seed(seed)
    cut = []
    for inputs in micro_batches:
        mask = inputs["completion_mask"]
        width = mask.shape[1]
        lengths = torch.randint(min(min_length, width), width + 1, (mask.shape[0],), generator=gen).to(mask.device)
        keep = (torch.arange(width, device=mask.device).unsqueeze(0) < lengths.unsqueeze(1)).to(mask.dtype)
        cut.append({**inputs, "completion_mask": mask * keep})
    total = sum(b["completion_mask"].sum() for b in cut)
    return [{**b, "num_items_in_batch": total} for b in cut]


def _sequences(inputs: dict):
    """A recorded micro-batch as the model reads it: ``(ids, attention, completion mask)``."""
    mask = inputs["completion_mask"]
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
    return ids, torch.cat([inputs["prompt_mask"], mask], dim=1), mask


def _student_pass(model, batches, advantages, logps_fn, step_fn, trainer, loss_type, param) -> tuple[float, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    batch_tokens = batches[0]["num_items_in_batch"]
    total = 0.0
    for inputs, adv in zip(batches, advantages):
        ids, attention, mask = _sequences(inputs)
        logp, _ = logps_fn(model, ids, attention, mask, trainer.temperature)
        loss = step_fn(logp, logp.detach(), logp.detach(), adv.to(logp.device), mask, 0.0, loss_type,
                       trainer.args.epsilon, trainer.args.max_completion_length, ACCUMULATION, batch_tokens)
        total += float(loss.detach() if torch.is_tensor(loss) else loss)
    if param.grad is None:
        raise TypeError("Tu paso no dejó gradiente en el modelo: ¿llamas a backward() sobre la pérdida?")
    grad = param.grad.detach().clone()
    model.zero_grad(set_to_none=True)
    return total, grad


def _student_entropy(model, batches, logps_fn, temperature) -> float:
    """The mean entropy as TRL logs it: the token mean of each micro-batch, averaged over the micro-batches."""
    means = []
    with torch.no_grad():
        for inputs in batches:
            ids, attention, mask = _sequences(inputs)
            _, entropy = logps_fn(model, ids, attention, mask, temperature)
            means.append(float((entropy * mask).sum() / mask.sum()))
    return float(np.mean(means))


def compare_with_trl(report: dict, logps_fn, step_fn, advantage_fn, loss_types=LOSS_TYPES, seed: int = 0,
                     num_threads: int | None = 1) -> dict:
    """The student's micro-batch steps against TRL's ``compute_loss`` on the recorded micro-batches, cut at seeded
    lengths (``cut_micro_batches``), one row per ``loss_type``; the student's entropy on the uncut micro-batches
    against the one TRL logged; TRL's replay on the uncut micro-batches against the real step's gradient.

    ``logps_fn(model, ids, attention, mask, temperature) -> (logp, entropy)``, ``step_fn(logp, old, ref, advantages,
    mask, beta, loss_type, eps, max_completion_length, accumulation_steps, batch_tokens)`` (calls ``backward``) and
    ``advantage_fn(rewards of one group)`` are the student's.
    """
    trainer = report["trainer"]
    model = trainer.model
    if (problem := capstone.precision_problem(model)) is not None:  # the tolerances need float32 products
        raise ValueError(problem)
    # train mode: TRL's compute_loss reads it ("train": its accumulation rules)
    with capstone.only_parameter_trains(trainer, PARAMETER, num_threads, train_mode=True) as param:
        recorded = report["micro_batches"]
        advantages = student_advantages(report, advantage_fn)
        adv_diff = max(float((a - b["advantages"].float()).abs().max()) for a, b in zip(advantages, recorded))
        batches = cut_micro_batches(recorded, seed)
        rows = []
        cache = report.setdefault("_trl_replays", {})  # the model does not change between calls: TRL's answer holds
        for loss_type in loss_types:
            if (seed, loss_type) not in cache:
                cache[seed, loss_type] = _trl_replay(trainer, param, batches, loss_type)
            trl_loss, trl_grad = cache[seed, loss_type]
            loss, grad = _student_pass(model, batches, advantages, logps_fn, step_fn, trainer, loss_type, param)
            scale = float(trl_grad.abs().max())
            rows.append({"loss_type": loss_type, "trl_loss": trl_loss, "loss": loss, "loss_diff": abs(trl_loss - loss),
                         "grad_diff": float((grad - trl_grad).abs().max()) / max(scale, 1e-30)})
        entropy = _student_entropy(model, recorded, logps_fn, trainer.temperature)
    return {"rows": rows, "entropy": entropy, "trl_entropy": report["logged_entropy"],
            "entropy_diff": abs(entropy - report["logged_entropy"]), "advantage_diff": adv_diff,
            "micro_batch_tokens": [int(b["completion_mask"].sum()) for b in batches]}


def replay_vs_step(report: dict, num_threads: int | None = 1) -> float:
    """TRL's ``compute_loss`` replayed on the uncut micro-batches (``"dapo"``) against the real step's accumulated
    gradient, relative to its largest entry: what makes the replay a fair stand-in for the step."""
    trainer = report["trainer"]
    with capstone.only_parameter_trains(trainer, PARAMETER, num_threads, train_mode=True) as param:
        _, grad = _trl_replay(trainer, param, report["micro_batches"], "dapo")
    step = report["dapo_step_grad"]
    return float((grad - step).abs().max()) / max(float(step.abs().max()), 1e-30)


def matches(result: dict) -> bool:
    return (all(r["loss_diff"] <= LOSS_ATOL and r["grad_diff"] <= GRAD_RTOL for r in result["rows"])
            and result["entropy_diff"] <= ENTROPY_ATOL)


def format_comparison(result: dict) -> str:
    """A Spanish table: per loss_type, TRL's accumulated loss and the student's, and the gradient's difference."""
    head = f"{'loss_type':>9} | {'pérdida TRL':>12} {'la tuya':>12} {'|dif|':>8} | {'gradiente: máx |dif| / máx |g|':>31}"
    lines = [head, "-" * len(head)]
    for r in result["rows"]:
        lines.append(f"{r['loss_type']:>9} | {r['trl_loss']:>+12.6f} {r['loss']:>+12.6f} {r['loss_diff']:>8.1e} | "
                     f"{r['grad_diff']:>19.1e} -> {capstone.verdict(r['grad_diff'], GRAD_RTOL)}")
    lines += [
        "",
        f"entropía media por token: TRL {result['trl_entropy']:.6f}, la tuya {result['entropy']:.6f} -> "
        f"{capstone.verdict(result['entropy_diff'], ENTROPY_ATOL)} (tolerancia {ENTROPY_ATOL:.0e})",
        f"tus ventajas (ventaja_grupo) frente a las del lote de TRL: diferencia máxima {result['advantage_diff']:.1e}",
        f"tokens reales de cada micro-lote (recortados): {result['micro_batch_tokens']}",
    ]
    return "\n".join(lines)
