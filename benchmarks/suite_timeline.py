"""Where `make test`'s time goes: every test's start and end on each xdist worker, summed by scheduling group.

    python benchmarks/suite_timeline.py                          # run `make test` with the timeline, then report
    python benchmarks/suite_timeline.py --read timeline.jsonl    # report an earlier run's timeline again
    python benchmarks/suite_timeline.py --top 40                 # more groups and tests in the report

`make test` runs two workers; each takes whole groups (a test file, or the L7.1 notebook chain: ``group_of`` in the
root conftest.py), so the suite's wall time is set by the worker that finishes last and what can be cut is read per
group. The run loads ``benchmarks/timeline_plugin.py`` into pytest (``-p``, on ``PYTHONPATH``), which appends one
line per test (node id, worker, start, end, including its fixtures' setup and teardown) to ``--out``; the report
prints each worker's busy time and end, then the groups and the single tests that took longest. Heavy (the whole
suite): run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_suite(out: Path, make_args: list[str]) -> int:
    env = dict(os.environ, COURSE_TIMELINE=str(out))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")]))
    pytest_args = " ".join(filter(None, ["-p timeline_plugin", env.get("PYTEST_ARGS")]))
    return subprocess.call(["make", "test", f"PYTEST_ARGS={pytest_args}", *make_args], cwd=ROOT, env=env)


@functools.cache
def _root_conftest():
    """The root conftest.py, loaded by path (under pytest, the module called `conftest` is tests/conftest.py)."""
    spec = importlib.util.spec_from_file_location("course_root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def group_of(nodeid: str) -> str:
    """The unit one worker runs whole (the root conftest.py's scheduling rule)."""
    return _root_conftest().group_of(nodeid)


def report(rows: list[dict], top: int) -> list[str]:
    if not rows:
        return ["no test ran"]
    start = min(r["start"] for r in rows)
    lines = []
    by_worker = collections.defaultdict(list)
    for r in rows:
        by_worker[r["worker"]].append(r)
    for worker, runs in sorted(by_worker.items()):
        busy = sum(r["end"] - r["start"] for r in runs)
        end = max(r["end"] for r in runs) - start
        lines.append(f"worker {worker}: {len(runs)} tests, busy {busy:.0f} s, last test ended at {end:.0f} s")
    groups = collections.defaultdict(lambda: [0.0, 0, set()])
    for r in rows:
        g = groups[group_of(r["id"])]
        g[0] += r["end"] - r["start"]
        g[1] += 1
        g[2].add(r["worker"])
    total = sum(g[0] for g in groups.values())
    lines.append(f"all tests: {total:.0f} worker-seconds in {len(groups)} groups")
    lines.append(f"{'seconds':>8} {'tests':>6}  worker  group")
    for name, (seconds, count, workers) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{seconds:8.0f} {count:6d}  {','.join(sorted(workers)):6}  {name}")
    lines.append("slowest tests (setup, call and teardown together):")
    for r in sorted(rows, key=lambda r: r["start"] - r["end"])[:top]:
        lines.append(f"{r['end'] - r['start']:8.1f}  {r['worker']:6}  {r['id']}")
    return lines


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read", type=Path, help="report this timeline instead of running the suite")
    parser.add_argument("--out", type=Path, help="where the run writes its timeline (default: a temporary file)")
    parser.add_argument("--top", type=int, default=25, help="groups and tests listed")
    parser.add_argument("make_args", nargs="*", help="more make arguments, e.g. TEST_WORKERS=0")
    args = parser.parse_args(argv)
    status = 0
    path = args.read
    if path is None:
        path = args.out or Path(tempfile.mkdtemp(prefix="suite-timeline-")) / "timeline.jsonl"
        path.unlink(missing_ok=True)
        status = run_suite(path, args.make_args)
        print(f"timeline: {path}")
    print("\n".join(report(read(path), args.top)))
    return status


if __name__ == "__main__":
    sys.exit(main())
