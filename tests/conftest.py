"""Tests that train must say so: a test not marked ``trains`` fails if it, a fixture it uses, or a process it
starts steps an optimizer over a model (tests/training_guard/sitecustomize.py notes every such process in one
file of the session).

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
_LINES_BEFORE = pytest.StashKey[int]()


@pytest.hookimpl(trylast=True)  # after conftest.py at the root has made the session's temporary folder
def pytest_configure(config):
    log = config._tmp_path_factory.getbasetemp() / "training-guard.log"
    log.touch()
    os.environ[guard.GUARD_ENV] = str(log)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(GUARD_DIR), os.environ.get("PYTHONPATH")]))
    guard.install()  # this process too: in-process trainers


def _guard_lines() -> list[str]:
    return Path(os.environ[guard.GUARD_ENV]).read_text(encoding="utf-8").splitlines()


def _may_train(item) -> bool:
    return bool(item.get_closest_marker("trains") or item.get_closest_marker("notebook"))


# Hooks, not a fixture: a module-scoped fixture that trains runs in the setup of its first test, before any
# function-scoped fixture could take the count.
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    guard._noted = False  # the pytest process notes again for every test
    item.stash[_LINES_BEFORE] = len(_guard_lines())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "teardown" and not _may_train(item) and _LINES_BEFORE in item.stash:
        new = _guard_lines()[item.stash[_LINES_BEFORE]:]
        if new and report.outcome != "failed":
            report.outcome = "failed"
            report.longrepr = ("This test trains a model (an optimizer over a model stepped) but is not marked "
                               "`trains`: add @pytest.mark.trains and say in its docstring what it alone checks.\n"
                               + "\n".join(new))
    return report
