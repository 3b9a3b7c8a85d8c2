"""The guard of tests/conftest.py: a test that steps an optimizer, in its own process or in one it starts,
fails unless it is marked ``trains`` (also when a module-scoped fixture did the training); a marked one,
one that only builds a model, and one that steps a toy of a few parameters pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CASES = '''
import subprocess, sys
import pytest
import torch

STEP = "import torch; m = torch.nn.Linear(512, 256); o = torch.optim.SGD(m.parameters(), lr=0.1); m(torch.ones(512)).sum().backward(); o.step()"


@pytest.fixture(scope="module")
def trained_in_a_module_fixture():
    exec(STEP)


def test_steps_in_process_unmarked():
    exec(STEP)


def test_steps_in_a_child_unmarked():
    subprocess.run([sys.executable, "-c", STEP], check=True)


@pytest.mark.trains
def test_steps_marked():
    exec(STEP)


def test_steps_in_a_module_fixture_unmarked(trained_in_a_module_fixture):
    pass


def test_builds_without_stepping_and_steps_a_toy():
    m = torch.nn.Linear(512, 256)
    torch.optim.SGD(m.parameters(), lr=0.1)
    m(torch.ones(512)).sum().backward()
    theta = torch.zeros(4, requires_grad=True)  # the L6 bandit's size: a few logits, not a model
    step = torch.optim.SGD([theta], lr=0.1)
    theta.sum().backward()
    step.step()
'''


def test_an_unmarked_test_that_trains_fails(tmp_path):
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    shutil.copytree(HERE / "training_guard", tmp_path / "training_guard",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    trains: trains\n    notebook: notebook\n")
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {k: v for k, v in os.environ.items() if k != "COURSE_TRAINING_GUARD"}  # the child keeps its own log
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--basetemp",
                             str(tmp_path / "tmp"), "test_cases.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    out = result.stdout
    assert "5 passed, 3 errors" in out and "sitecustomize" not in result.stderr + out, out[-4000:]
    assert "PASSED test_cases.py::test_steps_marked" in out and "PASSED test_cases.py::test_builds_without_stepping_and_steps_a_toy" in out
    for name in ("test_steps_in_process_unmarked", "test_steps_in_a_child_unmarked",
                 "test_steps_in_a_module_fixture_unmarked"):  # failed at teardown
        assert f"ERROR test_cases.py::{name}" in out, out[-4000:]
    assert out.count("is not marked `trains`") >= 3 and "SGD: " in out
