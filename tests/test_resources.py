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
