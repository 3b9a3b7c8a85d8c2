"""A terminal run trains the notebook's saved settings, and leaves the model's own words in its folder.

One real ``python -m labs l71 --profile ci`` run (2 steps): before it, the settings a student saved from
the L7.1 notebook (labs.l71.settings) change ``learning_rate``; the run must train with that value and
record in run.json where it came from. The same run's TRL completion logs are then read back with
labs.training.completions (what the L7.1 and E2 notebooks show).
"""

import os
import subprocess
import sys

import pytest

from labs.core import runfolder
from labs.core.profiles import get_profile

pytestmark = pytest.mark.trains  # trains a real ci run (conftest adds slow); the guard in tests/conftest.py requires the mark
STUDENT_LR = 2.5e-5


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from trl import GRPOConfig

    from labs.l71 import settings

    runs = tmp_path_factory.mktemp("runs")
    session_area = os.environ.get("COURSE_RUNS")  # the session's run area (conftest.py): put back below
    os.environ["COURSE_RUNS"] = str(runs)  # settings.save writes under runs_dir()
    try:
        profile = get_profile("ci")
        kwargs = {**settings.rest_of_recipe(profile, str(runs / "x")),
                  **{k: getattr(profile, k) for k in settings.LESSON_KNOBS}, "learning_rate": STUDENT_LR}
        settings.save(GRPOConfig(**kwargs), profile, echo=lambda _: None)
    finally:
        if session_area is None:
            del os.environ["COURSE_RUNS"]
        else:
            os.environ["COURSE_RUNS"] = session_area
    env = dict(os.environ, COURSE_RUNS=str(runs), PYTHONUNBUFFERED="1")
    done = subprocess.run([sys.executable, "-m", "labs", "l71", "--profile", "ci"], env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return {"run": runfolder.RunFolder(runs / "l71-ci"), "log": done.stdout + done.stderr, "profile": profile}


def test_the_terminal_trains_the_saved_settings_and_says_where_they_came_from(run):
    info = runfolder.read_json(run["run"].path(runfolder.RUN_JSON))
    assert "[ajustes] Uso tus ajustes del cuaderno L7.1" in run["log"]
    assert info["settings_from"]["values"] == {"learning_rate": STUDENT_LR}
    assert info["settings_from"]["file"].endswith("_ajustes/l71-ci.json")
    assert info["grpo_config"]["learning_rate"] == STUDENT_LR and info["profile"]["learning_rate"] == STUDENT_LR
    assert run["run"].metrics()[0]["learning_rate"] > 0  # it trained


def test_the_completion_logs_are_written_bounded_and_read_back(run):
    import pandas as pd

    from labs.training import completions

    profile, root = run["profile"], run["run"].root
    files = completions.completion_files(root)
    assert [f.name for f in files] == [f"completions_{s:05d}.parquet" for s in range(1, profile.max_steps + 1)]
    frames = [pd.read_parquet(f) for f in files]
    assert all(len(f) == profile.generation_batch_size for f in frames)  # one generation batch per step
    logged = completions.logged(root)
    assert list(logged) == list(range(1, profile.max_steps + 1))
    samples, same_prompt = completions.over_training(root)
    assert [s.step for s in samples] == list(logged)
    for sample, frame in zip(samples, frames):
        assert len(sample.completions) == profile.num_generations  # the whole group of that prompt
        for c in sample.completions:
            assert set(c.rewards) == {"correctness_reward", "format_reward", "soft_format_reward"}
            assert c.text in set(frame["completion"].map(lambda m: m[0]["content"]))
        assert [c.total for c in sample.completions] == sorted((c.total for c in sample.completions), reverse=True)
    text = completions.over_training_es(samples, same_prompt)
    assert f"Paso {profile.max_steps}:" in text and "mejor pagada" in text


def test_before_and_after_come_from_the_same_holdout_problem(run):
    from labs.training import completions

    root = run["run"].root
    pair = completions.before_after(root)
    base = {r["id"]: r for r in runfolder.read_jsonl(root / runfolder.EVAL_BASE)}
    trained = {r["id"]: r for r in runfolder.read_jsonl(root / runfolder.EVAL_TRAINED)}
    assert pair.base == base[pair.id] and pair.trained == trained[pair.id]
    text = completions.before_after_es(pair)
    assert "Modelo base" in text and "Modelo entrenado" in text and str(pair.gold) in text
