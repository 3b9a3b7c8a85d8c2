"""One recipe: the student's saved settings and reward functions have one identity, recorded in every run.json,
and every run (L7.1, E1-E3's reference and variants, the rehearsal, L7.2's comparison, the grader) derives from it.

Nothing here trains: ``recorder`` stands in for ``labs.l71.cli.run_lab`` and writes the run folder a run would
start with (``write_run_json`` with the profile and reward functions the command line resolved), then marks it
finished, so what each command *would train* is read back from run.json as the real run records it.
"""

from __future__ import annotations

import re

import pytest

from labs.core import runfolder as rf
from labs.core.profiles import get_profile
from labs.l71 import recipe_identity, settings, student_rewards
from rewards import REWARD_NAMES, reward_functions

LENIENT = 0.3


def correctness_reward(completions, answer, **kwargs):
    return [2.0 if re.search(rf"<answer>\s*{re.escape(str(g))}\s*</answer>", c[0]["content"]) else 0.0
            for c, g in zip(completions, answer)]


def format_reward(completions, **kwargs):
    return [LENIENT for _ in completions]


def soft_format_reward(completions, **kwargs):
    return [0.1 * ("<answer>" in c[0]["content"]) for c in completions]


STUDENT = [correctness_reward, format_reward, soft_format_reward]


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    return tmp_path


def save_recipe(profile, **knobs):
    """What the L7.1 notebook saves: its GRPOConfig knobs (``knobs`` changed from the profile) and section 1."""
    from types import SimpleNamespace

    values = {**{k: getattr(profile, k) for k in settings.LESSON_KNOBS}, **knobs}
    settings.save(SimpleNamespace(**values), profile, echo=lambda _: None)
    student_rewards.save(STUDENT, echo=lambda _: None)
    return recipe_identity.saved(profile)


@pytest.fixture
def recorder(runs, monkeypatch):
    """``labs.l71.cli.run_lab`` that records what it would train in run.json (and marks the run finished)."""
    from labs.l71 import cli
    from labs.l71 import lab as lab_module

    calls = []

    def run_lab(profile=None, run_name=None, fresh=False, reward_names=None, lab="L7.1", accept_changes=False,
                settings_from=None, variant_from=None, *, reward_funcs=None, **overrides):
        p = profile.replace(**overrides) if overrides else profile
        funcs = list(reward_funcs) if reward_funcs is not None else reward_functions(reward_names)
        run = lab_module.new_run(p, run_name, fresh, lab)
        lab_module.write_run_json(run, p, lab, funcs, "modelo", {"settings_from": settings_from})
        run.write_status(rf.STATE_FINISHED, p.max_steps, p.max_steps)
        calls.append(run.root.name)
        return run.root

    monkeypatch.setattr(cli, "run_lab", run_lab)
    return calls


def test_every_run_json_records_the_recipe_it_trained(runs, recorder):
    from labs.l71 import main

    profile = get_profile("ci")
    saved = save_recipe(profile, learning_rate=2e-5, beta=0.1)
    assert main(["--profile", "ci"]) == 0
    record = rf.read_json(runs / "l71-ci" / rf.RUN_JSON)
    recipe = record["recipe"]
    assert recipe == saved and re.fullmatch(r"[0-9a-f]{12}", recipe["id"])
    assert recipe["settings"]["learning_rate"] == 2e-5 and recipe["settings"]["beta"] == 0.1
    sources = {s["name"]: s["source_sha256"] for s in record["reward_sources"]}
    assert recipe["rewards"] == sources and all(len(sha) == 64 for sha in sources.values())
    # the course's recipe is another identity; an older run.json without "recipe" is read the same way
    course = recipe_identity.of_run(profile, reward_functions())
    assert course["id"] != saved["id"] and set(course["rewards"]) == set(REWARD_NAMES)
    assert all(v is None for v in course["rewards"].values())
    del record["recipe"]
    assert recipe_identity.of_record(record) == saved
    lines = recipe_identity.differences_es(course, saved)
    assert any(line.startswith("learning_rate:") for line in lines) and any("format_reward" in line for line in lines)
