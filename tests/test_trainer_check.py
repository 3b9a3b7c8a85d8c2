"""labs.l6.trainer_check: one real GRPOTrainer step; its advantages must equal labs.l6.advantage.

The tests marked ``trains`` are the only check of TRL's own advantages (group and batch scaling) against
the lesson's formula.

The L6 capstone (``labs.l6.capstone``) reuses the same step (one trainer build for the module): on its real batch
the reference pieces and the notebook's own solutions match ``GRPOTrainer.compute_loss`` and the gradient of one
parameter in every configuration, within the stated tolerances; a loss with one piece wrong does not; and the
comparison leaves the trainer as it found it.
"""

import json

import numpy as np
import pytest
import torch

from labs import assign
from labs.l6 import capstone

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
    # the capstone compares with the lesson's KL term: TRL 1.16's default ratio-weighted k3 is off where it exists
    assert getattr(config, "use_bias_correction_kl", False) is False


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


# ---------------------------------------------------------------- the capstone, on the same step

SOURCE = assign.SOURCES_DIR / "L6_de_policy_gradient_a_grpo.ipynb"


def notebook_solutions() -> dict:
    """The L6 source notebook's answer cells (solutions in place), run into one namespace."""
    namespace: dict = {}
    exec("import numpy as np\nimport torch\n", namespace)
    inside = False
    for cell in json.loads(SOURCE.read_text())["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "raw":
            inside = text.startswith("# BEGIN SOLUTION") or (inside and not text.startswith("# END SOLUTION"))
        elif inside and cell["cell_type"] == "code":
            exec(text, namespace)
    return namespace


def test_reference_token_logps_shift_and_mask():
    logits = torch.randn(2, 6, 5, dtype=torch.float64)
    ids = torch.randint(0, 5, (2, 6))
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    out = capstone.token_logps(logits, ids, mask)
    full = torch.log_softmax(logits, dim=-1)
    assert out[0, 0] == full[0, 2, ids[0, 3]] and out[1, 0] == full[1, 2, ids[1, 3]]  # position t predicts t + 1
    assert torch.all(out[1, 1:] == 0)


@pytest.mark.trains
def test_the_reference_pieces_match_trl(report):
    rows = capstone.compare_with_trl(report, capstone.token_logps, capstone.reference_loss)
    assert [(r["beta"], r["loss_type"]) for r in rows] == list(capstone.CONFIGS)
    assert all(capstone.matches(r) for r in rows), capstone.format_comparison(rows)
    # the batch makes every piece count: losses differ between configurations, clipping and KL both act
    assert len({round(r["trl_loss"], 6) for r in rows}) == len(rows)
    assert 0.1 < rows[0]["clipped_fraction"] < 0.9
    assert len(set(rows[0]["lengths"])) > 1
    text = capstone.format_comparison(rows)
    assert "tu pérdida = la de TRL: diferencia máxima" in text and "NO coincide" not in text


@pytest.mark.trains
def test_the_notebook_solutions_match_trl(report):
    ns = notebook_solutions()
    rows = capstone.compare_with_trl(report, ns["logp_por_token"], ns["perdida_trl"],
                                     configs=capstone.CONFIGS + ((0.04, "dr_grpo"),))
    assert all(capstone.matches(r) for r in rows), capstone.format_comparison(rows)


def _without_kl(logp, old, ref, adv, mask, beta, loss_type, eps, max_len):
    return capstone.reference_loss(logp, old, ref, adv, mask, 0.0, loss_type, eps, max_len)


def _always_dapo(logp, old, ref, adv, mask, beta, loss_type, eps, max_len):
    return capstone.reference_loss(logp, old, ref, adv, mask, beta, "dapo", eps, max_len)


def _no_clip(logp, old, ref, adv, mask, beta, loss_type, eps, max_len):
    return capstone.reference_loss(logp, old, ref, adv, mask, beta, loss_type, 100.0, max_len)


def _unshifted(logits, ids, mask):
    width = mask.shape[1]
    return torch.log_softmax(logits[:, -width:], -1).gather(-1, ids[:, -width:, None]).squeeze(-1) * mask


@pytest.mark.trains
@pytest.mark.parametrize("token_logps,loss,failing", [
    (capstone.token_logps, _without_kl, {(0.04, "grpo"), (0.04, "dapo")}),
    (capstone.token_logps, _always_dapo, {(0.0, "grpo"), (0.04, "grpo")}),
    (capstone.token_logps, _no_clip, set(capstone.CONFIGS)),
    (_unshifted, capstone.reference_loss, set(capstone.CONFIGS)),
], ids=["no KL", "always dapo", "no clipping", "unshifted log-probabilities"])
def test_a_wrong_piece_misses_trl(report, token_logps, loss, failing):
    rows = capstone.compare_with_trl(report, token_logps, loss)
    missed = {(r["beta"], r["loss_type"]) for r in rows if not capstone.matches(r)}
    assert missed == failing, capstone.format_comparison(rows)
    for r in rows:
        if (r["beta"], r["loss_type"]) in failing:  # by far more than the tolerance, in the loss or the gradient
            assert r["loss_diff"] > 100 * capstone.LOSS_ATOL or r["grad_diff"] > 100 * capstone.GRAD_RTOL


@pytest.mark.trains
def test_the_comparison_leaves_the_trainer_as_it_was(report):
    trainer = report["trainer"]
    before = trainer.beta, trainer.loss_type, torch.get_num_threads()
    grads = {n: p.requires_grad for n, p in trainer.model.named_parameters()}
    capstone.compare_with_trl(report, capstone.token_logps, capstone.reference_loss, configs=((0.04, "dapo"),))
    assert (trainer.beta, trainer.loss_type, torch.get_num_threads()) == before
    assert grads == {n: p.requires_grad for n, p in trainer.model.named_parameters()}
    assert all(p.grad is None for p in trainer.model.parameters())
