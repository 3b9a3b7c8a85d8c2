"""One rehearsed lab per child process (``python -m labs rehearse --part l71|l72``).

Each part runs the lab's own steps (``labs.l71.Lab``, ``labs.l72.FallbackLab`` on a CPU,
:mod:`labs.rehearsal.unsloth_part` on a GPU) on the rehearsal's budget and returns what it measured and
checked. Separate processes because L7.2 must import unsloth before TRL, and each lab's vLLM engine
must hand its memory back before the next one starts.
"""

from __future__ import annotations

import time
from pathlib import Path

from labs import l71
from labs.l71 import recipe_identity
from labs.core.profiles import Profile
from labs.core.runfolder import PURPOSE_REHEARSAL, mark_purpose, read_jsonl
from labs.l72.lora import lora_engine_check
from labs.l72.memory import MemoryFraction, engine_memory_fraction
from labs.rehearsal import budget, engine_shift
from labs.rehearsal.measure import adapter_effect, mean_completion_tokens, run_disk, step_timer, summarize_holdout
from labs.training import data as course_data
from labs.training import evaluation, reasoning

ENGINE_TOLERANCE = 1e-4  # largest engine-vs-trainer weight difference that still counts as "the same"


def _fraction(profile: Profile, trainer) -> dict:
    requested = profile.vllm_gpu_memory_utilization
    if not profile.use_vllm:
        return MemoryFraction(requested, None, "no-vllm").as_dict()
    fraction = MemoryFraction(requested, requested, "trl-colocate", device="cpu" if profile.use_cpu else "gpu")
    engine = getattr(trainer, "vllm_generation", None)
    if engine is not None:
        fraction = fraction.with_engine_value(engine_memory_fraction(engine.llm))
    print(f"[ensayo] {fraction.describe_es()}")
    return fraction.as_dict()


def engine_check(trainer, profile: Profile) -> dict:
    """After the last step: the colocated engine's weights against the trainer's (information for L7.1's part:
    its pass/fail is the log-probability shift, :mod:`labs.rehearsal.engine_shift`)."""
    if not (profile.use_vllm and getattr(trainer, "vllm_generation", None) is not None):
        return {"ok": None, "why_es": "el perfil no usa vLLM: se genera con el propio modelo entrenado"}
    from labs.training import vllm_cpu_shim

    l71.sync_engine(trainer, profile)
    try:
        if hasattr(trainer.accelerator.unwrap_model(trainer.model), "peft_config"):
            check = lora_engine_check(trainer)
            ok = bool(check["engine_has_adapter"])
            if not ok and profile.bf16:
                # TRL merges the adapter in bf16 before each sync and unmerges it after: after two or three
                # small steps the adapter's change is of the order of bf16's rounding, and so is the gap.
                return {"ok": None, "how": "pesos del motor = base + LoRA fusionado", **check,
                        "why_es": (f"en bf16, tras pocos pasos el cambio del adaptador (máx. "
                                   f"{check['adapter_max_delta']:.2g}) es del orden del redondeo de bf16 (diferencia "
                                   f"{check['max_abs_diff']:.2g}): no se distingue; mira engine_output_shift")}
            return {"ok": ok, "how": "pesos del motor = base + LoRA fusionado", **check}
        diff = vllm_cpu_shim.engine_weight_diff(trainer)
    except (AttributeError, RuntimeError) as exc:  # the engine's internals differ on this vLLM build
        return {"ok": None, "why_es": f"no pude leer los pesos del motor vLLM ({type(exc).__name__}: {exc})"}
    ok = diff["compared"] > 0 and diff["max_abs_diff"] <= ENGINE_TOLERANCE
    return {"ok": ok, "how": "pesos del motor = pesos del trainer", "max_abs_diff": diff["max_abs_diff"],
            "compared": diff["compared"], "missing": len(diff["missing"])}


def engine_probe(trainer, rows: list[dict], tokens: int = 48):
    """Greedy outputs (with the sampled tokens' log-probabilities) of the colocated engine, or None."""
    engine = getattr(trainer, "vllm_generation", None)
    if engine is None:
        return None
    from vllm import SamplingParams

    texts = [trainer.processing_class.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
             for r in rows]
    return engine.llm.generate(texts, SamplingParams(temperature=0.0, max_tokens=tokens, logprobs=0), use_tqdm=False)


def base_holdout(lab: l71.Lab, profile: Profile) -> dict:
    """The base model's accuracy on the holdout, with the profile's own evaluation settings (issue 18)."""
    hp = budget.holdout_profile(profile)
    rows = course_data.course_splits(hp, lab.tokenizer)["eval"]
    # On ci the holdout is the lab's own evaluation set: the lab's base evaluation then reuses this file.
    same = [r["id"] for r in rows] == [r["id"] for r in lab.splits["eval"]] and \
        hp.eval_max_new_tokens == lab.profile.eval_max_new_tokens
    start = time.perf_counter()
    records = evaluation.evaluate(rows, l71.generator(lab.trainer, hp), lab.run, "base" if same else "base_holdout")
    result = summarize_holdout(records, time.perf_counter() - start, hp.eval_max_new_tokens, lab.base_label)
    print(f"[ensayo] Holdout del modelo base: {result['n']} problemas, {result['accuracy']:.1%} de aciertos "
          f"(etiquetas <answer>), {result['seconds']:.0f} s.")
    return result


def _common(lab, profile: Profile, timer, started: float) -> dict:
    steps = len(timer.seconds)
    problems = len(lab.splits["eval"]) * 2
    disk = run_disk(lab.run, steps, problems)
    freed = lab.run.remove_checkpoints()
    memory = lab.monitor.stop() if lab.monitor is not None else {}
    return {"run_dir": str(lab.run.root), "steps": steps, "step_seconds": timer.seconds,
            "completions_per_step": profile.generation_batch_size,
            "max_completion_length": profile.max_completion_length,
            "mean_completion_tokens": mean_completion_tokens(lab.run), "memory": memory, "disk": disk,
            "checkpoints_removed_bytes": freed, "elapsed_seconds": round(time.perf_counter() - started, 1)}


def _trainer_with_timer(lab):
    """Data, format pass and trainer, with the step timer the rehearsal reads: how both labs start."""
    lab.load_data()
    lab.format_pass()
    trainer = lab.build_trainer()
    timer = step_timer()
    trainer.add_callback(timer)
    return trainer, timer


def run_l71(profile: Profile, root: Path) -> dict:
    """L7.1 (TRL + vLLM colocate) on the rehearsal's budget, plus the base model's holdout."""
    rp = budget.rehearsal_profile(profile)
    started = time.perf_counter()
    # the student's saved reward functions (else the course's): the rehearsal tries what the long run will train
    lab = l71.Lab(rp, run_name=str(root / "l71"), reward_funcs=recipe_identity.saved_rewards())
    try:
        trainer, timer = _trainer_with_timer(lab)
        mark_purpose(lab.run, PURPOSE_REHEARSAL)  # a rehearsal's run, wherever its folder goes: never the main run
        sees_reasoning = reasoning.rewards_see_reasoning(trainer.processing_class)  # before the first step  # pyright: ignore[reportOptionalMemberAccess] - TRL loads the tokenizer when none is passed
        fraction = _fraction(rp, trainer)
        holdout = base_holdout(lab, profile)
        lab.evaluate_base()
        probe_rows = lab.splits["eval"][:4]
        before = engine_probe(trainer, probe_rows)
        fixed = engine_shift.fixed_completions(before) if before is not None else []
        scores_before = _scores(trainer, fixed)
        lab.train()
        weights = engine_check(trainer, rp)  # syncs the engine first; information (weak in bf16)
        after = engine_probe(trainer, probe_rows)
        # what the engine writes after the steps against before them (a measurement: a few small steps
        # may not move greedy text, and in bf16 may move log-probabilities by little)
        shift = adapter_effect(before, after) if before is not None else None
        check = _follows_trainer(trainer, fixed, scores_before, weights)
        summary = lab.evaluate_trained()
        part = _common(lab, rp, timer, started)
    finally:
        lab.close()
    return {"lab": "L7.1", "backend": "trl", **part, "vllm_fraction": fraction, "base_holdout": holdout,
            "format_reward_start": first_logged(lab.run, "rewards/format_reward/mean"),
            "eval": _eval_fields(summary), "engine_output_shift": shift,
            "checks": {"engine_uses_trained_weights": check,
                       "rewards_see_reasoning": sees_reasoning}}


def first_logged(run, key: str) -> float | None:
    """The first value of ``key`` in the run's metrics.jsonl (e.g. the format reward at the first step), or None."""
    return next((row[key] for row in run.metrics() if isinstance(row.get(key), (int, float))), None)


def _scores(trainer, fixed) -> tuple[list[float], list[float]] | None:
    """(engine, trainer) log-probabilities of the fixed completions, or None without a colocated engine."""
    if not fixed:
        return None
    model = trainer.accelerator.unwrap_model(trainer.model)
    return engine_shift.engine_logprobs(trainer.vllm_generation.llm, fixed), engine_shift.trainer_logprobs(model, fixed)


def _follows_trainer(trainer, fixed, before, weights: dict) -> dict:
    """Pass/fail from the log-probability shift of fixed completions; the weight comparison as information."""
    if before is None:  # no colocated engine (or no completion to fix): the weight check is all there is
        return weights
    after = _scores(trainer, fixed)
    assert after is not None  # the same fixed completions and engine as `before`
    verdict = engine_shift.shift_verdict(before[0], after[0], before[1], after[1])
    return {**verdict, "weights": weights}


def _eval_fields(summary: dict) -> dict:
    keys = ("n", "base_accuracy", "trained_accuracy", "base_format_rate", "trained_format_rate")
    return {k: summary.get(k) for k in keys}


def run_l72_cpu(profile: Profile, root: Path) -> dict:
    """L7.2's CPU path (transformers + PEFT LoRA, TRL's colocated engine) on the rehearsal's budget."""
    from labs.l72.fallback import FallbackLab

    rp = budget.rehearsal_profile(profile)
    started = time.perf_counter()
    lab = FallbackLab(rp, run_name=str(root / "l72"), saved=False)  # rp already is the saved recipe, on a budget
    try:
        trainer, timer = _trainer_with_timer(lab)
        mark_purpose(lab.run, PURPOSE_REHEARSAL)
        sees_reasoning = reasoning.rewards_see_reasoning(trainer.processing_class)  # before the first step  # pyright: ignore[reportOptionalMemberAccess] - TRL loads the tokenizer when none is passed
        base = lab.evaluate_base()
        lab.train()
        summary = lab.evaluate_trained()  # refuses when the engine lacks the adapter (require_engine_has_adapter)
        trained = read_jsonl(lab.run.path("eval/trained.jsonl"))
        part = _common(lab, lab.profile, timer, started)
    finally:
        lab.close()
    check = lab.engine_check or {}
    differ = sum(b["completion"] != t["completion"] for b, t in zip(base, trained))
    checks = {
        "rewards_see_reasoning": sees_reasoning,
        "engine_uses_trained_weights": {"ok": bool(check.get("engine_has_adapter")),
                                        "how": "pesos del motor = base + LoRA fusionado", **check},
        "adapter_changes_model": {"ok": check.get("adapter_max_delta", 0.0) > 0,
                                  "adapter_max_delta": check.get("adapter_max_delta"),
                                  "eval_texts_differ": differ, "eval_problems": len(base)},
        "trained_eval_through_lora_request": {
            "ok": None, "why_es": "en CPU TRL fusiona el adaptador en su motor vLLM y no hay lora_request; "
                                  "se comprobó en su lugar que el motor tiene el adaptador fusionado"},
    }
    return {"lab": "L7.2", "backend": lab.backend.name, **part, "vllm_fraction": lab.fraction.as_dict(),
            "eval": _eval_fields(summary), "checks": checks}


def run_part(name: str, profile: Profile, root: Path) -> dict:
    # the student's saved knobs (labs.l71.settings): a saved 4x8 batch or another learning rate is tried here,
    # in minutes, not first in the multi-hour run
    profile = recipe_identity.saved_profile(profile)
    if name == "l71":
        return run_l71(profile, root)
    if profile.use_cpu:
        return run_l72_cpu(profile, root)
    from labs.rehearsal.unsloth_part import run_l72_gpu

    return run_l72_gpu(profile, root)
