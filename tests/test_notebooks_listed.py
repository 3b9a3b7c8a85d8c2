"""Every notebook is executed by `make test`, and none is committed with outputs except its checked cells.

A checked cell (first line `# NBVAL_CHECK_OUTPUT`) keeps its outputs, which nbval compares under
`--nbval-lax`; tests/test_notebook_outputs.py checks what those outputs may contain.
"""

import json
import subprocess
from pathlib import Path

from notebook_cells import outputs_only_in_checked_cells

ROOT = Path(__file__).resolve().parent.parent


def test_every_notebook_is_in_the_make_test_list():
    listed = subprocess.run(["make", "-s", "list-notebooks"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    present = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "sources").glob("*.ipynb"))
    assert sorted(listed) == present
    assert len(listed) == len(set(listed))


def test_notebooks_keep_outputs_only_in_checked_cells():
    for path in (ROOT / "sources").glob("*.ipynb"):
        nb = json.loads(path.read_text())
        assert outputs_only_in_checked_cells(nb["cells"]), path.name


def test_the_output_rule_can_fail():
    checked = {"cell_type": "code", "source": "# NBVAL_CHECK_OUTPUT\nprint(1)", "execution_count": 2}
    plain = {"cell_type": "code", "source": "print(1)", "execution_count": None}
    out = [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
    assert outputs_only_in_checked_cells([{**checked, "outputs": out}, {**plain, "outputs": []}])
    assert not outputs_only_in_checked_cells([{**plain, "outputs": out}])
    assert not outputs_only_in_checked_cells([{**checked, "outputs": []}])
    assert not outputs_only_in_checked_cells([{**checked, "outputs": out, "execution_count": None}])  # nbval skips it
    assert not outputs_only_in_checked_cells([{**plain, "outputs": [], "execution_count": 3}])
