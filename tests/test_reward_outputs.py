"""The reward-output table (labs.training.reward_outputs.REWARD_OUTPUTS), row by row, against TRL 1.16.

For every row: pre-flight accepts or refuses it as the table says, and TRL's own
``GRPOTrainer._calculate_rewards`` (called unbound on the few attributes it reads) turns it into a
reward column or raises, as the table says. So pre-flight refuses what TRL would crash on and nothing
TRL accepts (the one deliberate exception, an infinite reward, is a row of its own). Pre-flight's probe
also passes what TRL passes: a real ``TrainerState`` a schedule can read.
"""

from types import SimpleNamespace

import pytest
import torch

from labs.core.profiles import get_profile
from labs.training import preflight
from labs.training.reward_outputs import N, REWARD_OUTPUTS, reward_output_problem

ROWS = [pytest.param(make, trl_ok, ours, id=label) for label, make, trl_ok, ours in REWARD_OUTPUTS]
COLUMNS = ("prompt", "answer", "id")


def trl_calculate_rewards(output):
    """TRL 1.16's ``_calculate_rewards`` on one synchronous function returning ``output``."""
    from transformers import TrainerState
    from trl import GRPOTrainer

    def reward(**kwargs):
        return output

    trainer = SimpleNamespace(
        accelerator=SimpleNamespace(device=torch.device("cpu"), is_main_process=True),
        args=SimpleNamespace(report_to=[]), state=TrainerState(), environments=None,
        reward_funcs=[reward], reward_processing_classes=[None], reward_func_names=["reward"],
        _log_completion_extra=lambda column, values: None, _log_metric=lambda name, value: None,
    )
    inputs = [{"prompt": "p", "answer": "72"}] * N
    return GRPOTrainer._calculate_rewards(trainer, inputs, ["p"] * N, ["c"] * N, [[1]] * N)


@pytest.mark.parametrize("make,trl_ok,ours", ROWS)
def test_trl_converts_exactly_the_rows_marked_so(make, trl_ok, ours):
    if trl_ok:
        rewards = trl_calculate_rewards(make())
        assert rewards.shape == (N, 1)
    else:
        with pytest.raises((TypeError, ValueError, RuntimeError)):
            trl_calculate_rewards(make())


@pytest.mark.parametrize("make,trl_ok,ours", ROWS)
def test_preflight_accepts_exactly_the_rows_marked_so(make, trl_ok, ours):
    problem = reward_output_problem("mi_recompensa", make(), N)
    assert (problem is None) == ours, problem
    if problem is not None:
        assert problem.startswith("La función de recompensa mi_recompensa devolvió")


def test_every_refusal_beyond_trl_is_the_infinite_reward():
    beyond = [label for label, _, trl_ok, ours in REWARD_OUTPUTS if trl_ok and not ours]
    assert beyond == ["lista con infinito"]
    assert all(trl_ok for _, _, trl_ok, ours in REWARD_OUTPUTS if ours)


def test_the_probe_passes_a_trainer_state_a_schedule_can_read():
    seen = {}

    def schedule(completions, trainer_state, log_metric, log_extra, **kwargs):
        seen["state"] = trainer_state
        weight = min(1.0, (trainer_state.global_step + 1) / trainer_state.max_steps)
        log_metric("peso", weight)
        log_extra("peso", [weight] * len(completions))
        return [weight] * len(completions)

    assert preflight.check_reward_calls([schedule], COLUMNS, get_profile("ci")) == []
    assert seen["state"].global_step == 0 and seen["state"].max_steps == get_profile("ci").max_steps


def test_the_probes_trainer_state_has_every_field_of_transformers_own():
    """The probe's state is built without transformers (L7.2 imports unsloth first) but is what TRL passes:
    every field of the installed ``TrainerState``, with the same value at the first step of a profile."""
    import dataclasses

    from transformers import TrainerState

    profile = get_profile("ci")
    probe = preflight.trainer_state(profile)
    real = TrainerState(max_steps=profile.max_steps, logging_steps=profile.logging_steps, save_steps=profile.save_steps)
    assert {f.name: getattr(probe, f.name) for f in dataclasses.fields(TrainerState)} == vars(real)


def test_a_numpy_reward_passes_preflight():
    import numpy as np

    def vectorised(completions, **kwargs):
        return np.array([len(c[0]["content"]) / 100 for c in completions])

    assert preflight.check_reward_calls([vectorised], COLUMNS) == []


def test_an_async_reward_is_awaited_and_checked():
    async def asincrona(completions, **kwargs):
        return [0.0]  # one value for four completions

    (problem,) = preflight.check_reward_calls([asincrona], COLUMNS)
    assert "asincrona devolvió 1 valor para 4" in problem
