"""L7.2 trains the student's recipe (issue 51, item 2): the saved reward functions and every lesson knob; what
Unsloth's route changes follows ``labs.l72.recipe_rule`` and is recorded in run.json. Nothing here trains."""

from __future__ import annotations

import pytest
from test_recipe_identity import STUDENT, save_recipe

from labs.core import profile_choice
from labs.core.profiles import get_profile
from labs.l71 import recipe_identity
from labs.l72 import recipe_rule


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    return tmp_path


@pytest.mark.cpu_stack  # L7.2's start checks the machine for the ci profile: the GPU stack's vLLM refuses it
def test_l72s_start_trains_the_saved_functions_and_knobs(runs):
    from labs.l72.steps import start

    saved = save_recipe(get_profile("ci"), learning_rate=3e-6, beta=0.1, loss_type="dr_grpo", temperature=0.8)
    begun = start("ci", "l72-ci")
    assert [f.__name__ for f in begun.reward_funcs] == [f.__name__ for f in STUDENT]
    assert recipe_identity.reward_hashes(begun.reward_funcs) == saved["rewards"]
    p = begun.profile
    assert (p.loss_type, p.temperature, p.beta, p.backend) == ("dr_grpo", 0.8, 0.1, "unsloth")
    assert not p.use_lora  # the format pass stays the recipe's (shared with L7.1's cache); GRPO's adapter is said:
    assert "LoRA" in recipe_rule.record(p, begun.reward_funcs)["changes"]["lora"]["l72"]
    assert p.learning_rate == 3e-5  # all the weights in the recipe: LoRA at LORA_LR_FACTOR (10) times its rate
    assert recipe_rule.plan(get_profile("ci")).profile.learning_rate == 3e-5
    save_recipe(get_profile("ci"), learning_rate=2e-5)  # 10x would leave the lesson's LoRA band: its top
    assert recipe_rule.plan(get_profile("ci")).profile.learning_rate == 5e-5


def test_on_the_base_route_l72_runs_the_instruct_model_with_the_students_knobs(runs, monkeypatch):
    base = get_profile("rtx5090-base")
    profile_choice.save_choice(base.name)
    save_recipe(base, learning_rate=8e-6, beta=0.08, loss_type="dr_grpo", temperature=0.8)
    for asked in (base, get_profile("rtx5090")):  # --profile rtx5090-base, or the route's rtx5090 (route.l72_profile)
        planned = recipe_rule.plan(asked)
        p = planned.profile
        assert p.name == "rtx5090" and p.model == get_profile("rtx5090").model and not p.format_pass
        assert (p.learning_rate, p.beta, p.loss_type, p.temperature) == (8e-6, 0.08, "dr_grpo", 0.8)
        record = recipe_rule.record(p, planned.reward_funcs, planned.recipe_profile)
        assert record["recipe"] == recipe_identity.saved(base)
        assert {"model", "format_pass", "lora_r", "lora_alpha"} <= set(record["changes"])
        assert not set(record["changes"]) & {"learning_rate", "beta", "loss_type", "temperature"}
        # Unsloth turns dr_grpo's group scaling off whatever is passed: recorded as the engine's change
        assert record["changes"]["scale_rewards"]["l72"] == "none"
        assert all("regla de L7.2" in c["por_que"] or "Unsloth" in c["por_que"] for c in record["changes"].values())


def test_a_set_on_l72s_command_line_wins_and_is_said_as_not_the_rules(runs):
    save_recipe(get_profile("ci"), learning_rate=2e-5)
    planned = recipe_rule.plan(get_profile("ci"), {"learning_rate": 3e-5})
    record = recipe_rule.record(planned.profile, planned.reward_funcs, planned.recipe_profile)
    assert planned.profile.learning_rate == 3e-5 and "--set" in record["changes"]["learning_rate"]["por_que"]
