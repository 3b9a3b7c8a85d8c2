"""Where a training step spends its time (generation, each reward function, the update), and a limit
on a reward call that hangs.

``PhaseTimes`` accumulates, for the step in progress, the seconds in generation (``time_generation``
wraps the trainer's ``_generate``) and in each reward function (``time_rewards`` wraps
``trainer.reward_funcs``); the update is the rest of the step. It also knows which phase runs now, so
``SlowStepWatch`` can say, while a step is still running far longer than the steps measured so far,
what it is stuck in.

A reward call longer than the profile's ``reward_timeout_s`` raises ``RewardTimeout`` (naming the
function) from inside the call: a ``SIGALRM`` timer, whose Python handler runs even inside a runaway
regular expression (``re`` checks for signals while it matches). Only in the main thread, where
TRL calls synchronous reward functions; an ``async`` one is bounded with ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import signal
import statistics
import threading
import time

# A step "far longer" than usual: this many times the median of the steps measured so far.
SLOW_FACTOR = 3.0
PHASE_ES = {"generation": "la generación", "rewards": "las recompensas", "update": "la actualización del modelo"}


class RewardTimeout(RuntimeError):
    """A reward function ran past the profile's ``reward_timeout_s``."""

    def __init__(self, function: str, limit: float, step: int | None = None):
        self.function, self.limit, self.step = function, limit, step
        super().__init__(f"la función de recompensa {function} lleva más de {limit:g} s en una llamada")


class PhaseTimes:
    """Seconds per phase in the step in progress, and the phase running now."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.reset()
        self.current: tuple[str, str | None, float] | None = None  # (phase, reward name, since)

    def reset(self) -> None:
        self.generation = 0.0
        self.rewards: dict[str, float] = {}

    @property
    def rewards_total(self) -> float:
        return sum(self.rewards.values())

    def enter(self, phase: str, name: str | None = None) -> None:
        self.current = (phase, name, self.clock())

    def leave(self, phase: str, name: str | None = None) -> None:
        if self.current is None:
            return
        seconds = self.clock() - self.current[2]
        if phase == "generation":
            self.generation += seconds
        else:
            self.rewards[name] = self.rewards.get(name, 0.0) + seconds  # pyright: ignore[reportCallIssue] - a rewards phase always names its function
        self.current = None

    def slowest_es(self, step_seconds: float) -> str:
        """The phase that took most of a step, in Spanish, naming the reward function if it is one."""
        update = max(step_seconds - self.generation - self.rewards_total, 0.0)
        name, reward = max(self.rewards.items(), key=lambda kv: kv[1], default=(None, 0.0))
        phase, seconds = max((("generation", self.generation), ("rewards", reward), ("update", update)),
                             key=lambda kv: kv[1])
        if phase == "rewards":
            return f"{PHASE_ES['rewards']} ({name}: {seconds:.0f} s)"
        return f"{PHASE_ES[phase]} ({seconds:.0f} s)"

    def now_es(self) -> str:
        """The phase running now, in Spanish."""
        if self.current is None:
            return PHASE_ES["update"]
        phase, name, since = self.current
        what = f"{PHASE_ES['rewards']}, función {name}" if phase == "rewards" else PHASE_ES[phase]
        return f"{what} (desde hace {self.clock() - since:.0f} s)"


def slow_step(seconds: float, history: list[float]) -> bool:
    """True if ``seconds`` is far longer than the steps measured so far (at least two of them)."""
    return len(history) >= 2 and seconds > SLOW_FACTOR * statistics.median(history)


def time_generation(trainer, times: PhaseTimes) -> None:
    """Wrap the trainer's generation call (once per trainer)."""
    if getattr(trainer._generate, "_course_timed", False):
        return
    original = trainer._generate

    @functools.wraps(original)
    def timed(*args, **kwargs):
        times.enter("generation")
        try:
            return original(*args, **kwargs)
        finally:
            times.leave("generation")

    timed._course_timed = True  # pyright: ignore[reportAttributeAccessIssue] - a marker on the wrapper, read back with getattr
    trainer._generate = timed


def _alarm_available() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def bounded(func, name: str, limit: float, times: PhaseTimes, step=lambda: None):
    """``func`` timed into ``times`` and stopped with ``RewardTimeout`` after ``limit`` seconds."""
    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def async_call(*args, **kwargs):
            times.enter("rewards", name)
            try:
                return await asyncio.wait_for(func(*args, **kwargs), timeout=limit)
            except asyncio.TimeoutError:
                raise RewardTimeout(name, limit, step()) from None
            finally:
                times.leave("rewards", name)

        async_call._course_bounded = True  # pyright: ignore[reportAttributeAccessIssue] - a marker on the wrapper, read back with getattr
        return async_call

    @functools.wraps(func)
    def call(*args, **kwargs):
        times.enter("rewards", name)
        alarm = _alarm_available()
        previous = None
        if alarm:
            def on_alarm(signum, frame):
                raise RewardTimeout(name, limit, step())

            previous = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            return func(*args, **kwargs)
        finally:
            if alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            times.leave("rewards", name)

    call._course_bounded = True  # pyright: ignore[reportAttributeAccessIssue] - a marker on the wrapper, read back with getattr
    return call


def time_rewards(trainer, times: PhaseTimes, limit: float) -> None:
    """Wrap every reward function of ``trainer`` (a model used as reward is left as it is)."""
    names = getattr(trainer, "reward_func_names", None) or [getattr(f, "__name__", str(f)) for f in trainer.reward_funcs]
    for i, func in enumerate(trainer.reward_funcs):
        if not callable(func) or getattr(func, "_course_bounded", False) or hasattr(func, "parameters"):
            continue  # already wrapped, or an nn.Module reward model (TRL calls it differently)
        trainer.reward_funcs[i] = bounded(func, names[i], limit, times, lambda: trainer.state.global_step + 1)


class SlowStepWatch:
    """A thread that says, once per step, when the step in progress runs far longer than usual."""

    def __init__(self, times: PhaseTimes, echo=print, every: float = 5.0, clock=time.monotonic):
        self.times, self.echo, self.every, self.clock = times, echo, every, clock
        self.history: list[float] = []
        self.step_started: float | None = None
        self.step = 0
        self.max_steps = 0
        self.warned = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step_begins(self, step: int, max_steps: int) -> None:
        self.step, self.max_steps, self.step_started, self.warned = step, max_steps, self.clock(), False

    def step_ends(self, seconds: float) -> None:
        self.history.append(seconds)
        self.step_started = None

    def check(self) -> str | None:
        """The warning line for the step in progress, if it is slow and not yet said."""
        if self.step_started is None or self.warned:
            return None
        running = self.clock() - self.step_started
        if not slow_step(running, self.history):
            return None
        self.warned = True
        usual = statistics.median(self.history)
        return (f"[paso {self.step}/{self.max_steps}] lleva {running:.0f} s (los pasos anteriores, ~{usual:.0f} s): "
                f"ahora está en {self.times.now_es()}.")

    def start(self) -> "SlowStepWatch":
        def loop():
            while not self._stop.wait(self.every):
                line = self.check()
                if line:
                    self.echo(line)

        self._thread = threading.Thread(target=loop, name="course-slow-step-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
