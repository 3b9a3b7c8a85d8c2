"""A pytest plugin for benchmarks/suite_timeline.py: one JSON line per test, with its worker, start and end.

Loaded with ``-p timeline_plugin`` (benchmarks/ on PYTHONPATH); it writes only when ``COURSE_TIMELINE`` names a file.
Every xdist worker appends to the same file, one short write per test.
"""

from __future__ import annotations

import json
import os
import time

import pytest

TIMELINE_ENV = "COURSE_TIMELINE"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.time()
    yield
    path = os.environ.get(TIMELINE_ENV)
    if path:
        line = {"id": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"), "start": start,
                "end": time.time()}
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
