"""Two faults of a long run on the ci profile, in one real run of three steps saving after each:

1. a student's reward function hangs at step 3 (it sleeps, as a runaway regular expression would):
   past the profile's ``reward_timeout_s`` the run stops with a classified Spanish failure naming the
   function in ``status.json``, keeping the checkpoints of steps 1 and 2;
2. the newest checkpoint's ``model.safetensors`` is then cut short (a crash or a full disk during a
   save): the same command skips it, says why, moves it into ``checkpoints/_rotos/``, resumes from
   checkpoint-1 and finishes with every step logged once.

The reward reads ``trainer_state.global_step``, so pre-flight must pass a real TrainerState (issue 24,
item 3) for the run to start at all.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from labs.core import runfolder
from labs.training import checkpoints

pytestmark = pytest.mark.trains  # trains a real ci run (conftest adds slow); the guard in tests/conftest.py requires the mark
RUN_NAME = "test-resume-faults"
STEPS, LIMIT = 3, 5
SLOW_FILE = Path(__file__).resolve().parent / "data" / "recompensa_lenta.py"
SLOW_REWARD = "recompensa_lenta"


def command() -> list[str]:
    return [sys.executable, "-m", "labs", "l71", "--profile", "ci", "--run-name", RUN_NAME,
            "--set", f"max_steps={STEPS}", "--set", "save_steps=1", "--set", "save_total_limit=2",
            "--set", f"reward_timeout_s={LIMIT}",
            "--rewards", f"correctness_reward,format_reward,{SLOW_FILE}:{SLOW_REWARD}"]


def launch(runs: Path, log: Path, **env) -> int:
    extra, env = env, dict(os.environ, COURSE_RUNS=str(runs), PYTHONUNBUFFERED="1")
    env.pop("RECOMPENSA_LENTA_DESDE_PASO", None)
    env.update(extra)
    with open(log, "w") as out:
        return subprocess.run(command(), env=env, stdout=out, stderr=subprocess.STDOUT, timeout=1800).returncode


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    run = runfolder.RunFolder(runs / RUN_NAME)
    first, second = runs / "first.log", runs / "second.log"
    rc1 = launch(runs, first, RECOMPENSA_LENTA_DESDE_PASO="3")
    after_hang = {
        "rc": rc1, "log": first.read_text(), "status": run.status(), "metrics": run.metrics(),
        "checkpoints": sorted(c.name for c in run.checkpoint_folders()),
        "problems": {c.name: checkpoints.problem(c) for c in run.checkpoint_folders()},
        "staging_left": (run.checkpoints / checkpoints.STAGING_DIR).exists(),
        "run_json": run.path(runfolder.RUN_JSON).read_text(),
    }
    torn = run.checkpoints / "checkpoint-2" / "model.safetensors"
    if torn.exists():
        with open(torn, "r+b") as fh:  # what a crash or a full disk leaves: the file cut short
            fh.truncate(torn.stat().st_size // 2)
    rc2 = launch(runs, second)
    return {"run": run, "hang": after_hang, "rc": rc2, "log": second.read_text()}


def test_a_hung_reward_stops_the_run_naming_the_function(faults):
    hang = faults["hang"]
    assert hang["rc"] == 1, hang["log"][-4000:]
    status = hang["status"]
    assert status["state"] == "failed" and status["kind"] == "reward_timeout", status
    assert status["reward_function"] == SLOW_REWARD and status["reward_timeout_s"] == LIMIT
    assert SLOW_REWARD in status["message_es"] and f"{LIMIT} s" in status["message_es"]
    assert status["step"] == 2 and [m["step"] for m in hang["metrics"]] == [1, 2]
    assert f"[reward_timeout] paso 2: La función de recompensa {SLOW_REWARD}" in hang["log"]


def test_the_hung_run_keeps_its_checkpoints_whole(faults):
    hang = faults["hang"]
    assert hang["checkpoints"] == ["checkpoint-1", "checkpoint-2"]
    assert hang["problems"] == {"checkpoint-1": None, "checkpoint-2": None}
    assert not hang["staging_left"]  # the atomic saves cleaned their staging folder
    assert all(f"course/reward_seconds/{SLOW_REWARD}" in m for m in hang["metrics"])


def test_a_torn_newest_checkpoint_is_skipped_and_set_aside(faults):
    run, log = faults["run"], faults["log"]
    assert faults["rc"] == 0, log[-4000:]
    assert "[run] checkpoint-2 está roto (model.safetensors está cortado" in log
    assert "Continúo desde checkpoint-1" in log
    kept = run.checkpoints / checkpoints.TORN_DIR / "checkpoint-2" / "model.safetensors"
    assert kept.exists()  # moved aside, not deleted (and the finished run's cleanup left it)


def test_the_resumed_run_finishes_with_every_step_logged_once(faults):
    run = faults["run"]
    assert [m["step"] for m in run.metrics()] == list(range(1, STEPS + 1))
    status = run.status()
    assert status["state"] == "finished" and status["step"] == STEPS
    assert (run.root / "grading" / "informe.md").exists()


def test_the_resume_kept_run_json_as_it_was_written_at_the_start(faults):
    assert faults["run"].path(runfolder.RUN_JSON).read_text() == faults["hang"]["run_json"]
