"""Tests that train must say so: a test not marked ``trains`` fails if it, or a process it starts, steps an
optimizer (tests/training_guard/sitecustomize.py notes every such process in one file of the session).

The marks make the split declarative: ``make check`` runs ``-m "not trains and not notebook"``, so a test
that trains without the mark would slip into the inner loop and make it slow; here it fails instead.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

GUARD_DIR = Path(__file__).resolve().parent / "training_guard"


def _load_guard():
    spec = importlib.util.spec_from_file_location("training_guard", GUARD_DIR / "sitecustomize.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


guard = _load_guard()


@pytest.hookimpl(trylast=True)  # after conftest.py at the root has made the session's temporary folder
def pytest_configure(config):
    log = config._tmp_path_factory.getbasetemp() / "training-guard.log"
    log.touch()
    os.environ[guard.GUARD_ENV] = str(log)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(GUARD_DIR), os.environ.get("PYTHONPATH")]))
    guard.install()  # this process too: in-process trainers


def _guard_lines() -> list[str]:
    return Path(os.environ[guard.GUARD_ENV]).read_text(encoding="utf-8").splitlines()


@pytest.fixture(autouse=True)
def _fails_if_it_trains_unmarked(request):
    if request.node.get_closest_marker("trains") or request.node.get_closest_marker("notebook"):
        yield
        return
    before = len(_guard_lines())
    guard._noted = False  # the pytest process notes again for every test
    yield
    new = _guard_lines()[before:]
    if new:
        pytest.fail("This test trains a model (an optimizer stepped) but is not marked `trains`: add "
                    "@pytest.mark.trains and say in its docstring what it alone checks.\n" + "\n".join(new))
