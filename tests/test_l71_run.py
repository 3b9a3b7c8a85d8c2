"""The L7.1 module front door on the ci profile: interrupted, resumed, and a complete run folder.

One real run serves every assertion (each launch costs a vLLM start-up): it is interrupted with
SIGINT right after its first checkpoint, which must record why it stopped; the same command then
continues from that checkpoint and finishes, leaving the complete run folder.

The run trains with the lesson's three rewards plus a student's own function from a file
(``--rewards ...,tests/data/recompensa_alumno.py:razonamiento_con_cuentas``, as exercise E4 does), so the
same run also checks the student-reward path end to end: the function trains, run.json records its
source, and the C2b grader counts it as the student's own, beside an E2-style comparison run.

Trains (marked ``trains``). What only this module checks: Ctrl+C and resume of ``python -m labs l71`` in a
terminal, wandb offline in the run folder, and a student's reward file in a real run.
"""

import hashlib
import inspect
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors import safe_open

from labs.core import runfolder

pytestmark = pytest.mark.trains
RUN_NAME = "test-l71-resume"
STEPS, SAVE = 2, 1
STUDENT_FILE = Path(__file__).resolve().parent / "data" / "recompensa_alumno.py"
STUDENT_REWARD = "razonamiento_con_cuentas"
REWARDS = f"correctness_reward,format_reward,soft_format_reward,{STUDENT_FILE}:{STUDENT_REWARD}"


def command() -> list[str]:
    return [sys.executable, "-m", "labs", "l71", "--profile", "ci", "--run-name", RUN_NAME,
            "--set", f"max_steps={STEPS}", "--set", f"save_steps={SAVE}", "--set", "report_to=wandb",
            "--rewards", REWARDS]


def launch(runs: Path, log: Path):
    env = dict(os.environ, COURSE_RUNS=str(runs), PYTHONUNBUFFERED="1", WANDB_MODE="offline")
    return subprocess.Popen(command(), env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)


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
    assert info["reward_functions"] == ["correctness_reward", "format_reward", "soft_format_reward", STUDENT_REWARD]
    assert {"torch", "trl", "transformers"} <= set(info["versions"]) and info["hardware"]["cpu_count"]
    assert info["grpo_config"]["use_vllm"] and info["grpo_config"]["vllm_mode"] == "colocate"
    metric = run.metrics()[-1]
    for key in ("reward", "kl", "completions/mean_length", "rewards/correctness_reward/mean",
                f"rewards/{STUDENT_REWARD}/mean", "frac_reward_zero_std", "step_time", "course/generation_seconds"):
        assert key in metric, key
    # the CPU profiles switch off TRL's importance-sampling correction, and TRL then logs no ratio
    assert info["grpo_config"]["vllm_importance_sampling_correction"] is False
    assert not any(k.startswith("sampling/importance_sampling_ratio") for m in run.metrics() for k in m)
    assert (run.curves_dir / "training.png").stat().st_size > 10_000
    assert (run.root / "grading" / "informe.md").exists()
    memory = runfolder.read_json(run.path(runfolder.RESOURCES_JSON))  # what L7.2's comparison reads
    assert memory["lab"] == "L7.1" and memory["peak_rss_gib"] > 0.5 and memory["samples"] >= 2
    assert list(run.checkpoints.glob("completions/completions_*.parquet"))
    # a finished run keeps its final weights in model/ and frees the checkpoints' disk
    assert run.last_checkpoint() is None and "Checkpoints borrados" in resumed["second_log"]
    # a finished run ends on its own lines, not on a traceback from vLLM's exit hook (labs.core.distributed)
    assert "Traceback" not in resumed["second_log"] and "Invalid process group" not in resumed["second_log"]
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
    # the format-independent reading, for both models
    assert summary["base_accuracy_last_number"] == sum(r["correct_last_number"] for r in base) / 8
    assert summary["trained_accuracy_last_number"] == sum(r["correct_last_number"] for r in trained) / 8
    for record in base + trained:  # correct_last_number: the last number read equals the gold
        assert record["correct_last_number"] == (record["last_number"] == str(record["gold"]))
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
    result = subprocess.run(command(), capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0 and "ya terminó" in result.stdout
    assert run.metrics_path.read_text() == lines


def test_run_json_records_the_students_function_and_its_source(resumed):
    info = runfolder.read_json(resumed["run"].path(runfolder.RUN_JSON))
    sources = {r["name"]: r for r in info["reward_sources"]}
    assert [sources[n]["own"] for n in info["reward_functions"]] == [False, False, False, True]
    own = sources[STUDENT_REWARD]
    from rewards import reward_functions

    source = inspect.getsource(reward_functions(f"{STUDENT_FILE}:{STUDENT_REWARD}")[0])
    assert Path(own["file"]) == STUDENT_FILE and own["source"] == source
    assert own["source_sha256"] == hashlib.sha256(source.encode()).hexdigest()
    assert info["reward_values"][STUDENT_REWARD] is None  # not one of the course's values


def test_the_grader_counts_the_students_function_beside_an_e2_comparison(resumed, tmp_path):
    """C2b level 4's inputs from a real run: own functions, and a comparison where the detector fires."""
    from labs.grading import grade as grading
    from labs.grading.report import write_report

    from rundirs import e2_run

    comparison = e2_run(tmp_path)  # format only, 200 steps: the hack the student's function is set against
    g = grading.grade_run(resumed["run"].root, comparisons=[comparison])
    assert g.own_rewards == [STUDENT_REWARD]
    assert STUDENT_REWARD in g.criterion(4).evidence[0]
    assert g.comparisons[0].hacking.holds is True and g.comparisons[0].own_rewards == []
    # On ci the main run has 2 steps and 8 holdout problems: criteria 1 and 3 cannot be decided, the
    # detector cannot judge 2 logged steps, so no level is suggested; the report says why.
    assert g.hacking.holds is None and grading.hack_prevented(g) is None
    assert g.level == grading.NO_LEVEL and "No se puede determinar el criterio 1" in g.level_reason
    report = write_report(g, tmp_path / "informe").read_text(encoding="utf-8")
    assert STUDENT_REWARD in report and "e2_solo_formato" in report
