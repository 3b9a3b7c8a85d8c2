"""Run All on the student notebooks without exercises to answer, as generated (issue 52: the untouched-notebook tests
skipped 00, 00b, L7.3 and C2b): no cell raises, no output holds English library noise or runs past the cap
(``tests/wrong_answers.run_untouched``). Each runs in seconds and trains nothing; the notebooks that train are the
browser leg's (``tests/browser/``) and nbval's.
"""

from __future__ import annotations

import pytest

from labs import assign
from wrong_answers import MAX_OUTPUT_LINES, cell_text, output_lines, run_untouched

CHEAP = ("00_empieza_aqui.ipynb", "00b_apendice.ipynb", "L7_3_mas_alla_de_una_gpu.ipynb", "C2b_rubrica.ipynb")


@pytest.mark.notebook
@pytest.mark.parametrize("name", CHEAP)
def test_the_untouched_notebook_runs_to_the_end_short_and_in_spanish(name, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))  # the kernel inherits it: an empty runs folder
    _, nb = run_untouched(assign.STUDENT_DIR / name, tmp_path, guard="\0")
    if name.startswith("00_"):  # on a CPU profile the route is this machine's, short; the 5090's is folded
        route = next(c for c in nb.cells if "cpu_route_es(" in cell_text(c))
        assert output_lines(route.outputs) <= MAX_OUTPUT_LINES
        text = "".join(o.get("text", "") for o in route.outputs)
        assert "sin GPU" in text and "make setup" not in text, text
