"""Where a step's time goes and a limit on a hung reward call (labs.training.phases, console's slow note)."""

import asyncio
import re
import time

import pytest

from labs.core.profiles import get_profile
from labs.training import console, phases
from labs.training.failures import classify_failure


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_sleeping_reward_is_stopped_at_its_limit_naming_it():
    def dormilona(completions, **kwargs):
        time.sleep(30)

    times = phases.PhaseTimes()
    call = phases.bounded(dormilona, "dormilona", 0.5, times, step=lambda: 7)
    start = time.perf_counter()
    with pytest.raises(phases.RewardTimeout) as err:
        call(completions=["a"])
    assert time.perf_counter() - start < 5
    assert (err.value.function, err.value.limit, err.value.step) == ("dormilona", 0.5, 7)
    assert times.rewards["dormilona"] >= 0.5 and times.current is None


def test_a_runaway_regular_expression_is_stopped_too():
    def regex(completions, **kwargs):
        return [1.0 if re.match(r"(a+)+$", c) else 0.0 for c in completions]

    call = phases.bounded(regex, "regex", 1.0, phases.PhaseTimes())
    with pytest.raises(phases.RewardTimeout):
        call(completions=["a" * 40 + "b"])  # exponential backtracking: hours without the limit


def test_a_fast_reward_passes_through_and_its_time_is_counted():
    times = phases.PhaseTimes()
    call = phases.bounded(lambda completions, **kw: [0.5] * len(completions), "rapida", 5.0, times)
    assert call(completions=["x", "y"]) == [0.5, 0.5]
    assert "rapida" in times.rewards and times.rewards["rapida"] < 1.0


def test_an_async_reward_is_bounded_with_wait_for():
    async def lenta(completions, **kwargs):
        await asyncio.sleep(30)

    call = phases.bounded(lenta, "lenta", 0.3, phases.PhaseTimes())
    with pytest.raises(phases.RewardTimeout, match="lenta"):
        asyncio.run(call(completions=["a"]))


def test_the_timeout_is_classified_in_spanish_with_the_function_for_status_json():
    failure = classify_failure(phases.RewardTimeout("mi_regex", 5.0, 3), get_profile("ci"))
    assert failure.kind == "reward_timeout"
    assert failure.details == {"reward_function": "mi_regex", "reward_timeout_s": 5.0}
    assert "mi_regex tardó más de 5 s en una llamada en el paso 3" in failure.message_es
    assert "--accept-changes" in failure.message_es and "reward_timeout_s" in failure.message_es
    wrapped = RuntimeError("TRL wrapped it")
    wrapped.__cause__ = phases.RewardTimeout("otra", 2.0)
    assert classify_failure(wrapped, get_profile("ci")).details["reward_function"] == "otra"


def test_a_slow_step_line_names_the_slow_reward():
    times = phases.PhaseTimes()
    times.generation, times.rewards = 3.0, {"correctness_reward": 0.1, "mi_regex": 35.0}
    note = console.slow_note(40.0, [10.0, 11.0], times)
    assert note == " · paso lento (40 s, lo normal ~11 s): sobre todo las recompensas (mi_regex: 35 s)"
    times.generation, times.rewards = 2.0, {"mi_regex": 1.0}
    assert "sobre todo la actualización del modelo (37 s)" in console.slow_note(40.0, [10.0, 11.0], times)
    assert console.slow_note(25.0, [10.0, 11.0], times) == ""  # not far longer
    assert console.slow_note(40.0, [10.0], times) == ""  # one step measured is not a norm yet


def test_the_step_line_callback_appends_the_slow_note():
    from transformers import TrainerState

    clock, printed = Clock(), []
    times = phases.PhaseTimes(clock=clock)
    callback = console.step_line_callback(5, echo=printed.append, times=times, clock=clock)
    state = TrainerState()
    callback.on_train_begin(None, state, None)
    for step, seconds, gen in ((1, 10.0, 8.0), (2, 10.0, 8.0), (3, 60.0, 58.0)):
        times.reset()
        callback.on_step_begin(None, state, None)
        times.enter("generation")
        clock.now += gen
        times.leave("generation")
        clock.now += seconds - gen
        state.global_step = step
        callback.on_step_end(None, state, None)
        callback.on_log(None, state, None, logs={"reward": 1.0})
    assert "paso lento" not in printed[0] + printed[1]
    assert printed[2].endswith(" · paso lento (60 s, lo normal ~10 s): sobre todo la generación (58 s)")


def test_the_watch_says_what_a_long_running_step_is_stuck_in():
    clock = Clock()
    times = phases.PhaseTimes(clock=clock)
    watch = phases.SlowStepWatch(times, clock=clock)
    watch.step_ends(10.0)
    watch.step_ends(12.0)
    watch.step_begins(3, 500)
    clock.now = 20.0
    assert watch.check() is None
    times.enter("rewards", "mi_regex")
    clock.now = 45.0
    line = watch.check()
    assert line == ("[paso 3/500] lleva 45 s (los pasos anteriores, ~11 s): ahora está en las recompensas, "
                    "función mi_regex (desde hace 25 s).")
    assert watch.check() is None  # said once per step
