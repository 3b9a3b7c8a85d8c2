"""``python -m labs l71`` in a terminal, on the ci profile: one run through every fault a long run meets.

One real run serves every assertion (each launch costs a vLLM start-up, about half a minute on 2 cores), in
three launches of the same command:

1. before it, the settings a student saved from the L7.1 notebook (labs.l71.settings) change
   ``learning_rate``; the first launch is interrupted with SIGINT right after its first checkpoint (what
   Ctrl+C does), and must record why it stopped;
2. the same command continues from that checkpoint; a student's reward function
   (tests/data/recompensa_lenta.py) then hangs at step 3, and past the profile's ``reward_timeout_s`` the run
   stops with a classified Spanish failure naming the function, keeping the checkpoints of steps 1 and 2;
3. the newest checkpoint's ``model.safetensors`` is cut short (a crash or a full disk during a save): the
   same command skips it, says why, moves it into ``checkpoints/_rotos/``, resumes from checkpoint-1 and
   finishes with every step logged once and the complete run folder.

The run trains with the lesson's three rewards plus two of a student's own functions from files
(``--rewards ...,tests/data/recompensa_alumno.py:razonamiento_con_cuentas``, as exercise E4 does), so the
same run also checks the student-reward path end to end: the function trains, run.json records its
source, and the C2b grader counts it as the student's own, beside an E2-style comparison run. Its TRL
completion logs are read back with labs.training.completions (what the L7.1 and E2 notebooks show).

Trains (marked ``trains``). What only this module checks: Ctrl+C, a hung reward and a torn checkpoint, and
resume after each, of ``python -m labs l71`` in a terminal; the notebook's saved settings trained by a
terminal run; wandb offline in the run folder; a student's reward file in a real run; TRL's completion logs.
(One module instead of three, each with its own run: the same checks at a third of the suite's time.)
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
from labs.core.cpu_bf16 import has_bf16_units
from labs.core.profiles import get_profile
from labs.training import checkpoints

pytestmark = pytest.mark.trains
RUN_NAME = "test-l71-resume"
STEPS, SAVE, HANG_AT, LIMIT = 3, 1, 3, 5
# What this module checks is bookkeeping (stops, resumes, records), not learning: the ci profile's short
# completions and answers (24 and 8 new tokens) serve it, and whether the weights had to move is read from
# the run itself (test_saved_model_differs_from_the_starting_model).
STUDENT_LR = 2.5e-5
DATA = Path(__file__).resolve().parent / "data"
STUDENT_FILE = DATA / "recompensa_alumno.py"
STUDENT_REWARD = "razonamiento_con_cuentas"
SLOW_FILE = DATA / "recompensa_lenta.py"
SLOW_REWARD = "recompensa_lenta"
COURSE_REWARDS = ["correctness_reward", "format_reward", "soft_format_reward"]
REWARDS = ",".join(COURSE_REWARDS + [f"{STUDENT_FILE}:{STUDENT_REWARD}", f"{SLOW_FILE}:{SLOW_REWARD}"])


def command() -> list[str]:
    return [sys.executable, "-m", "labs", "l71", "--profile", "ci", "--run-name", RUN_NAME,
            "--set", f"max_steps={STEPS}", "--set", f"save_steps={SAVE}", "--set", "save_total_limit=2",
            "--set", f"reward_timeout_s={LIMIT}", "--set", "report_to=wandb", "--rewards", REWARDS]


def launch(runs: Path, log: Path, **extra):
    env = dict(os.environ, COURSE_RUNS=str(runs), PYTHONUNBUFFERED="1", WANDB_MODE="offline")
    env.pop("RECOMPENSA_LENTA_DESDE_PASO", None)
    env.update(extra)
    return subprocess.Popen(command(), env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)


def save_student_settings(runs: Path) -> None:
    """What the L7.1 notebook's settings cell does: GRPOConfig with the student's learning rate, saved."""
    from trl import GRPOConfig

    from labs.l71 import settings

    with pytest.MonkeyPatch.context() as mp:  # the session's run area (conftest.py) comes back after the block
        mp.setenv("COURSE_RUNS", str(runs))  # settings.save writes under runs_dir()
        profile = get_profile("ci")
        kwargs = {**settings.rest_of_recipe(profile, str(runs / "x")),
                  **{k: getattr(profile, k) for k in settings.LESSON_KNOBS}, "learning_rate": STUDENT_LR}
        settings.save(GRPOConfig(**kwargs), profile, echo=lambda _: None)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    run = runfolder.RunFolder(runs / RUN_NAME)
    first_log, second_log, third_log = runs / "first.log", runs / "second.log", runs / "third.log"
    save_student_settings(runs)

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

    proc = launch(runs, second_log, RECOMPENSA_LENTA_DESDE_PASO=str(HANG_AT))
    hang_rc = proc.wait(timeout=1500)
    hang = {
        "rc": hang_rc, "log": second_log.read_text(), "status": run.status(), "metrics": run.metrics(),
        "checkpoints": sorted(c.name for c in run.checkpoint_folders()),
        "problems": {c.name: checkpoints.problem(c) for c in run.checkpoint_folders()},
        "staging_left": (run.checkpoints / checkpoints.STAGING_DIR).exists(),
        "run_json": run.path(runfolder.RUN_JSON).read_text(),
    }
    torn = run.checkpoints / f"checkpoint-{HANG_AT - 1}" / "model.safetensors"
    if torn.exists():
        with open(torn, "r+b") as fh:  # what a crash or a full disk leaves: the file cut short
            fh.truncate(torn.stat().st_size // 2)

    proc = launch(runs, third_log)
    assert proc.wait(timeout=1500) == 0, third_log.read_text()[-4000:]
    return {
        "run": run,
        "status_after_interrupt": status_after_interrupt,
        "metrics_before": metrics_before,
        "hang": hang,
        "final_log": third_log.read_text(),
        "profile": get_profile("ci"),
    }


def test_an_interrupted_run_records_why(resumed):
    status = resumed["status_after_interrupt"]
    assert status["state"] == "failed" and status["kind"] == "interrupted"
    assert status["step"] >= SAVE
    assert "continuará desde el último checkpoint" in status["message_es"]


def test_the_same_command_continues_from_the_checkpoint(resumed):
    assert f"Continúo desde checkpoint-{SAVE}" in resumed["hang"]["log"]  # the second launch's
    steps = [m["step"] for m in resumed["run"].metrics()]
    assert steps == list(range(1, STEPS + 1))  # every step logged once, across three launches


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
    assert info["reward_functions"] == COURSE_REWARDS + [STUDENT_REWARD, SLOW_REWARD]
    assert {"torch", "trl", "transformers"} <= set(info["versions"]) and info["hardware"]["cpu_count"]
    assert info["grpo_config"]["use_vllm"] and info["grpo_config"]["vllm_mode"] == "colocate"
    # what trained it: bf16 autocast where this CPU has bf16 units, float32 weights either way
    assert info["grpo_config"]["bf16"] is info["profile"]["bf16"] is has_bf16_units()
    assert "model_init_kwargs" not in info["grpo_config"]
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
    assert run.last_checkpoint() is None and "Checkpoints borrados" in resumed["final_log"]
    # a finished run ends on its own lines, not on a traceback from vLLM's exit hook (labs.core.distributed)
    assert "Traceback" not in resumed["final_log"] and "Invalid process group" not in resumed["final_log"]
    assert list(run.model_dir.glob("*.safetensors"))
    # wandb, when enabled, logs offline into the run folder: no account needed
    assert list(run.root.glob("wandb/offline-run-*"))


def test_evaluation_is_paired_and_complete(resumed):
    run = resumed["run"]
    base = runfolder.read_jsonl(run.path(runfolder.EVAL_BASE))
    trained = runfolder.read_jsonl(run.path(runfolder.EVAL_TRAINED))
    n = resumed["profile"].eval_size
    assert [r["id"] for r in base] == [r["id"] for r in trained] and len(base) == n
    for record in base + trained:
        assert set(runfolder.EVAL_RECORD_KEYS) <= set(record)
        assert record["id"].startswith("gsm8k-test-")
    summary = runfolder.read_json(run.path(runfolder.EVAL_SUMMARY))
    assert summary["n"] == n and summary["dataset"] == "openai/gsm8k:main:test"
    assert summary["base_accuracy"] == sum(r["correct"] for r in base) / n
    # the format-independent reading, for both models
    assert summary["base_accuracy_last_number"] == sum(r["correct_last_number"] for r in base) / n
    assert summary["trained_accuracy_last_number"] == sum(r["correct_last_number"] for r in trained) / n
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
    assert [sources[n]["own"] for n in info["reward_functions"]] == [False, False, False, True, True]
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
    assert g.own_rewards == [STUDENT_REWARD, SLOW_REWARD]
    assert STUDENT_REWARD in g.criterion(4).evidence[0]
    assert g.comparisons[0].hacking.holds is True and g.comparisons[0].own_rewards == []
    # This run has 3 steps and 4 holdout problems: criteria 1 and 3 cannot be decided, the
    # detector cannot judge 2 logged steps, so no level is suggested; the report says why.
    assert g.hacking.holds is None and grading.hack_prevented(g) is None
    assert g.level == grading.NO_LEVEL and "No se puede determinar el criterio 1" in g.level_reason
    report = write_report(g, tmp_path / "informe").read_text(encoding="utf-8")
    assert STUDENT_REWARD in report and "e2_solo_formato" in report


# --- the hung reward (second launch) and the torn checkpoint (third launch) -------------------------------


def test_a_hung_reward_stops_the_run_naming_the_function(resumed):
    hang = resumed["hang"]
    assert hang["rc"] == 1, hang["log"][-4000:]
    status = hang["status"]
    assert status["state"] == "failed" and status["kind"] == "reward_timeout", status
    assert status["reward_function"] == SLOW_REWARD and status["reward_timeout_s"] == LIMIT
    assert SLOW_REWARD in status["message_es"] and f"{LIMIT} s" in status["message_es"]
    assert status["step"] == HANG_AT - 1 and [m["step"] for m in hang["metrics"]] == [1, 2]
    assert f"[reward_timeout] paso {HANG_AT - 1}: La función de recompensa {SLOW_REWARD}" in hang["log"]


def test_the_hung_run_keeps_its_checkpoints_whole(resumed):
    hang = resumed["hang"]
    assert hang["checkpoints"] == ["checkpoint-1", "checkpoint-2"]
    assert hang["problems"] == {"checkpoint-1": None, "checkpoint-2": None}
    assert not hang["staging_left"]  # the atomic saves cleaned their staging folder
    assert all(f"course/reward_seconds/{SLOW_REWARD}" in m for m in hang["metrics"])


def test_a_torn_newest_checkpoint_is_skipped_and_set_aside(resumed):
    run, log = resumed["run"], resumed["final_log"]
    assert "[run] checkpoint-2 está roto (model.safetensors está cortado" in log
    assert "Continúo desde checkpoint-1" in log
    kept = run.checkpoints / checkpoints.TORN_DIR / "checkpoint-2" / "model.safetensors"
    assert kept.exists()  # moved aside, not deleted (and the finished run's cleanup left it)


def test_the_resumes_kept_run_json_as_it_was_written_at_the_start(resumed):
    assert resumed["run"].path(runfolder.RUN_JSON).read_text() == resumed["hang"]["run_json"]


# --- the notebook's saved settings, and the model's own words ------------------------------------------------


def test_the_terminal_trains_the_saved_settings_and_says_where_they_came_from(resumed):
    info = runfolder.read_json(resumed["run"].path(runfolder.RUN_JSON))
    assert "[ajustes] Uso tus ajustes del cuaderno L7.1" in resumed["final_log"]
    assert info["settings_from"]["values"] == {"learning_rate": STUDENT_LR}
    assert info["settings_from"]["file"].endswith("_ajustes/l71-ci.json")
    assert info["grpo_config"]["learning_rate"] == STUDENT_LR and info["profile"]["learning_rate"] == STUDENT_LR
    assert resumed["run"].metrics()[0]["learning_rate"] > 0  # it trained


def test_the_completion_logs_are_written_bounded_and_read_back(resumed):
    import pandas as pd

    from labs.training import completions

    profile, root = resumed["profile"], resumed["run"].root
    files = completions.completion_files(root)
    assert [f.name for f in files] == [f"completions_{s:05d}.parquet" for s in range(1, STEPS + 1)]
    frames = [pd.read_parquet(f) for f in files]
    assert all(len(f) == profile.generation_batch_size for f in frames)  # one generation batch per step
    logged = completions.logged(root)
    assert list(logged) == list(range(1, STEPS + 1))
    samples, same_prompt = completions.over_training(root)
    assert [s.step for s in samples] == list(logged)
    for sample, frame in zip(samples, frames):
        assert len(sample.completions) == profile.num_generations  # the whole group of that prompt
        for c in sample.completions:
            assert set(c.rewards) == set(COURSE_REWARDS + [STUDENT_REWARD, SLOW_REWARD])
            assert c.text in set(frame["completion"].map(lambda m: m[0]["content"]))
        assert [c.total for c in sample.completions] == sorted((c.total for c in sample.completions), reverse=True)
    text = completions.over_training_es(samples, same_prompt)
    assert f"Paso {STEPS}:" in text and "mejor pagada" in text


def test_before_and_after_come_from_the_same_holdout_problem(resumed):
    from labs.training import completions

    root = resumed["run"].root
    pair = completions.before_after(root)
    base = {r["id"]: r for r in runfolder.read_jsonl(root / runfolder.EVAL_BASE)}
    trained = {r["id"]: r for r in runfolder.read_jsonl(root / runfolder.EVAL_TRAINED)}
    assert pair.base == base[pair.id] and pair.trained == trained[pair.id]
    text = completions.before_after_es(pair)
    assert "Modelo base" in text and "Modelo entrenado" in text and str(pair.gold) in text
