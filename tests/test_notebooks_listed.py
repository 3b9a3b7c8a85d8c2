"""Every notebook is executed by `make test`; only the cells nbval checks are committed with outputs."""

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_notebook_is_in_the_make_test_list():
    listed = subprocess.run(["make", "-s", "list-notebooks"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    present = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(listed) == present
    assert len(listed) == len(set(listed))


CHECKED = "# NBVAL_CHECK_OUTPUT"  # nbval compares these cells' saved outputs (under --nbval-lax)


def test_notebooks_are_committed_without_outputs_except_checked_cells():
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        nb = json.loads(path.read_text())
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            if CHECKED in "".join(cell["source"]):
                # nbval refuses saved outputs without an execution count ("Unrun reference cell has outputs")
                assert cell.get("outputs") and cell.get("execution_count") is not None, path.name
            else:
                assert cell.get("outputs") == [] and cell.get("execution_count") is None, path.name
