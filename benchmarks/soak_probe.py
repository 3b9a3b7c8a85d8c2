"""Where a lab's resident memory goes, step by step: run by ``benchmarks/bench_soak.py --probe`` in place of the lab.

    python benchmarks/soak_probe.py PROBE_JSONL l71 [python -m labs l71's options...]

Runs `python -m labs l71` in this process with one more trainer callback which, at the end of every step, appends
to PROBE_JSONL: resident memory; glibc's own account of its heap (``mallinfo2``: bytes in use, bytes free but kept,
bytes in mmapped blocks), which tells a leak (in use grows) from memory malloc keeps after it was freed (free grows);
the number of Python objects the garbage collector tracks, the commonest types among them, and the live torch tensors
with their bytes. ``COURSE_PROBE_TRACEMALLOC=1`` adds tracemalloc's largest growth since the first step (slow).
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import sys
import time


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def mallinfo2() -> dict:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _Mallinfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):
        return {}
    mib = 2**20
    return {"heap_mib": round(info.arena / mib, 1), "in_use_mib": round(info.uordblks / mib, 1),
            "free_kept_mib": round(info.fordblks / mib, 1), "mmapped_mib": round(info.hblkhd / mib, 1)}


def tensors() -> dict:
    import torch

    count, total = 0, 0
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.Tensor) and obj.device.type == "cpu":
                size = int(obj.untyped_storage().nbytes())  # a fake tensor's (torch.compile's) is symbolic
                count += 1
                total += size
        except Exception:  # noqa: BLE001 - objects that fail isinstance or storage: not tensors we can size
            continue
    return {"tensors": count, "tensor_storage_mib": round(total / 2**20, 1)}


def probe_callback(path: str):
    from transformers import TrainerCallback

    from labs.core import resources

    trace = os.environ.get("COURSE_PROBE_TRACEMALLOC") == "1"
    if trace:
        import tracemalloc

        tracemalloc.start(8)

    class Probe(TrainerCallback):
        first = None

        def on_step_end(self, args, state, control, **kwargs):
            gc.collect()
            objects = gc.get_objects()
            kinds = collections.Counter(type(o).__name__ for o in objects)
            row = {"step": state.global_step, "time": time.time(), "rss_gib": resources.step_memory()[resources.RSS_KEY],
                   **mallinfo2(), "gc_objects": len(objects), "top_types": kinds.most_common(12), **tensors()}
            del objects
            if trace:
                snapshot = tracemalloc.take_snapshot()
                if Probe.first is None:
                    Probe.first = snapshot
                else:
                    row["tracemalloc_growth"] = [str(s) for s in snapshot.compare_to(Probe.first, "traceback")[:8]]
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")

    return Probe()


def main() -> None:
    path, lab_args = sys.argv[1], sys.argv[2:]
    from labs.training import recipe

    original = recipe.run_folder_callbacks
    recipe.run_folder_callbacks = lambda run: original(run) + [probe_callback(path)]
    from labs.__main__ import main as labs_main

    sys.exit(labs_main(lab_args))


if __name__ == "__main__":
    main()
