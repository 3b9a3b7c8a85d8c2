"""L7.2 on a GPU, rehearsed: Unsloth + vLLM Standby, 4-bit, LoRA, the lab's own calls (``labs.l72.gpu``).

The same loading, LoRA, trainer and evaluation calls as ``labs.l72.gpu._run_unsloth`` (both start with
``labs.l72.gpu.start_unsloth_run``), with what the rehearsal adds between them: a step timer, greedy
generations of a few prompts without and with the trained adapter's ``lora_request`` (does the adapter
reach vLLM and change what it writes?), and the trained evaluation only through
:func:`labs.l72.lora.evaluate_unsloth` with that request (it refuses without one). Runs only where CUDA
and Unsloth are; nothing here runs on the CPU CI.
"""

from __future__ import annotations

import time
from pathlib import Path

from labs.core.profiles import Profile
from labs.core.resources import ResourceMonitor
from labs.core.runfolder import PURPOSE_REHEARSAL, mark_purpose
from labs.rehearsal import budget
from labs.rehearsal.measure import adapter_effect, mean_completion_tokens, run_disk, step_timer
from labs.training import reasoning  # no TRL or transformers at import: the unsloth-first order holds

PROBE_PROMPTS = 4
PROBE_TOKENS = 48


# Unsloth builds its vLLM engine with max_logprobs=0 (unsloth_zoo/vllm_utils.py, load_vllm) and vLLM refuses
# any request above it; logprobs=0 still returns each sampled token's log-probability, so vLLM fills
# cumulative_logprob (what labs.rehearsal.measure.adapter_effect compares).
PROBE_LOGPROBS = 0


def probe_params():
    """Greedy decoding of the probe, asking no more log-probabilities than Unsloth's engine allows."""
    from vllm import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=PROBE_TOKENS, logprobs=PROBE_LOGPROBS)


def _probe(model, tokenizer, rows, lora_request=None):
    texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
    return model.fast_generate(texts, sampling_params=probe_params(), use_tqdm=False, lora_request=lora_request)


def run_l72_gpu(profile: Profile, root: Path) -> dict:
    from labs.l72.gpu import start_unsloth_run
    from labs.l72.lora import evaluate_unsloth, require_lora_request, save_adapter
    from labs.l72.standby import enable_standby_and_import_unsloth
    from labs.l72.steps import profile_for_l72, start
    from labs.training import evaluation, recipe

    _, profile_note = profile_for_l72(profile)  # rtx5090-base: L7.2 runs on rtx5090, and says why (start does)
    started = time.perf_counter()
    # the lab's own start: every check before a model loads, and nothing imported that unsloth must precede; the
    # profile already is the saved recipe (parts.run_part), on the rehearsal's budget
    rp, reward_funcs, run, backend = start(budget.rehearsal_profile(profile), str(root / "l72"), saved=False)
    enable_standby_and_import_unsloth()

    monitor = ResourceMonitor(gpu="torch").start()
    try:
        model, tokenizer, splits, trainer, fraction, label = start_unsloth_run(
            rp, reward_funcs, run, backend, show=lambda line: print(f"[ensayo] {line}"))
        mark_purpose(run, PURPOSE_REHEARSAL)  # start_unsloth_run wrote run.json: a rehearsal's run, never the main one
        timer = step_timer()
        trainer.add_callback(timer)
        sees_reasoning = reasoning.rewards_see_reasoning(trainer.processing_class)  # before the first step
        probe_rows = splits["eval"][:PROBE_PROMPTS]
        base = evaluate_unsloth(splits["eval"], model, tokenizer, run, "base", rp.eval_max_new_tokens)
        recipe.train(trainer, rp, run)
        adapter_dir = save_adapter(model, tokenizer, run)
        lora_request = require_lora_request(model.load_lora(str(adapter_dir)), adapter_dir)
        effect = adapter_effect(_probe(model, tokenizer, probe_rows), _probe(model, tokenizer, probe_rows, lora_request))
        trained = evaluate_unsloth(splits["eval"], model, tokenizer, run, "trained", rp.eval_max_new_tokens,
                                   lora_request=lora_request, adapter_dir=adapter_dir)
        summary = evaluation.summarize(run, base, trained, label)
        steps = len(timer.seconds)
        disk = run_disk(run, steps, 2 * len(splits["eval"]))
        freed = run.remove_checkpoints()
    finally:
        memory = monitor.stop()
    request = {"ok": True, "lora_int_id": getattr(lora_request, "lora_int_id", None),
               "lora_path": str(getattr(lora_request, "lora_path", "") or adapter_dir),
               "how": "evaluate_unsloth('trained') con el lora_request del adaptador guardado"}
    return {
        "lab": "L7.2", "backend": backend.name, "profile_used": profile.name, "profile_note_es": profile_note,
        "run_dir": str(run.root), "steps": steps,
        "step_seconds": timer.seconds, "completions_per_step": rp.generation_batch_size,
        "max_completion_length": rp.max_completion_length, "mean_completion_tokens": mean_completion_tokens(run),
        "memory": memory, "disk": disk, "checkpoints_removed_bytes": freed,
        "elapsed_seconds": round(time.perf_counter() - started, 1), "vllm_fraction": fraction.as_dict(),
        "eval": {k: summary.get(k) for k in ("n", "base_accuracy", "trained_accuracy")},
        "checks": {
            "engine_uses_trained_weights": {"ok": effect["changes_output"], "how": "lora_request en vLLM", **effect},
            "adapter_changes_model": {"ok": effect["changes_output"], **effect},
            "trained_eval_through_lora_request": request,
            "rewards_see_reasoning": sees_reasoning,
        },
    }
