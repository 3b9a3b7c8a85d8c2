"""The two-worker split (conftest.py at the root): which tests one worker must run together."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_notebooks_that_read_the_l71_run_share_its_worker():
    conftest = _root_conftest()
    notebooks = re.findall(r"sources/(\w+?)_\*\.ipynb", (ROOT / "Makefile").read_text(encoding="utf-8"))
    chain = {n for n in notebooks if conftest.group_of(f"sources/{n}_x.ipynb::Cell 0") == conftest.L71_CHAIN_GROUP}
    assert chain == {"L7_1", "L7_2", "E1", "E2", "E3", "E4", "C2b"}
    # every other notebook, and every test file, is a unit of its own
    assert conftest.group_of("sources/L6_de_policy_gradient_a_grpo.ipynb::Cell 3") == \
        "sources/L6_de_policy_gradient_a_grpo.ipynb"
    assert conftest.group_of("tests/test_l71_run.py::test_x[ci]") == "tests/test_l71_run.py"


def test_the_scheduler_hands_out_whole_groups():
    conftest = _root_conftest()
    ids = ["sources/L7_1_a.ipynb::Cell 0", "sources/C2b_b.ipynb::Cell 0", "tests/test_a.py::t1", "tests/test_a.py::t2"]
    scopes = [conftest.CourseScheduling._split_scope(None, nodeid) for nodeid in ids]
    assert scopes == [conftest.L71_CHAIN_GROUP, conftest.L71_CHAIN_GROUP, "tests/test_a.py", "tests/test_a.py"]
