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
"""

from __future__ import annotations

import os

import pytest

RUN_AREA_ENV = "COURSE_RUNS"


@pytest.hookimpl(trylast=True)  # after pytest's tmpdir plugin has made the session's temporary folder factory
def pytest_configure(config):
    run_area = config._tmp_path_factory.mktemp("course-runs", numbered=False)
    os.environ[RUN_AREA_ENV] = str(run_area)  # overrides any COURSE_RUNS of the shell: the suite reads only its own


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection reads the markers
def pytest_collection_modifyitems(config, items):
    """nbval's cells execute a notebook: mark them, so ``-m "not notebook"`` (``make check``) leaves them out."""
    for item in items:
        if type(item).__module__.startswith("nbval"):
            item.add_marker(pytest.mark.notebook)
        if item.get_closest_marker("trains") or item.get_closest_marker("notebook"):
            item.add_marker(pytest.mark.slow)  # the GPU stack's `-m "not slow"` keeps skipping them
