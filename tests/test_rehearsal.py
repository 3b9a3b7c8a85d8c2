"""``python -m labs rehearse``: its budget, its estimates, its measurements and its page (unit tests), and
one real end-to-end rehearsal on the ``ci`` profile (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from labs.core.profiles import CI, RTX5090
from labs.rehearsal import budget, report
from labs.rehearsal.cli import REHEARSAL_JSON, exercise_profiles
from labs.rehearsal.estimates import Measured, estimate_all, estimate_run, length_factors
from labs.rehearsal.measure import adapter_effect, summarize_holdout
from labs.training import recipe

# --- budget -----------------------------------------------------------------------------------------


def test_rehearsal_keeps_what_memory_and_paths_depend_on_and_shrinks_what_only_costs_time():
    rp = budget.rehearsal_profile(RTX5090)
    for key in ("model", "unsloth_model", "num_generations", "per_device_train_batch_size",
                "gradient_accumulation_steps", "learning_rate", "beta", "use_lora", "lora_r", "load_in_4bit",
                "vllm_gpu_memory_utilization", "vllm_mode", "bf16"):
        assert getattr(rp, key) == getattr(RTX5090, key), key
    assert rp.max_steps == 3 and rp.save_steps == 3 and rp.keep_checkpoints
    assert rp.train_size == 2 * 3 * RTX5090.prompts_per_step
    assert rp.max_completion_length == 128 < RTX5090.max_completion_length
    # the colocated engine's context still holds a full-length holdout answer
    assert rp.vllm_max_model_length - rp.max_completion_length >= RTX5090.eval_max_new_tokens
    assert rp.vllm_max_model_length == RTX5090.vllm_max_model_length
    assert budget.holdout_profile(RTX5090).eval_size == 200
    assert budget.holdout_profile(CI).eval_size == CI.eval_size


def test_ci_rehearsal_is_the_ci_profile_with_two_steps():
    rp = budget.rehearsal_profile(CI)
    assert rp.max_steps == 2 and rp.max_completion_length == CI.max_completion_length
    assert rp.max_prompt_tokens == CI.max_prompt_tokens and rp.eval_size == CI.eval_size


def test_default_profile_and_device_tag(tmp_path):
    assert budget.default_profile(None, {}, cuda_visible=False).name == "ci"
    assert budget.default_profile(None, {}, cuda_visible=True, runs_root=tmp_path).name == "rtx5090-base"
    assert budget.default_profile(None, {"COURSE_PROFILE": "cpu"}, cuda_visible=True).name == "cpu"
    assert budget.default_profile("cpu", {}, cuda_visible=True).name == "cpu"
    assert budget.device_tag("NVIDIA GeForce RTX 5090") == "rtx-5090"
    assert budget.device_tag(None) == "cpu"


# --- estimates ----------------------------------------------------------------------------------------


def measured(**changes) -> Measured:
    base = dict(step_seconds=[60.0, 20.0, 22.0], completions_per_step=32, mean_completion_tokens=128.0,
                eval_seconds_per_problem=0.5, checkpoint_bytes=2e9, model_bytes=1e8, log_bytes_per_step=1e5,
                eval_bytes_per_problem=2e3)
    return Measured(**{**base, **changes})


def test_steady_step_skips_the_warm_up_step():
    assert measured().seconds_per_step == 20.0
    assert measured(step_seconds=[30.0]).seconds_per_step == 30.0


def test_hours_scale_with_steps_completions_and_length():
    m = measured()
    low, high = length_factors(m, RTX5090)
    assert (low, high) == (1.0, 1024 / 128)
    e = estimate_run("L7.1", m, RTX5090)
    evaluation = 2 * RTX5090.eval_size * 0.5
    assert e.hours_low == pytest.approx((500 * 20.0 + evaluation) / 3600)
    assert e.hours_high == pytest.approx((500 * 20.0 * 8 + evaluation) / 3600)
    # twice the completions per step (E1's larger G with the same prompts) doubles the step time
    big = estimate_run("E1", m, RTX5090.replace(num_generations=16, gradient_accumulation_steps=8))
    assert big.hours_low == pytest.approx((500 * 40.0 + evaluation) / 3600)
    # completions that already stopped well before the rehearsal's cap: no length factor above 1 ...
    assert length_factors(measured(mean_completion_tokens=2000.0), RTX5090) == (1.0, 1.0)


def test_disk_counts_checkpoints_while_training_and_not_after():
    m = measured()
    e = estimate_run("L7.1", m, RTX5090)
    logs = 1e5 * 500 * 8
    final = 1e8 + logs + 2e3 * 2 * RTX5090.eval_size
    assert e.disk_final_gb == pytest.approx(final / 1e9)
    assert e.disk_peak_gb == pytest.approx((final + 2e9 * RTX5090.save_total_limit) / 1e9)
    kept = estimate_run("L7.1", m, RTX5090.replace(keep_checkpoints=True))
    assert kept.disk_final_gb == pytest.approx(kept.disk_peak_gb)


def test_all_runs_and_totals():
    runs = exercise_profiles(RTX5090)
    assert any(name.startswith("E1") for name in runs) and any(name.startswith("E3") for name in runs)
    out = estimate_all(RTX5090, measured(), measured(step_seconds=[90.0, 30.0]), runs)
    names = [r["name"] for r in out["runs"]]
    assert names[:2] == ["L7.1", "L7.2"] and len(names) == 2 + len(runs)
    assert out["total"]["hours_low"] == pytest.approx(sum(r["hours_low"] for r in out["runs"]), abs=0.01)
    biggest_checkpoints = max(r["disk_peak_gb"] - r["disk_final_gb"] for r in out["runs"])
    assert out["total"]["disk_peak_gb"] == pytest.approx(out["total"]["disk_final_gb"] + biggest_checkpoints,
                                                         abs=0.01)
    assert estimate_all(RTX5090, None, None, runs) == {"runs": [], "total": {
        "hours_low": 0, "hours_high": 0, "disk_peak_gb": 0.0, "disk_final_gb": 0}}


# --- measurements ---------------------------------------------------------------------------------------


def test_holdout_summary_reports_every_yes_no_field_of_the_scorer():
    records = [{"correct": True, "format_ok": True, "correct_last_number": True, "length": 10},
               {"correct": False, "format_ok": True, "correct_last_number": True, "length": 30},
               {"correct": False, "format_ok": False, "correct_last_number": False, "length": 20},
               {"correct": False, "format_ok": False, "correct_last_number": False, "length": 20}]
    s = summarize_holdout(records, 8.0, 1024, "Qwen3-4B-Instruct-2507")
    assert (s["n"], s["accuracy"], s["format_ok_rate"], s["accuracy_last_number"]) == (4, 0.25, 0.5, 0.5)
    assert s["seconds_per_problem"] == 2.0 and s["mean_length"] == 20 and s["max_new_tokens"] == 1024


def _outputs(*pairs):
    return [SimpleNamespace(outputs=[SimpleNamespace(text=t, cumulative_logprob=lp)]) for t, lp in pairs]


def test_adapter_effect_counts_changed_texts_or_log_probabilities():
    same = adapter_effect(_outputs(("a", -1.0), ("b", -2.0)), _outputs(("a", -1.0), ("b", -2.0)))
    assert not same["changes_output"] and same["texts_differ"] == 0
    moved = adapter_effect(_outputs(("a", -1.0)), _outputs(("a", -1.5)))
    assert moved["changes_output"] and moved["max_cumulative_logprob_diff"] == 0.5
    flipped = adapter_effect(_outputs(("a", None)), _outputs(("b", None)))
    assert flipped["changes_output"] and flipped["max_cumulative_logprob_diff"] is None


def test_engine_shift_verdict_passes_fails_or_says_why_not_checked():
    from labs.rehearsal.engine_shift import SHIFT_MIN, shift_verdict

    moved = shift_verdict([-10.0, -8.0], [-9.5, -8.0], [-10.1, -8.1], [-9.4, -8.1])
    assert moved["ok"] is True and moved["engine_shift"] == pytest.approx(0.5)
    stale = shift_verdict([-10.0, -8.0], [-10.0, -8.0], [-10.1, -8.1], [-9.4, -8.1])
    assert stale["ok"] is False and "pesos viejos" in stale["why_es"]
    still = shift_verdict([-10.0], [-10.0], [-10.0], [-10.0 + SHIFT_MIN / 2])
    assert still["ok"] is None and "apenas movieron" in still["why_es"]
    wild = shift_verdict([-10.0], [-60.0], [-10.0], [-9.9])
    assert wild["ok"] is False and "otros pesos" in wild["why_es"]
    assert shift_verdict([float("nan")], [-1.0], [-1.0], [-2.0])["ok"] is False
    assert shift_verdict([], [], [], [])["ok"] is False


def test_trainer_logprobs_score_the_fixed_completion_tokens():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from labs.rehearsal.engine_shift import fixed_completions, trainer_logprobs

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    outputs = [SimpleNamespace(prompt_token_ids=[1, 2, 3], outputs=[SimpleNamespace(token_ids=[4, 5])]),
               SimpleNamespace(prompt_token_ids=[1], outputs=[SimpleNamespace(token_ids=[])])]
    fixed = fixed_completions(outputs)
    assert fixed == [([1, 2, 3], [4, 5])]  # an empty completion has nothing to score
    model.train()
    [total] = trainer_logprobs(model, fixed)
    assert model.training  # left as it was
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=torch.tensor([[1, 2, 3, 4, 5]])).logits[0], dim=-1)
    assert total == pytest.approx(float(logp[2, 4] + logp[3, 5]), abs=1e-5)


def test_probes_ask_no_more_log_probabilities_than_unsloths_engine_allows():
    # Unsloth builds its engine with max_logprobs=0 (tests/test_gpu_wheels.py reads it from the wheel);
    # vLLM's own validation, fed that engine's limit, must accept what the rehearsal asks.
    from vllm import SamplingParams
    from vllm.exceptions import VLLMValidationError

    from labs.rehearsal.unsloth_part import probe_params

    params = probe_params()
    assert params.logprobs == 0 and params.temperature == 0.0
    engine = SimpleNamespace(max_logprobs=0, get_vocab_size=lambda: 100)
    params._validate_logprobs(engine)  # accepted
    with pytest.raises(VLLMValidationError, match="greater than max allowed: 0"):
        SamplingParams(temperature=0.0, logprobs=1)._validate_logprobs(engine)  # what the probe used to ask


def test_page_says_when_l72_ran_another_profile():
    from labs.l72 import profile_for_l72
    from labs.core.profiles import get_profile

    _, why = profile_for_l72(get_profile("rtx5090-base"))
    page = report.render_es({"parts": {"l72": {"lab": "L7.2", "profile_note_es": why}}, "not_checked": []})
    assert f"**L7.2**: {why}" in page and "rtx5090-base" in page


# --- classification and the page ---------------------------------------------------------------------------


@pytest.mark.parametrize("error,kind", [
    (RuntimeError("Unsloth: `pip install vllm-bnb-plugin` for load_in_4bit."), "plugin"),
    (RuntimeError("ImportError: libcudart.so.13: cannot open shared object file"), "driver"),
    (RuntimeError("CUDA driver version is insufficient for CUDA runtime version"), "driver"),
    (RuntimeError("LocalEntryNotFoundError: Cannot find the requested files in the disk cache"), "hub"),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
    (OSError(28, "No space left on device"), "disk"),
])
def test_failures_get_the_labs_kind_and_a_spanish_fix(error, kind):
    out = report.classify(error, RTX5090)
    assert out["kind"] == kind and out["message_es"] and "Error" not in out["message_es"][:5]


def test_a_failed_training_run_is_classified_by_its_cause():
    try:
        try:
            raise RuntimeError("CUDA out of memory. Tried to allocate 1 GiB")
        except RuntimeError as exc:
            raise recipe.RunFailed("[oom] paso 1: ...") from exc
    except recipe.RunFailed as exc:
        out = report.classify(exc, RTX5090)
    assert out["kind"] == "oom" and "per_device_train_batch_size" in out["message_es"]


def test_nan_hint_tells_lora_from_full_fine_tuning():
    lora = recipe.classify_failure(recipe.NonFiniteLoss("loss=nan"), RTX5090).message_es
    full = recipe.classify_failure(recipe.NonFiniteLoss("loss=nan"), CI).message_es
    assert "LoRA" in lora and "1e-5" in lora and "prueba 1e-6" not in lora
    assert "fine-tuning completo prueba ~1e-6" in full


def test_headroom_advice_follows_the_measured_base_accuracy():
    from labs.core.profiles import get_profile
    from labs.rehearsal.cli import headroom_advice

    gpu = get_profile("rtx5090")
    near_ceiling = headroom_advice({"n": 200, "accuracy": 0.95, "accuracy_last_number": 0.96}, gpu)
    mid_range = headroom_advice({"n": 200, "accuracy": 0.60, "accuracy_last_number": 0.62}, gpu)
    assert near_ceiling["recommended_profile"] == "rtx5090-base" and not near_ceiling["flat_gradable"]
    assert mid_range["recommended_profile"] == "rtx5090" and mid_range["flat_gradable"]
    assert near_ceiling["eval_size"] == gpu.eval_size and "200" in near_ceiling["text_es"]
    page = report.render_es({"parts": {}, "base_holdout": {"model": "m", "n": 200, "accuracy": 0.95},
                             "headroom": near_ceiling, "not_checked": []})
    assert "Perfil recomendado: `rtx5090-base`" in page


def test_page_lists_checks_failures_and_what_was_not_checked():
    record = {"profile": "ci", "created": "hoy", "status": "failed", "elapsed_seconds": 12.0,
              "device": {"packages": {"torch": "2.13.0+cpu"}},
              "failure": {"kind": "check", "message_es": "Una comprobación falló", "error": "x"},
              "parts": {"l71": {"lab": "L7.1", "steps": 2, "step_seconds": [3.0, 2.0], "memory": {},
                                "checks": {"engine_uses_trained_weights": {"ok": False}}},
                        "l72": {"lab": "L7.2", "checks": {"trained_eval_through_lora_request": {
                            "ok": None, "why_es": "en CPU no hay lora_request"}}}},
              "not_checked": ["La ruta GPU de L7.2"]}
    page = report.render_es(record)
    assert "FALLÓ" in page and "Una comprobación falló" in page and "La ruta GPU de L7.2" in page
    assert "| L7.1 | El motor de generación usa los pesos entrenados | NO |" in page
    assert "no comprobado: en CPU no hay lora_request" in page
    assert report.failed_checks(record) == ["L7.1: El motor de generación usa los pesos entrenados"]


# --- the real thing on the ci profile ----------------------------------------------------------------------


@pytest.mark.trains
def test_ci_rehearsal_end_to_end(tmp_path):
    """The only run of ``python -m labs rehearse``: its two child parts, its record and its page."""
    root = tmp_path / "rehearsal"
    env = {**os.environ, "COURSE_PROFILE": "ci"}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "labs", "rehearse", "--root", str(root)], env=env,
                          capture_output=True, text=True, timeout=1800)
    print(f"ci rehearsal: {time.perf_counter() - started:.0f} s")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    record = json.loads((root / REHEARSAL_JSON).read_text())
    assert record["status"] == "ok" and record["failure"] is None and record["profile"] == "ci"
    for part, lab in (("l71", "L7.1"), ("l72", "L7.2")):
        data = record["parts"][part]
        assert data["ok"] and data["lab"] == lab and data["steps"] == 2 and len(data["step_seconds"]) == 2
        assert data["checks"]["engine_uses_trained_weights"]["ok"] is True
        assert data["memory"]["sampled_rss_peak_gib"] > 0
        assert data["vllm_fraction"]["in_force"] == CI.vllm_gpu_memory_utilization
        assert data["disk"]["checkpoint_bytes"] > 0 and data["checkpoints_removed_bytes"] > 0
    l71_check = record["parts"]["l71"]["checks"]["engine_uses_trained_weights"]
    assert l71_check["engine_shift"] > 0 and l71_check["trainer_shift"] > 0 and l71_check["completions"] > 0
    assert l71_check["weights"]["ok"] is True  # the weight comparison, kept as information
    l72_run = json.loads((root / "l72" / "run.json").read_text())
    for part in ("l71", "l72"):  # each run records that it is the rehearsal's: the grader never takes it as the main run
        assert json.loads((root / part / "run.json").read_text())["purpose"] == "rehearsal"
    assert l72_run["trainer_args"]["optim"] == "adamw_torch_fused" and l72_run["trainer_args"]["warmup_steps"] == 0
    l72 = record["parts"]["l72"]["checks"]
    assert l72["adapter_changes_model"]["ok"] and l72["trained_eval_through_lora_request"]["ok"] is None
    holdout = record["base_holdout"]
    assert holdout["n"] == CI.eval_size and 0 <= holdout["accuracy"] <= 1 and "format_ok_rate" in holdout
    names = [r["name"] for r in record["estimates"]["runs"]]
    assert names[:2] == ["L7.1", "L7.2"] and any(n.startswith("E2") for n in names)
    assert all(0 < r["hours_low"] <= r["hours_high"] for r in record["estimates"]["runs"])
    page = (root / "informe.md").read_text()
    assert "Lo que este ensayo no comprobó" in page and "Unsloth con Standby" in page
    assert "Holdout del modelo base" in page and "**correcto**" in page
    advice = record["headroom"]
    assert advice["eval_size"] == CI.eval_size and advice["recommended_profile"] in ("rtx5090", "rtx5090-base")
    assert "Lo que el criterio 3 podrá detectar" in page and advice["recommended_profile"] in page
    start = record["parts"]["l71"]["format_reward_start"]  # measured at the first step: can level 4's E2 show?
    assert 0 <= start <= 0.5 and record["level4_outlook"]["start"] == pytest.approx(start, abs=1e-4)
    assert record["level4_outlook"]["possible"] in (True, False)
    assert f"**Lo que el nivel 4 podrá mostrar.** {record['level4_outlook']['text_es']}" in page


def test_the_rehearsal_says_whether_level_4s_comparison_can_appear():
    """Issue 33, item 5: E2's hacking signature needs the format reward to rise; after a format pass it may start
    at its ceiling. The rehearsal says so from the format reward it measured at the first step."""
    from labs.grading.outlook import level4_outlook, recommend

    rising = level4_outlook(0.06, "cpu")  # what the cpu profile measures
    assert rising["possible"] is True and "0.06 de 0.5" in rising["text_es"]
    at_ceiling = level4_outlook(0.48, "rtx5090-base")
    assert at_ceiling["possible"] is False and "techo" in at_ceiling["text_es"]
    assert level4_outlook(None, "rtx5090-base")["possible"] is None
    record = {"profile": "rtx5090-base", "base_holdout": {"n": 200, "accuracy": 0.8, "mean_length": 120.0, "model": "m"},
              "level4_outlook": at_ceiling, "parts": {}, "not_checked": []}
    assert at_ceiling["text_es"] in recommend(record).outlook_es
    assert at_ceiling["text_es"] in report.render_es(record)



@pytest.mark.skipif("__import__('torch').cuda.is_available()", reason="a CUDA GPU is visible: rtx5090 would run")
def test_a_failed_part_makes_the_rehearsal_exit_non_zero_with_its_reason(tmp_path):
    """`make` (through `python -m labs next`) must stop when the rehearsal fails. Here L7.1's part fails for real,
    in its child process: the rtx5090 profile on a machine without a GPU stops at the doctor, before any model."""
    root = tmp_path / "rehearsal"
    proc = subprocess.run([sys.executable, "-m", "labs", "rehearse", "--profile", "rtx5090", "--root", str(root)],
                          env={**os.environ, "COURSE_RUNS": str(tmp_path)}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = json.loads((root / REHEARSAL_JSON).read_text())
    assert record["status"] == "failed" and record["parts"]["l71"]["ok"] is False and "l72" not in record["parts"]
    assert "[ensayo] FALLÓ (error): El entorno no está listo para el perfil 'rtx5090'" in proc.stderr


def test_the_rehearsal_measures_step_times_folder_sizes_and_the_logged_completion_length(tmp_path):
    """labs.rehearsal.measure on a real run folder: each kind of file counted once, in its own column."""
    from labs.core.runfolder import RunFolder
    from labs.rehearsal.measure import folder_bytes, mean_completion_tokens, run_disk, step_timer

    run = RunFolder(tmp_path / "run")
    for rel, size in {"checkpoints/checkpoint-1/adapter.bin": 300, "checkpoints/checkpoint-2/adapter.bin": 500,
                      "model/adapter.bin": 200, "eval/base.jsonl": 40, "eval/trained.jsonl": 60}.items():
        (run.root / rel).parent.mkdir(parents=True, exist_ok=True)
        (run.root / rel).write_bytes(b"x" * size)
    rows = [{"step": 1, "completions/mean_length": 10.0}, {"step": 2, "completions/mean_length": 30},
            {"step": 2, "loss": 0.1}]
    run.metrics_path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    logs = run.metrics_path.stat().st_size
    disk = run_disk(run, steps=2, eval_problems=4)
    assert (disk["checkpoint_bytes"], disk["model_bytes"], disk["eval_bytes"]) == (500, 200, 100)
    assert disk["log_bytes"] == logs and disk["log_bytes_per_step"] == logs / 2
    assert disk["eval_bytes_per_problem"] == 25 and disk["total_bytes"] == 1100 + logs
    assert mean_completion_tokens(run) == 20.0 and mean_completion_tokens(RunFolder(tmp_path / "none")) is None
    assert folder_bytes(run.root / "model/adapter.bin") == 200 and folder_bytes(tmp_path / "none") == 0  # a file
    timer = step_timer()
    timer.on_step_end(None, None, None)  # an end without a begin records nothing
    timer.on_step_begin(None, None, None)
    timer.on_step_end(None, None, None)
    assert len(timer.seconds) == 1 and 0 <= timer.seconds[0] < 5
