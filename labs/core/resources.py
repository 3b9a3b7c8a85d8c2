"""The memory a run actually used, recorded in ``<run>/resources.json`` (documented in labs.core.runfolder).

Both labs record it (L7.1 in ``labs.l71.Lab``, L7.2 in ``labs.l72``), so L7.2's side-by-side
comparison reads the memory of each run from its own folder. On a CPU that is the process's peak resident
memory (vLLM's CPU engine lives in the process); on a GPU also the device memory in use, sampled
device-wide because vLLM's KV cache and Unsloth's Standby allocator live outside torch's counters.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import subprocess
import threading
from pathlib import Path

from labs.core.runfolder import RESOURCES_JSON, RunFolder, read_json, write_json

# glibc's malloc hands a large freed block back to the kernel (munmap, or trimming the heap's top) and
# asks for it again on the next allocation, so every decoding step and every micro-batch paid for
# page faults: 140,000 a second and half the CPU time in the kernel during a warm `make` on 2 cores
# (benchmarks/bench_footprint.py). The largest threshold glibc accepts (32 MiB on 64-bit) keeps the
# blocks of a step in the heap, and a high trim threshold keeps the heap's top for the next step.
# Each of glibc's arenas (up to 8 per core, one taken by each thread that meets a busy one; a CPU run has about 50
# threads between torch, oneDNN and vLLM) keeps its own freed blocks under that threshold; two arenas bound what
# stays resident unused. In one cpu run (benchmarks/bench_footprint.py) resident memory grew less from step to step
# than before, while the peak stayed within run-to-run noise.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 1 << 30
ARENA_MAX = 2


@functools.cache
def _glibc():
    """glibc's C library, loaded once (``platform.libc_ver`` reads the interpreter's binary); None elsewhere."""
    import ctypes
    import ctypes.util
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def keep_freed_memory() -> bool:
    """Tune glibc's malloc for a training loop (see above); False where it is not glibc."""
    libc = _glibc()
    if libc is None:
        return False
    try:
        return all(bool(libc.mallopt(option, value)) for option, value in (
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
            (_M_ARENA_MAX, ARENA_MAX)))
    except AttributeError:
        return False


def release_freed_memory() -> bool:
    """Hand the whole free pages malloc keeps back to the kernel (glibc's ``malloc_trim(0)``); False where not glibc.

    ``keep_freed_memory`` keeps freed blocks for the next micro-batch, which is what makes a step fast; but the
    holes a step leaves between live blocks add up from step to step. In one ci run (benchmarks/soak_probe.py,
    one thread) glibc's heap kept 0.48 GiB free after step 1 and 1.45 GiB by step 14, while the memory in use grew
    0.23 GiB: most of the resident growth was freed memory kept. Called once a step (labs.training.recipe), after
    the step's memory is recorded, so the holes' pages do not stay resident from step to step: after it, 60 ci
    steps kept a flat resident memory (-0.56 MiB a step after the warm-up, docs/benchmarks/soak.md).
    """
    libc = _glibc()
    if libc is None:
        return False
    try:
        return libc.malloc_trim(0) in (0, 1)
    except AttributeError:
        return False


def gib(n_bytes: float) -> float:
    return round(n_bytes / 2**30, 3)


def peak_rss_gib() -> float:
    """This process's peak resident memory over its whole life (``ru_maxrss`` is in KiB on Linux)."""
    return gib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


def nvidia_smi_used_gib() -> float | None:
    """Memory in use on GPU 0, asked of nvidia-smi (no CUDA context in this process)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=10)
        return round(float(out.stdout.strip().splitlines()[0]) / 1024, 3)
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def torch_device_used_gib() -> float | None:
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            free, total = torch.cuda.mem_get_info()
            return gib(total - free)
    except Exception:  # noqa: BLE001 - a sample is a nicety; never break a run for it
        pass
    return None


# The keys each logged step gets in metrics.jsonl (labs.training.recipe's RunFolderCallback): the process's resident
# memory now, and on a GPU what torch's caching allocator holds for tensors and has reserved from the driver. A
# run that keeps something per step (completions, logs, freed blocks malloc keeps) shows as a slope in these.
RSS_KEY = "course/rss_gib"
CUDA_ALLOCATED_KEY = "course/cuda_allocated_gib"
CUDA_RESERVED_KEY = "course/cuda_reserved_gib"
STEP_MEMORY_KEYS = (RSS_KEY, CUDA_ALLOCATED_KEY, CUDA_RESERVED_KEY)


def rss_bytes() -> int:
    """This process's resident memory now (``/proc/self/statm``'s second field, in pages)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import psutil

        return psutil.Process().memory_info().rss


def step_memory() -> dict:
    """The memory fields of one logged step: resident memory, and CUDA allocated and reserved where a GPU is in use.

    CUDA is read only once this process has initialised it: asking earlier would create a context (hundreds of MiB)
    just to report nothing.
    """
    record = {RSS_KEY: gib(rss_bytes())}
    try:
        import torch

        if torch.cuda.is_available() and torch.cuda.is_initialized():
            record[CUDA_ALLOCATED_KEY] = gib(torch.cuda.memory_allocated())
            record[CUDA_RESERVED_KEY] = gib(torch.cuda.memory_reserved())
    except Exception:  # noqa: BLE001 - a sample is a nicety; never break a run for it
        pass
    return record


def slope_mib_per_step(steps, gib_values, warmup_steps: int = 0) -> float | None:
    """Least-squares slope of a memory series in MiB per step, over the steps after ``warmup_steps`` (None: < 3 points).

    The first steps fill caches that stay (vLLM's and oneDNN's buffers, malloc's arenas): growth that stops is
    not a leak, so it is left out; what is still rising after it is.
    """
    import numpy as np

    x = np.asarray(steps, dtype=float)
    y = np.asarray(gib_values, dtype=float) * 1024
    keep = (x > warmup_steps) & np.isfinite(y)
    if keep.sum() < 3:
        return None
    return round(float(np.polyfit(x[keep], y[keep], 1)[0]), 3)


class ResourceMonitor:
    """Sample resident memory (and GPU memory in use) in a background thread while a run goes on.

    The GPU is sampled device-wide (what ``nvidia-smi`` shows): vLLM's Standby allocator and the KV cache
    live outside torch's own counters. The peak during generation would be missed by sampling only at
    step boundaries, hence the thread. ``gpu="torch"`` reads the GPU through this process's CUDA context,
    ``gpu="nvidia-smi"`` through the tool (for a run in a child process), ``gpu=None`` not at all.
    """

    def __init__(self, gpu: str | None = None, interval_s: float = 0.5, pid: int | None = None):
        self.gpu, self.interval_s, self.pid = gpu, interval_s, pid
        self.rss_peak = 0.0
        self.gpu_baseline: float | None = None
        self.gpu_peak: float | None = None
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _gpu_used(self) -> float | None:
        if self.gpu == "torch":
            return torch_device_used_gib()
        if self.gpu == "nvidia-smi":
            return nvidia_smi_used_gib()
        return None

    def sample(self) -> None:
        import psutil

        try:
            rss = psutil.Process(self.pid).memory_info().rss if self.pid else psutil.Process().memory_info().rss
            self.rss_peak = max(self.rss_peak, gib(rss))
        except psutil.Error:
            pass
        used = self._gpu_used()
        if used is not None:
            if self.gpu_baseline is None:
                self.gpu_baseline = used
            self.gpu_peak = used if self.gpu_peak is None else max(self.gpu_peak, used)
        self.samples += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> "ResourceMonitor":
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="course-resource-monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict:
        """Stop sampling (idempotent) and return the summary."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.summary()

    def __enter__(self) -> "ResourceMonitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self._stop.set()  # a failed run must not leave the sampling thread behind

    def summary(self) -> dict:
        gpu = None
        if self.gpu_peak is not None:
            gpu = {"device_used_peak_gib": self.gpu_peak, "device_used_before_gib": self.gpu_baseline,
                   "device_used_by_run_gib": round(self.gpu_peak - (self.gpu_baseline or 0.0), 3)}
            if self.gpu == "torch":
                import torch

                gpu.update(torch_max_allocated_gib=gib(torch.cuda.max_memory_allocated()),
                           torch_max_reserved_gib=gib(torch.cuda.max_memory_reserved()),
                           total_gib=gib(torch.cuda.mem_get_info()[1]))
        return {"sampled_rss_peak_gib": self.rss_peak, "gpu": gpu, "samples": self.samples,
                "interval_s": self.interval_s}


def write_resources(run_root: str | os.PathLike, record: dict) -> Path:
    return write_json(Path(run_root) / RESOURCES_JSON, record)


def read_resources(run_root: str | os.PathLike) -> dict | None:
    try:
        return read_json(Path(run_root) / RESOURCES_JSON)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def record(run: RunFolder, monitor: "ResourceMonitor | None", lab: str, **extra) -> dict:
    """Stop ``monitor`` and write ``resources.json``: peak resident memory, GPU samples, ``extra`` fields."""
    sampled = monitor.stop() if monitor is not None else {}
    interval = monitor.interval_s if monitor is not None else None
    data = {"lab": lab, **extra, "peak_rss_gib": peak_rss_gib(),
            "measured_by": f"este proceso (ru_maxrss y un hilo que muestrea cada {interval} s)", **sampled}
    write_resources(run.root, data)
    return data
