"""The L7.1 module front door on the ci profile: interrupted, resumed, and a complete run folder.

One real run serves every assertion (each launch costs a vLLM start-up): it is interrupted with
SIGINT right after its first checkpoint, which must record why it stopped; the same command then
continues from that checkpoint and finishes, leaving the complete run folder.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors import safe_open

from labs.core import runfolder

pytestmark = pytest.mark.slow
RUN_NAME = "test-l71-resume"
STEPS, SAVE = 2, 1


def launch(runs: Path, log: Path):
    env = dict(os.environ, COURSE_RUNS=str(runs), PYTHONUNBUFFERED="1", WANDB_MODE="offline")
    cmd = [sys.executable, "-m", "labs", "l71", "--profile", "ci", "--run-name", RUN_NAME,
           "--set", f"max_steps={STEPS}", "--set", f"save_steps={SAVE}", "--set", "report_to=wandb"]
    return subprocess.Popen(cmd, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    run = runfolder.RunFolder(runs / RUN_NAME)
    first_log, second_log = runs / "first.log", runs / "second.log"

    proc = launch(runs, first_log)
    deadline = time.time() + 1500
    checkpoint = run.checkpoints / f"checkpoint-{SAVE}" / "trainer_state.json"
    while not checkpoint.exists():
        assert proc.poll() is None, first_log.read_text()[-4000:]
        assert time.time() < deadline, "no checkpoint in time"
        time.sleep(1)
    proc.send_signal(signal.SIGINT)  # what Ctrl+C does in a terminal
    proc.wait(timeout=600)
    status_after_interrupt = run.status()
    metrics_before = run.metrics()

    proc = launch(runs, second_log)
    assert proc.wait(timeout=1500) == 0, second_log.read_text()[-4000:]
    return {
        "run": run,
        "status_after_interrupt": status_after_interrupt,
        "metrics_before": metrics_before,
        "first_rc": proc.returncode,
        "second_log": second_log.read_text(),
    }


def test_an_interrupted_run_records_why(resumed):
    status = resumed["status_after_interrupt"]
    assert status["state"] == "failed" and status["kind"] == "interrupted"
    assert status["step"] >= SAVE
    assert "continuará desde el último checkpoint" in status["message_es"]


def test_the_same_command_continues_from_the_checkpoint(resumed):
    assert f"Continúo desde checkpoint-{SAVE}" in resumed["second_log"]
    steps = [m["step"] for m in resumed["run"].metrics()]
    assert steps == list(range(1, STEPS + 1))


def test_metrics_logged_before_the_interruption_are_kept(resumed):
    before = {m["step"]: m for m in resumed["metrics_before"] if m["step"] <= SAVE}
    after = {m["step"]: m for m in resumed["run"].metrics()}
    assert set(before) == set(range(1, SAVE + 1))
    for step, row in before.items():
        assert after[step] == row


def test_run_folder_is_complete(resumed):
    run = resumed["run"]
    status = run.status()
    assert status["state"] == "finished" and status["step"] == STEPS
    info = runfolder.read_json(run.path(runfolder.RUN_JSON))
    assert info["lab"] == "L7.1" and info["profile"]["name"] == "ci" and info["profile"]["max_steps"] == STEPS
    assert info["reward_functions"] == ["correctness_reward", "format_reward", "soft_format_reward"]
    assert {"torch", "trl", "transformers"} <= set(info["versions"]) and info["hardware"]["cpu_count"]
    assert info["grpo_config"]["use_vllm"] and info["grpo_config"]["vllm_mode"] == "colocate"
    metric = run.metrics()[-1]
    for key in ("reward", "kl", "completions/mean_length", "rewards/correctness_reward/mean",
                "frac_reward_zero_std", "step_time", "course/generation_seconds"):
        assert key in metric, key
    assert (run.curves_dir / "training.png").stat().st_size > 10_000
    assert (run.root / "grading" / "informe.md").exists()
    memory = runfolder.read_json(run.path(runfolder.RESOURCES_JSON))  # what L7.2's comparison reads
    assert memory["lab"] == "L7.1" and memory["peak_rss_gib"] > 0.5 and memory["samples"] >= 2
    assert list(run.checkpoints.glob("completions/completions_*.parquet"))
    # a finished run keeps its final weights in model/ and frees the checkpoints' disk
    assert run.last_checkpoint() is None and "Checkpoints borrados" in resumed["second_log"]
    assert list(run.model_dir.glob("*.safetensors"))
    # wandb, when enabled, logs offline into the run folder: no account needed
    assert list(run.root.glob("wandb/offline-run-*"))


def test_evaluation_is_paired_and_complete(resumed):
    run = resumed["run"]
    base = runfolder.read_jsonl(run.path(runfolder.EVAL_BASE))
    trained = runfolder.read_jsonl(run.path(runfolder.EVAL_TRAINED))
    assert [r["id"] for r in base] == [r["id"] for r in trained] and len(base) == 8
    for record in base + trained:
        assert set(runfolder.EVAL_RECORD_KEYS) <= set(record)
        assert record["id"].startswith("gsm8k-test-")
    summary = runfolder.read_json(run.path(runfolder.EVAL_SUMMARY))
    assert summary["n"] == 8 and summary["dataset"] == "openai/gsm8k:main:test"
    assert summary["base_accuracy"] == sum(r["correct"] for r in base) / 8
    assert 0.0 <= summary["mcnemar_p"] <= 1.0
    # the evaluation generated with the trained weights: vLLM's copy equals the trainer's
    assert summary["engine_weight_max_abs_diff"] == 0.0


def test_saved_model_differs_from_the_starting_model(resumed):
    run = resumed["run"]
    start = Path(runfolder.read_json(run.path(runfolder.RUN_JSON))["base_model"])
    with safe_open(run.model_dir / "model.safetensors", "pt") as new, \
         safe_open(start / "model.safetensors", "pt") as old:
        names = [n for n in new.keys() if "norm" not in n]
        changed = sum(not (new.get_tensor(n) == old.get_tensor(n)).all() for n in names)
    # GRPO moved the weights only if some group had reward variance; the run logs whether it did
    learned = any(m.get("grad_norm", 0) > 0 for m in run.metrics())
    assert (changed > 0) == learned


def test_a_finished_run_is_not_trained_again(resumed, tmp_path):
    run = resumed["run"]
    lines = run.metrics_path.read_text()
    env = dict(os.environ, COURSE_RUNS=str(run.root.parent))
    result = subprocess.run(
        [sys.executable, "-m", "labs", "l71", "--profile", "ci", "--run-name", RUN_NAME,
         "--set", f"max_steps={STEPS}", "--set", f"save_steps={SAVE}", "--set", "report_to=wandb"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert result.returncode == 0 and "ya terminó" in result.stdout
    assert run.metrics_path.read_text() == lines
