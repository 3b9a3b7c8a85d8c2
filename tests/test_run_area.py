"""The suite owns its run area (conftest.py at the root): runs are written and read under the session's own
COURSE_RUNS, never under the working tree's ``runs/``, whatever that holds.

The notebook test plants a finished ``runs/l71-ci`` in a copy of the repository (labs, rewards, the root
conftest.py; data linked) and runs the L7.1 notebook's cells up to ``open_run`` there under nbval: the lab
must be set to train, in the child session's run area. A control run of ``open_run`` in the same copy
without pytest shows that the planted run is one the notebook would otherwise open read-only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from labs.core import paths

from rundirs import GOOD_HOLDOUT, history, make_run, paired_verdicts

ROOT = Path(__file__).resolve().parent.parent


def test_the_session_run_area_is_its_own():
    area = paths.runs_dir()
    assert os.environ["COURSE_RUNS"] == str(area) and area.is_dir()
    assert area.resolve() != (paths.REPO_ROOT / "runs").resolve()
    assert paths.REPO_ROOT.resolve() not in area.resolve().parents


def test_the_session_course_cache_is_its_own():
    """The converted model and the format passes are the run's own (conftest.py): never ~/.cache/grpo-course,
    whatever this machine trained before, and one folder for both workers (each pass is trained once)."""
    cache = paths.cache_dir()
    assert os.environ["COURSE_CACHE"] == str(cache) and cache.is_dir()
    assert cache.name == "course-cache"
    default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "grpo-course"
    assert cache.resolve() != default.resolve()
    run_area = paths.runs_dir().resolve()
    # the controller's temporary folder: a worker's run area is one folder down from it (popen-gwN)
    assert cache.resolve().parent in (run_area.parent, run_area.parent.parent)


def l71_notebook() -> Path:
    """The L7.1 notebook as `make test` runs it (the Makefile's NOTEBOOKS list)."""
    listed = subprocess.run(["make", "-s", "list-notebooks"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    (found,) = [ROOT / p for p in listed if Path(p).name.startswith("L7_1_")]
    return found


def repo_copy(target: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("labs", "rewards"):  # copied: labs.core.paths finds the repository from its own file
        shutil.copytree(ROOT / folder, target / folder, ignore=ignore)
    for folder in ("data", "configs"):
        (target / folder).symlink_to(ROOT / folder)
    for name in ("conftest.py", "pyproject.toml", "requirements.txt", "requirements-gpu.txt"):  # the stack check reads the pins
        shutil.copy(ROOT / name, target / name)
    return target


def plant_finished_run(runs: Path) -> Path:
    return make_run(runs, "l71-ci", metrics=history(2), max_steps=2, profile="ci",
                    verdicts=paired_verdicts(*GOOD_HOLDOUT))


def trimmed_l71(source: Path, target: Path) -> Path:
    """The notebook's first code cell (imports, profile) and its open_run cell, then the check."""
    nb = nbformat.read(source, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    opening = [c for c in code if "l71.open_run(" in c.source]
    assert len(opening) == 1, "the L7.1 notebook opens its run in exactly one cell"
    check = nbformat.v4.new_code_cell(
        "import os\nfrom pathlib import Path\nfrom labs.core import paths\n"
        "assert paths.REPO_ROOT == Path.cwd().parent, paths.REPO_ROOT  # labs from the copy\n"
        "assert (paths.REPO_ROOT / 'runs' / 'l71-ci' / 'status.json').is_file()\n"
        "assert not lab.read_only, 'the notebook opened a finished run instead of training'\n"
        "assert lab.run.root == Path(os.environ['COURSE_RUNS']) / 'l71-ci', lab.run.root\n"
        "import json\nPath('seen.json').write_text(json.dumps({'read_only': lab.read_only, 'root': str(lab.run.root), "
        "'runs': os.environ['COURSE_RUNS']}))\n"
    )
    # the open_run cell asks whether the student's functions are written; this test is about the run area only
    opening[0].source = re.sub(r"^listo = .*$", "listo = True", opening[0].source, flags=re.M)
    nb.cells = [code[0], opening[0], check]
    for cell in nb.cells:
        cell.outputs, cell.execution_count = [], None
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target


def child_env(copy: Path, shell_runs: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_TRAINING_GUARD",)}
    env.update(PYTHONPATH=str(copy), COURSE_PROFILE="ci", COURSE_RUNS=str(shell_runs), WANDB_MODE="offline",
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


@pytest.mark.notebook
def test_a_finished_run_in_the_working_tree_does_not_stop_the_l71_notebook_from_training(tmp_path):
    """The only test of the root conftest's run area as a notebook kernel sees it."""
    copy = repo_copy(tmp_path / "repo")
    plant_finished_run(copy / "runs")
    shell_runs = plant_finished_run(tmp_path / "shell-runs").parent  # a COURSE_RUNS of the shell is not read either
    assert (copy / "runs" / "l71-ci" / "status.json").is_file()
    notebook = trimmed_l71(l71_notebook(), copy / "notebooks" / "l71_recortado.ipynb")

    # control: outside the test session, open_run in the copy finds the planted run and would not train
    control_env = {**child_env(copy, shell_runs), "COURSE_RUNS": ""}
    control = subprocess.run(
        [sys.executable, "-c", "from labs import l71; lab = l71.open_run('ci', echo=lambda s: None); "
         "import json; print(json.dumps({'read_only': lab.read_only, 'root': str(lab.run.root)}))"],
        cwd=copy, env=control_env, capture_output=True, text=True, timeout=300)
    assert control.returncode == 0, control.stderr[-3000:]
    seen = json.loads(control.stdout.strip().splitlines()[-1])
    assert seen == {"read_only": True, "root": str(copy / "runs" / "l71-ci")}

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-s", "--basetemp", str(tmp_path / "child-tmp"),
         "--nbval-lax", "--nbval-current-env", str(notebook.relative_to(copy))],
        cwd=copy, env=child_env(copy, shell_runs), capture_output=True, text=True, timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "3 passed" in out, out[-4000:]
    seen = json.loads((notebook.parent / "seen.json").read_text())  # written by the kernel, cwd = the notebook's
    area = Path(seen["runs"])
    assert seen == {"read_only": False, "root": str(area / "l71-ci"), "runs": seen["runs"]}
    assert area != copy / "runs" and area != shell_runs and (tmp_path / "child-tmp") in area.parents
