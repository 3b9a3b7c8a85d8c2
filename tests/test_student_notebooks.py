"""The student notebooks: generated from sources/ by otter assign, in sync, with no solution in them, and with
every exercise check failing on the stub with its Spanish hint and passing on the solution.

How a question looks in a source notebook (otter-grader's markers, raw cells): ``# BEGIN QUESTION`` (name), the
prompt, ``# BEGIN SOLUTION`` / the answer cell with ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` lines /
``# END SOLUTION``, ``# BEGIN TESTS`` / exception-based test functions with a ``failure_message`` /
``# END TESTS``, ``# END QUESTION``. Cells a question needs from earlier in the notebook (imports, small data)
carry the tag ``exercise-context``; the checks below run only those, the answers and the checks, so they take
seconds and never train a model.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from labs import assign
from labs.core import check_view
from wrong_answers import parse

SOURCES = sorted(assign.SOURCES_DIR.glob("*.ipynb"))
CONTEXT_TAG = "exercise-context"
CHECK = re.compile(r'grader\.check\("([\w-]+)"\)')
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "# SOLUTION", "BEGIN QUESTION", "BEGIN TESTS", "END TESTS")


def text(cell) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def question_names(nb) -> list[str]:
    return [m.group(1) for cell in nb.cells if cell.cell_type == "code" and (m := CHECK.fullmatch(text(cell).strip()))]


def solution_lines(source_nb) -> set[str]:
    """The substantial lines between BEGIN/END SOLUTION markers that appear nowhere else in the source."""
    inside, elsewhere = set(), set()
    for cell in source_nb["cells"]:
        depth = 0
        for line in text(cell).splitlines():
            stripped = line.strip()
            if stripped.endswith("# BEGIN SOLUTION"):
                depth += 1
            elif stripped.endswith("# END SOLUTION"):
                depth -= 1
            elif depth > 0 or stripped.endswith("# SOLUTION"):
                inside.add(stripped.removesuffix("# SOLUTION").strip())
            else:
                elsewhere.add(stripped)
    return {line for line in inside - elsewhere if len(line) >= 16 and not line.startswith("#")}


def test_student_notebooks_are_generated_from_their_sources():
    stale = assign.stale_notebooks()
    assert not stale, (f"notebooks/ is out of date with sources/ for {stale}: "
                       "run `python -m labs notebooks` and commit the result (never edit notebooks/ by hand).")


def test_the_sync_check_can_fail(tmp_path, monkeypatch):
    source = assign.SOURCES_DIR / "L6_de_policy_gradient_a_grpo.ipynb"
    (tmp_path / "sources").mkdir()
    (tmp_path / "notebooks").mkdir()
    shutil.copy(source, tmp_path / "sources" / source.name)
    (tmp_path / "notebooks" / source.name).write_text(assign.render(source).replace("grader.check", "grader .check"))
    monkeypatch.setattr(assign.build, "SOURCES_DIR", tmp_path / "sources")
    monkeypatch.setattr(assign.build, "STUDENT_DIR", tmp_path / "notebooks")
    assert assign.stale_notebooks() == [source.name]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_no_solution_is_visible_in_the_student_notebook(source):
    student = (assign.STUDENT_DIR / source.name).read_text()
    # otter wraps a manual question (a written answer, such as E1-E3's predictions) in HTML comments for its PDF
    # export, <!-- BEGIN QUESTION --> ... <!-- END QUESTION -->: invisible in the rendered cell, not a marker shown
    cells = [re.sub(r"<!-- (BEGIN|END) QUESTION -->", "", text(c)) for c in json.loads(student)["cells"]]
    for marker in MARKERS:
        assert not any(marker in cell for cell in cells), f"{source.name}: the student notebook shows '{marker}'"
    leaked = [line for line in solution_lines(json.loads(source.read_text())) if any(line in c for c in cells)]
    assert not leaked, f"{source.name}: solution lines visible to the student: {leaked}"


def is_answer_or_check(cell) -> bool:
    tags = cell.metadata.get("tags", [])
    return ("otter_answer_cell" in tags or "otter_assign_solution_cell" in tags
            or (cell.cell_type == "code" and bool(CHECK.fullmatch(text(cell).strip()))))


def check_outputs(cells) -> dict[str, str]:
    found = {}
    for cell in cells:
        m = CHECK.fullmatch(text(cell).strip()) if cell.cell_type == "code" else None
        if m:
            found[m.group(1)] = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "")
                                        for o in cell.outputs)
    return found


def run_stub_then_solution(student: Path, autograder: Path, workdir: Path) -> tuple[dict, dict]:
    """One kernel: otter's init cell, the exercise-context cells, every answer as the student gets it (the stub)
    with its check, then every answer as the source has it (the solution) with the same check.

    Returns each check's output, by question, on the stub and on the solution.
    """
    shutil.copy(student, workdir / student.name)  # grader.check reads the tests from the notebook's metadata
    stub_nb, solution_nb = (nbformat.read(p, as_version=4) for p in (student, autograder))
    head = [c for c in stub_nb.cells if text(c).startswith("# Initialize Otter")
            or CONTEXT_TAG in c.metadata.get("tags", [])]
    on_stub = [c for c in stub_nb.cells if is_answer_or_check(c)]
    on_solution = [c for c in solution_nb.cells if is_answer_or_check(c)]
    nb = nbformat.v4.new_notebook(metadata=stub_nb.metadata)
    nb.cells = head + on_stub + on_solution
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}).execute()
    errors = [(text(c)[:80], o.get("ename"), o.get("evalue")) for c in nb.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, f"{student.name}: a cell raised instead of letting its check answer: {errors}"
    return check_outputs(on_stub), check_outputs(on_solution)


QUESTION_SOURCES = [s for s in SOURCES if question_names(nbformat.read(assign.STUDENT_DIR / s.name, as_version=4))]
# E4's check scores the recipe saved in the run area (runs/_ajustes: the L7.1 notebook's section 1, else the course's
# three): checked with none saved, and with what the L7.1 notebook saves, as nbval leaves it before E4 runs (its
# reference answer, a 0.3 bonus, failed there: the lesson's rules pay a correct-number hack 2.0 over "72 clips")
E4 = assign.SOURCES_DIR / "E4_tu_recompensa.ipynb"
CHECK_CASES = [pytest.param(s, False, id=s.stem) for s in QUESTION_SOURCES] + [
    pytest.param(E4, True, id=f"{E4.stem}-with-the-L7_1-notebooks-saved-recipe")]


@pytest.mark.notebook  # executes each student notebook's answers and checks in a kernel
@pytest.mark.exercise_checks  # setup cells, answers and checks only: the GPU-stack leg runs it too
@pytest.mark.parametrize("source,l71_recipe_saved", CHECK_CASES)
def test_each_check_fails_on_the_stub_with_its_hint_and_passes_on_the_solution(source, l71_recipe_saved, tmp_path,
                                                                                monkeypatch):
    # an empty run area of its own (the session's holds whatever the L7.1 notebook saved earlier on this worker)
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path / "runs"))
    if l71_recipe_saved:
        import lesson_recipe

        lesson_recipe.save(tmp_path)
    views = assign.generate(source, tmp_path / "otter")
    student = nbformat.read(views["student"], as_version=4)
    names, tests = question_names(student), student.metadata["otter"]["tests"]
    on_stub, on_solution = run_stub_then_solution(assign.STUDENT_DIR / source.name, views["autograder"], tmp_path)
    assert sorted(on_stub) == sorted(on_solution) == sorted(names)
    for name in names:
        hints = re.findall(r'failure_message="(.+?)"\)', tests[name])
        assert hints, f"{source.name}: question {name} has no failure_message (the Spanish hint)"
        # the notebook's setup cell shows grader.check in Spanish (labs.core.check_view): no otter frame, no source
        assert check_view.FAILED in on_stub[name] and all(on_stub[name].count(h) == 1 for h in set(hints)), (
            f"{source.name}: on the stub, check {name} did not fail with its hint, once:\n{on_stub[name]}")
        assert not any(w in on_stub[name] for w in ("Traceback", "Test case failed", "Error at line")), on_stub[name]
        assert on_solution[name].strip() == f"{name}: ✅ {check_view.PASSED}.", (
            f"{source.name}: on the solution, check {name} did not pass:\n{on_solution[name]}")


def test_the_course_has_at_least_25_student_written_code_cells():
    """Issue 23's floor: the student writes the lesson's code (each question is an answer cell with its check)."""
    per_notebook = {s.stem: len(question_names(nbformat.read(assign.STUDENT_DIR / s.name, as_version=4)))
                    for s in SOURCES}
    assert sum(per_notebook.values()) >= 25, per_notebook


def defined_tests(code: str) -> list[str]:
    """The ``test_*`` functions a test cell or an otter test file defines, each as its definition without
    decorators (otter's ``@test_case``) in ``ast.unparse``'s spelling (otter rewrites the cell through it)."""
    found = []
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            node.decorator_list = []
            found.append(ast.unparse(node))
    return sorted(found)


def functions_by_question(otter_tests: dict[str, str]) -> dict[str, list[str]]:
    return {question: defined_tests(code) for question, code in otter_tests.items()}


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_the_student_version_holds_every_test_of_its_source(source, tmp_path):
    """Issue 42: otter assign keeps only the first function of a test cell (it takes a second for a call), so a
    check written in a shared cell silently left the student's notebook. Each question's test functions, name and
    body, must be the same in sources/, in notebooks/ and in a fresh otter assign build."""
    in_source = {q: sorted(f for code in codes for f in defined_tests(code))
                 for q, codes in parse(source)[0].items() if codes}  # a written answer (E1-E3's predictions) has none
    student = json.loads((assign.STUDENT_DIR / source.name).read_text())
    in_notebooks = functions_by_question(student["metadata"].get("otter", {}).get("tests", {}))
    fresh = json.loads(assign.generate(source, tmp_path)["student"].read_text())
    in_fresh = functions_by_question(fresh["metadata"].get("otter", {}).get("tests", {}))
    for where, found in (("notebooks/", in_notebooks), ("a fresh otter assign build", in_fresh)):
        assert sorted(found) == sorted(in_source), f"{source.name}: questions differ in {where}"
        missing = {q: [f.split("(")[0].removeprefix("def ") for f in fs if f not in found[q]] for q, fs in in_source.items()}
        assert not any(missing.values()), f"{source.name}: test functions missing or changed in {where}: {missing}"
        assert found == in_source, f"{source.name}: {where} holds test functions the source does not"
