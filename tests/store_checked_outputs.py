"""Execute a notebook on the `ci` profile and store the outputs of its checked cells, and only those.

A checked cell is a code cell whose first line is ``# NBVAL_CHECK_OUTPUT``: ``make test`` runs nbval with
``--nbval-lax``, so it compares exactly those cells' outputs with a fresh run (after the substitutions of
``tests/nbval_sanitize.cfg``). Every other code cell is stored without outputs or execution count; a
checked cell keeps the count of this run, because nbval does not compare a cell that has none. Run it from the repository root, under the heavy-job lock, after changing a checked cell
or the code it calls::

    flock /tmp/course-heavy.lock .venv/bin/python tests/store_checked_outputs.py sources/L6_*.ipynb

The environment is the one ``make test`` gives the notebooks (``TEST_ENV`` in the Makefile, and a run area
of its own, as conftest.py gives the test session: the notebooks named together share one temporary
``COURSE_RUNS``, removed at the end, so a run in the working tree's ``runs/`` never changes what is stored),
so the stored outputs are what CI prints. A checked cell that writes to stderr or shows an image is refused: warnings
and figures are not stable enough to compare.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from notebook_cells import is_checked  # tests/ is on sys.path when this file runs as a script
TEST_ENV = {"COURSE_PROFILE": "ci", "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def store(path: Path, timeout: int = 1800) -> float:
    os.environ.update(TEST_ENV)
    root = Path(__file__).resolve().parent.parent
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - started
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if not is_checked(cell):
            cell.outputs = []
            cell.execution_count = None
            continue
        # nbval compares a cell only if it has an execution count ("Unrun reference cell has outputs" otherwise)
        for out in cell.outputs:
            if out.get("name") == "stderr" or "image/png" in out.get("data", {}):
                problems.append(f"cell {i}: {out.get('name') or out.get('output_type')} output in a checked cell")
        if not cell.outputs:
            problems.append(f"cell {i}: checked cell without output")
    if problems:
        raise SystemExit("\n".join(problems))
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return seconds


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="course-runs-") as runs:
        os.environ["COURSE_RUNS"] = runs
        for name in sys.argv[1:]:
            print(f"{name}: executed in {store(Path(name)):.0f} s, checked outputs stored")
