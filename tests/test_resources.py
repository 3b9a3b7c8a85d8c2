"""resources.json: the memory a run used, as both labs record it (labs.core.resources)."""

import mmap

from labs.core import resources
from labs.core.runfolder import RESOURCES_JSON, RunFolder, read_json


def test_record_writes_peak_memory_and_the_samples(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.root.mkdir()
    monitor = resources.ResourceMonitor(interval_s=0.01).start()
    # 300 MiB of fresh anonymous pages, written (a heap allocation could reuse resident memory)
    block = mmap.mmap(-1, 300 * 2**20)
    block.write(b"x" * len(block))
    monitor.sample()
    record = resources.record(run, monitor, "L7.1", backend_used="trl")
    block.close()
    saved = read_json(run.path(RESOURCES_JSON))
    assert saved == record
    assert saved["lab"] == "L7.1" and saved["backend_used"] == "trl"
    assert saved["peak_rss_gib"] >= saved["sampled_rss_peak_gib"] >= 0.29
    assert saved["gpu"] is None and saved["samples"] >= 2
    assert not monitor._thread.is_alive()  # recording stops the sampling thread
    assert resources.read_resources(run.root) == saved


def test_missing_or_broken_file_reads_as_none(tmp_path):
    assert resources.read_resources(tmp_path) is None
    (tmp_path / RESOURCES_JSON).write_text("{not json")
    assert resources.read_resources(tmp_path) is None


def test_malloc_tuning_is_accepted_by_glibc():
    import platform

    if platform.libc_ver()[0] != "glibc":
        assert resources.keep_freed_memory() is False
    else:
        assert resources.keep_freed_memory() is True


def test_step_memory_reads_the_resident_memory_now_and_no_cuda_on_a_cpu():
    resources.step_memory()  # its first call imports torch
    before = resources.step_memory()
    block = mmap.mmap(-1, 300 * 2**20)
    for _ in range(300):  # one MiB at a time: no 300 MiB temporary beside the block
        block.write(b"x" * 2**20)
    after = resources.step_memory()
    block.close()
    assert 0.27 < after[resources.RSS_KEY] - before[resources.RSS_KEY] < 0.4  # the 300 MiB just written
    assert set(after) == {resources.RSS_KEY}  # torch never initialised CUDA here


def _fake_cuda(monkeypatch, allocated: int, reserved: int) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: allocated)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: reserved)


def test_each_logged_step_records_its_memory_and_on_a_gpu_cuda_allocated_and_reserved(tmp_path, monkeypatch):
    """The run folder's callback writes the step's memory into metrics.jsonl; torch.cuda's answers are faked (no GPU
    here), so the GPU branch runs through the same callback a training run uses."""
    from types import SimpleNamespace

    from labs.training import recipe

    run = RunFolder(tmp_path / "run")
    run.root.mkdir()
    callback = recipe.run_folder_callbacks(run)[0]
    args, control = SimpleNamespace(max_steps=2), SimpleNamespace()
    callback.on_log(args, SimpleNamespace(global_step=1, is_world_process_zero=True), control, logs={"loss": 0.5})
    _fake_cuda(monkeypatch, allocated=3 * 2**30, reserved=5 * 2**29)
    callback.on_log(args, SimpleNamespace(global_step=2, is_world_process_zero=True), control, logs={"loss": 0.4})
    cpu_step, gpu_step = run.metrics()
    assert 0.05 < cpu_step[resources.RSS_KEY] < 64 and resources.CUDA_ALLOCATED_KEY not in cpu_step
    assert gpu_step[resources.CUDA_ALLOCATED_KEY] == 3.0 and gpu_step[resources.CUDA_RESERVED_KEY] == 2.5
    assert gpu_step[resources.RSS_KEY] > 0.05


def test_the_memory_slope_leaves_the_warm_up_out():
    steps = list(range(1, 13))
    # 300 MiB over the first two steps (caches filling), then 2 MiB a step
    gib_values = [5.0, 5.3] + [5.3 + 2 * (s - 2) / 1024 for s in steps[2:]]
    assert resources.slope_mib_per_step(steps, gib_values, warmup_steps=2) == 2.0
    assert resources.slope_mib_per_step(steps, gib_values) > 10
    assert resources.slope_mib_per_step(steps[:4], gib_values[:4], warmup_steps=2) is None


def test_the_curves_show_the_memory_per_step(tmp_path, monkeypatch):
    from labs.grading import figures

    metrics = [{"step": s, "reward": 0.1 * s, "kl": 0.001, resources.RSS_KEY: 5.0 + 0.001 * s,
                resources.CUDA_ALLOCATED_KEY: 3.0, resources.CUDA_RESERVED_KEY: 4.0} for s in range(1, 9)]
    with_memory = figures.plot_curves(metrics, tmp_path / "with.png")
    without = figures.plot_curves([{k: v for k, v in m.items() if not k.startswith("course/")} for m in metrics],
                                  tmp_path / "without.png")
    from PIL import Image

    assert Image.open(with_memory).size[1] > Image.open(without).size[1]  # a third row, the memory panel
    drawn = []
    original = figures._draw_memory
    monkeypatch.setattr(figures, "_draw_memory", lambda ax, memory: (drawn.extend(memory), original(ax, memory)))
    figures.plot_curves(metrics, tmp_path / "again.png")
    assert [s.key for s, _, _ in drawn] == [resources.RSS_KEY, resources.CUDA_ALLOCATED_KEY, resources.CUDA_RESERVED_KEY]


def test_freed_heap_pages_go_back_to_the_kernel_when_released():
    """With the training loop's malloc settings (keep_freed_memory: a 1 GiB trim threshold) 300 freed MiB of heap
    blocks stay resident; release_freed_memory hands them back. This growth between steps is what a soak showed."""
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        assert resources.release_freed_memory() is False
        return
    assert resources.keep_freed_memory()
    libc = resources._glibc()
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(2**20) for _ in range(300)]  # under the 32 MiB mmap threshold: from the heap
    for block in blocks:
        ctypes.memset(block, 1, 2**20)
    held = resources.rss_bytes()
    for block in blocks:
        libc.free(block)
    kept = resources.rss_bytes()
    assert held - kept < 100 * 2**20  # freed, but kept resident for the next allocation
    assert resources.release_freed_memory() is True
    assert kept - resources.rss_bytes() > 250 * 2**20


def test_a_step_records_what_it_left_resident_before_the_freed_pages_go_back(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from labs.training import recipe

    calls = []
    monkeypatch.setattr(resources, "step_memory", lambda: calls.append("measure") or {resources.RSS_KEY: 5.5})
    monkeypatch.setattr(resources, "release_freed_memory", lambda: calls.append("release") or True)
    run = RunFolder(tmp_path / "run")
    run.root.mkdir()
    callback = recipe.run_folder_callbacks(run)[0]
    state = SimpleNamespace(global_step=1, is_world_process_zero=True)
    callback.on_step_end(SimpleNamespace(), state, SimpleNamespace())
    callback.on_log(SimpleNamespace(max_steps=2), state, SimpleNamespace(), logs={"loss": 0.5})
    assert calls == ["measure", "release"]
    assert run.metrics()[0][resources.RSS_KEY] == 5.5


def _nvidia_smi(tmp_path, monkeypatch, body: str):
    """An ``nvidia-smi`` on PATH that prints ``body`` for the memory query, as the driver's tool does (MiB)."""
    import fake_card

    fake_card.nvidia_smi_on_path(tmp_path / "driver", f"printf '{body}'", monkeypatch)


def test_a_run_without_torch_on_the_card_reads_its_memory_from_nvidia_smi(tmp_path, monkeypatch):
    """The rehearsal's parent process holds no CUDA context: it samples the card through nvidia-smi (MiB -> GiB), and
    a run's record gets the card's peak, what was in use before, and the difference; an answer it cannot read
    (no GPU listed, a driver message) is no sample, never a crash."""
    from labs.core.resources import ResourceMonitor, nvidia_smi_used_gib

    _nvidia_smi(tmp_path, monkeypatch, "2048\\n")
    assert nvidia_smi_used_gib() == 2.0
    monitor = ResourceMonitor(gpu="nvidia-smi")
    monitor.sample()
    _nvidia_smi(tmp_path, monkeypatch, "6144\\n")
    monitor.sample()
    gpu = monitor.stop()["gpu"]
    assert (gpu["device_used_before_gib"], gpu["device_used_peak_gib"], gpu["device_used_by_run_gib"]) == (2.0, 6.0, 4.0)
    for unreadable in ("", "No devices were found\\n"):
        _nvidia_smi(tmp_path, monkeypatch, unreadable)
        assert nvidia_smi_used_gib() is None


def test_sampling_a_process_that_has_ended_records_nothing_and_does_not_raise():
    import subprocess
    import sys

    from labs.core.resources import ResourceMonitor

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid names no process now
    monitor = ResourceMonitor(pid=gone.pid)
    monitor.sample()
    assert monitor.rss_peak == 0.0 and monitor.stop()["gpu"] is None


# --- where the C library or torch is not the usual one: a run records less, it never crashes --------------------


def test_without_glibc_malloc_is_left_alone(monkeypatch):
    """musl (Alpine) or macOS: no glibc to tune, and keep/release say so instead of calling into another libc."""
    import platform

    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("musl", "1.2"))
    resources._glibc.cache_clear()
    try:
        assert resources._glibc() is None
        assert resources.keep_freed_memory() is False and resources.release_freed_memory() is False
    finally:
        resources._glibc.cache_clear()


def test_a_glibc_that_cannot_be_loaded_is_no_glibc(monkeypatch):
    import ctypes

    def cannot_load(*args, **kwargs):
        raise OSError("libc.so.6: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", cannot_load)
    resources._glibc.cache_clear()
    try:
        assert resources._glibc() is None
    finally:
        resources._glibc.cache_clear()


def test_a_c_library_without_mallopt_or_malloc_trim_is_not_tuned(monkeypatch):
    """A libc that reports glibc but lacks the two calls (ctypes raises AttributeError on a missing symbol)."""
    from types import SimpleNamespace

    monkeypatch.setattr(resources, "_glibc", lambda: SimpleNamespace())
    assert resources.keep_freed_memory() is False and resources.release_freed_memory() is False


def test_resident_memory_without_proc_statm_comes_from_psutil(monkeypatch):
    """No /proc (macOS, a locked-down container): the same number, asked of psutil."""
    import psutil

    def no_proc(path, *args, **kwargs):
        raise FileNotFoundError(path)

    monkeypatch.setattr(resources, "open", no_proc, raising=False)  # the module's open, not builtins'
    rss = resources.rss_bytes()
    assert abs(rss - psutil.Process().memory_info().rss) < 64 * 2**20 and rss > 10 * 2**20


def test_a_torch_that_raises_while_sampling_leaves_only_the_resident_memory(monkeypatch):
    """A broken CUDA driver makes torch.cuda raise: the step keeps its resident memory and the sample is skipped."""
    import torch

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA driver initialization failed")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    assert resources.torch_device_used_gib() is None
    assert list(resources.step_memory()) == [resources.RSS_KEY]
