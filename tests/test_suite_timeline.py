"""benchmarks/suite_timeline.py: the plugin records each test on its worker, and the report sums the groups the
scheduler hands out whole (the L7.1 notebook chain is one group across its notebooks and the trap test)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
spec = importlib.util.spec_from_file_location("suite_timeline", BENCH / "suite_timeline.py")
suite_timeline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite_timeline)


def test_the_report_sums_scheduling_groups_and_worker_times():
    rows = [
        {"id": "sources/L7_1_grpo_trl_vllm.ipynb::Cell 3", "worker": "gw0", "start": 100.0, "end": 130.0},
        {"id": "tests/test_l71_trap.py::test_x", "worker": "gw0", "start": 130.0, "end": 150.0},
        {"id": "tests/test_models.py::test_a", "worker": "gw1", "start": 100.0, "end": 105.0},
        {"id": "tests/test_models.py::test_b", "worker": "gw1", "start": 105.0, "end": 112.0},
    ]
    lines = suite_timeline.report(rows, top=5)
    assert lines[0] == "worker gw0: 2 tests, busy 50 s, last test ended at 50 s"
    assert lines[1] == "worker gw1: 2 tests, busy 12 s, last test ended at 12 s"
    assert "all tests: 62 worker-seconds in 2 groups" in lines
    assert any(line.split() == ["50", "2", "gw0", "l71-notebook-chain"] for line in lines)
    assert any(line.split() == ["12", "2", "gw1", "tests/test_models.py"] for line in lines)


def test_the_plugin_writes_one_line_per_test(tmp_path):
    (tmp_path / "test_two.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    out = tmp_path / "timeline.jsonl"
    env = dict(os.environ, COURSE_TIMELINE=str(out), PYTHONPATH=str(BENCH))
    env.pop("PYTEST_XDIST_WORKER", None)  # this session's worker, if any: the child runs without workers
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "timeline_plugin", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"].split("::")[1] for r in rows] == ["test_a", "test_b"]
    assert all(r["worker"] == "main" and r["end"] >= r["start"] for r in rows)
