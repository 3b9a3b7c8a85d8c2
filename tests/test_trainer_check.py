"""labs.l6.trainer_check: one real GRPOTrainer step; its advantages must equal labs.l6.advantage.

The tests marked ``trains`` are the only check of TRL's own advantages (group and batch scaling) against
the lesson's formula.
"""

import numpy as np
import pytest

from labs.l6.advantage import group_advantages
from labs.l6.trainer_check import (
    DEFAULT_PATTERNS,
    TOLERANCE,
    format_numbers,
    format_report,
    grpo_config_kwargs,
    pattern_rewards,
    run_trainer_check,
)


def test_pattern_rewards_follow_position_in_group():
    fmt, ok = pattern_rewards(DEFAULT_PATTERNS, 4)
    completions = ["x"] * 12  # three groups: the patterns cycle
    assert fmt(completions, prompts=None) == [1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 1]
    assert ok(completions) == [2, 0, 0, 2, 0, 0, 2, 0, 2, 0, 0, 2]
    totals = np.add(fmt(completions[:4]), ok(completions[:4]))
    assert totals.tolist() == [3, 1, 0, 3]  # the lesson's group
    with pytest.raises(ValueError):
        pattern_rewards(DEFAULT_PATTERNS, 3)


def test_config_kwargs_are_accepted_by_grpo_config(tmp_path):
    from trl import GRPOConfig

    config = GRPOConfig(**grpo_config_kwargs(str(tmp_path), 4, 2, "group"))
    assert config.per_device_train_batch_size == 8 and config.num_generations == 4
    assert config.generation_batch_size % config.num_generations == 0
    assert config.log_completions and not config.use_vllm and config.beta == 0.0


def test_format_numbers_rounds_and_leaves_out_text_and_time():
    rewards = [3.0, 1.0, 0.0, 3.0]
    ours = group_advantages(rewards, 4)
    rows = [{"group": 0, "position": i, "completion": "texto", "reward": r, "trl_advantage": float(a) + 3e-8,
             "labs_advantage": float(a), "diff": 3e-8} for i, (r, a) in enumerate(zip(rewards, ours))]
    report = {"rows": rows, "max_diff": 3e-8, "tolerance": TOLERANCE, "max_diff_population": 0.15470,
              "max_diff_no_eps": 5.5e-5, "seconds": 12.3}
    text = format_numbers(report)
    assert "+0.8333" in text and "-1.1666" in text and "texto" not in text and "12.3" not in text
    assert "coincide" in text and "NO coincide" not in text and "0.1547" in text and "5.5e-05" in text
    assert "NO coincide" in format_numbers({**report, "max_diff": 1e-3})


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return run_trainer_check(output_dir=str(tmp_path_factory.mktemp("check")))


@pytest.mark.trains
def test_trainer_advantages_equal_labs_advantage(report):
    assert report["max_diff"] < TOLERANCE, format_report(report)
    assert len(report["rows"]) == 4 * len(DEFAULT_PATTERNS)
    assert report["groups_consistent"]
    assert "advantage" in report["columns"] and {"format_reward", "correctness_reward"} <= set(report["columns"])


@pytest.mark.trains
def test_the_check_can_tell_the_rules_apart(report):
    # Negative controls: the population std and a missing 1e-4 both miss by far more than the tolerance.
    assert report["max_diff_population"] > 1e-2
    assert report["max_diff_no_eps"] > 10 * TOLERANCE


@pytest.mark.trains
def test_trainer_saw_the_rewards_we_defined(report):
    rewards = [row["reward"] for row in report["rows"]]
    fmt, ok = pattern_rewards(DEFAULT_PATTERNS, 4)
    n = len(rewards)
    assert rewards == list(np.add(fmt(["x"] * n), ok(["x"] * n)))
    assert report["logged"]["reward"] == pytest.approx(np.mean(rewards), abs=1e-6)
    assert report["logged"]["frac_reward_zero_std"] == 0.0
    ours = group_advantages(rewards, 4)
    assert [row["labs_advantage"] for row in report["rows"]] == ours.tolist()
    assert "coincide" in format_report(report)
    assert "NO coincide" not in format_numbers(report)
    logged = report["logged"]
    assert logged["completions/min_length"] <= logged["completions/max_length"] <= 16
    if logged["completions/min_length"] == logged["completions/max_length"]:
        # ratio 1, beta 0, advantages summing to 0 per group and equal lengths: the 'dapo' loss is 0
        assert logged["loss"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.trains
def test_batch_scaling_also_matches(tmp_path):
    batch = run_trainer_check(output_dir=str(tmp_path), scale_rewards="batch")
    assert batch["max_diff"] < TOLERANCE, format_report(batch)
    # and it is not the group rule: the two differ on these rewards
    rewards = [row["reward"] for row in batch["rows"]]
    assert np.max(np.abs(group_advantages(rewards, 4) - group_advantages(rewards, 4, scale_rewards="batch"))) > 1e-2


@pytest.mark.trains
def test_thread_count_is_restored(report):
    import torch

    # the module fixture already ran one check; the process must be left as it was
    assert torch.get_num_threads() == report["threads_before"]
