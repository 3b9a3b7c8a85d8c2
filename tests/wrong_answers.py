"""The harness of the wrong-answer tests: a notebook's own checks, run the way ``grader.check`` runs them.

A source notebook (``sources/``) keeps each question's checks between otter's ``# BEGIN TESTS`` and ``# END TESTS``
and its solutions between ``# BEGIN SOLUTION`` and ``# END SOLUTION``. ``Checks`` executes every solution, puts an
answer under test in place of one of them, and calls each test function with the notebook's names of the same
parameters; a check passes when none raises (otter counts any exception as a failure). The test functions are the
ones ``otter assign`` wrote into the student notebook (``notebooks/``, metadata ``otter.tests``), not the source's
cells: otter keeps only the first function of a test cell, and a wrong answer must fail what the student runs.

``standard_tests(checks, WRONG, RIGHT)`` gives a module the tests every wrong-answer module has: at least three wrong
answers and one right one per question, the solutions pass, every wrong answer fails with a message the check wrote
(an ``AssertionError``, not the student code's own exception), every right answer in another style passes.
``course_code_test(checks, CALLS)``: each answer that calls the course's own solution fails with the one sentence
that says so (``labs.core.answer_calls.course_call_message``). Assign them to module-level ``test_*`` names so pytest collects them.
"""

from __future__ import annotations

import inspect
import json
import re
import textwrap
from pathlib import Path

import pytest

from labs import assign


def cell_text(cell) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def parse(path: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Question name -> its test cells' code; and every solution cell's code (markers are comments: it runs)."""
    cells = json.loads(Path(path).read_text())["cells"]
    tests, solutions, question, in_tests, in_solution = {}, [], None, False, False
    for cell in cells:
        text = cell_text(cell)
        if cell["cell_type"] == "raw":
            if text.startswith("# BEGIN QUESTION"):
                question = re.search(r"name:\s*([\w-]+)", text).group(1)
                tests[question] = []
            in_tests = text.startswith("# BEGIN TESTS") or (in_tests and not text.startswith("# END TESTS"))
            in_solution = text.startswith("# BEGIN SOLUTION") or (in_solution and not text.startswith("# END SOLUTION"))
        elif cell["cell_type"] == "code" and in_tests:
            tests[question].append(text)
        elif cell["cell_type"] == "code" and in_solution:
            solutions.append(text)
    return tests, solutions


def compiled_tests(source: Path) -> dict[str, str]:
    """Question name -> the test file ``otter assign`` wrote for it into the student notebook (what grader.check runs)."""
    student = json.loads((assign.STUDENT_DIR / Path(source).name).read_text())
    return student["metadata"]["otter"]["tests"]


def hints(test_codes: list[str]) -> list[str]:
    """The ``failure_message`` of each test cell (what otter shows under a failed check)."""
    return re.findall(r'failure_message: "(.+?)"', "\n".join(test_codes))


class Checks:
    """One or more source notebooks' checks; ``run(question, answer)`` is what ``grader.check`` would say.

    ``prelude``: the imports the notebook's first cells make (solutions and answers run after it).
    """

    def __init__(self, *paths: Path, prelude: str = ""):
        self.prelude = prelude
        self.tests: dict[str, list[str]] = {}  # question -> its source's test cells
        self.compiled: dict[str, str] = {}  # question -> otter's test file, as the student notebook holds it
        self.solutions: dict[str, list[str]] = {}  # question -> the solutions of its own notebook
        for path in paths:
            tests, solutions = parse(path)
            compiled = compiled_tests(path)
            for question, codes in tests.items():
                self.tests[question] = codes
                self.compiled[question] = compiled[question] if codes else ""  # a written answer has no tests
                self.solutions[question] = solutions

    @property
    def questions(self) -> list[str]:
        return sorted(self.tests)

    def namespace(self, question: str, answer: str | None = None) -> dict:
        namespace: dict = {}
        exec(self.prelude + "\n\n".join(self.solutions[question]), namespace)
        if answer is not None:
            exec(self.prelude + textwrap.dedent(answer), namespace)
        return namespace

    def run(self, question: str, answer: str | None = None) -> str | None:
        """None when every check of ``question`` passes with ``answer`` in place of the solution, else the first failure."""
        namespace = self.namespace(question, answer)
        checks: dict = {}
        exec(self.compiled[question], checks)
        for case in [c for c in checks.values() if hasattr(c, "test_func")]:  # otter's @test_case objects
            check = case.test_func
            try:
                check(*[namespace[p] for p in inspect.signature(check).parameters])
            except Exception as error:  # otter counts any exception as a failed check
                return f"{check.__name__}: {type(error).__name__}: {error}"
        return None


def _cases(answers: dict) -> list[tuple]:
    return [(q, label, a) for q, pairs in answers.items() for label, a in pairs]


def _ids(value):
    return value if isinstance(value, str) and "\n" not in value else ""


def standard_tests(checks: Checks, wrong: dict, right: dict, questions=None):
    """The four tests of a wrong-answer module, over ``questions`` (default: every question ``checks`` has)."""
    asked = sorted(questions if questions is not None else checks.questions)

    def test_every_question_has_three_wrong_answers_and_one_right_one():
        assert sorted(wrong) == sorted(right) == asked
        assert all(len(wrong[q]) >= 3 and len(right[q]) >= 1 for q in asked)

    def test_the_solutions_pass_every_check():
        failures = {q: checks.run(q) for q in asked}
        assert not any(failures.values()), failures

    @pytest.mark.parametrize("question,label,answer", _cases(wrong), ids=_ids)
    def test_a_wrong_answer_fails(question, label, answer):
        """...with a sentence the check wrote (an AssertionError), never a raw exception of the student's code."""
        failure = checks.run(question, answer)
        assert failure is not None, f"{question}: the wrong answer «{label}» passed the check"
        assert ": AssertionError: " in failure, f"{question}: «{label}» ends in a raw exception: {failure}"

    @pytest.mark.parametrize("question,label,answer", _cases(right), ids=_ids)
    def test_a_right_answer_in_another_style_passes(question, label, answer):
        failure = checks.run(question, answer)
        assert failure is None, f"{question}: «{label}» failed: {failure}"

    return (test_every_question_has_three_wrong_answers_and_one_right_one, test_the_solutions_pass_every_check,
            test_a_wrong_answer_fails, test_a_right_answer_in_another_style_passes)


# English library noise a student must not see (issue 40, item 3): progress bars (frozen at 0 % in a stored notebook),
# transformers' wandb info line, FutureWarnings. labs.core.quiet.quiet_notebook, the first call of every notebook,
# turns the first two off; a FutureWarning is a deprecation the course's own code should stop triggering.
LIBRARY_NOISE = re.compile(r"Loading weights|Tokenizing|Writing model shards|\[INFO\]|FutureWarning|it/s\]|s/it\]")


def library_noise(nb) -> list[tuple[str, str]]:
    """(the cell's opening, the line) for every output line of ``nb``, streams and displayed text, that is library noise."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
            found += [(cell_text(cell)[:60], line.strip()[:200]) for line in re.split(r"[\r\n]", text) if LIBRARY_NOISE.search(line)]
    return found


def course_code_test(checks: Checks, calls: list[tuple[str, str, str]]):
    """A test over ``(question, the course function's short name, an answer calling it)``: each fails, naming it."""
    from labs.core.answer_calls import course_call_message

    @pytest.mark.parametrize("question,name,answer", calls, ids=lambda v: _ids(v) if "." in str(v) else "")
    def test_an_answer_that_calls_the_course_solution_is_named(question, name, answer):
        failure = checks.run(question, answer)
        assert failure is not None and course_call_message(name) in failure, (question, name, failure)

    return test_an_answer_that_calls_the_course_solution_is_named


# A cell's output is read at a glance: at most MAX_OUTPUT_LINES lines (issue 40, item 3: one L7.2 cell printed 99,
# a 40-line GPU memory plan for a 32 GB card on a CPU among them). A longer output is a reference the student reads
# line by line (a table, the route); each is named in LONG_OUTPUTS by a piece of its cell's code, with why.
MAX_OUTPUT_LINES = 15
LONG_OUTPUTS = {
    "format_report(checks": "the doctor's table: one row per check, as `python -m labs doctor` prints it",
    "format_fixes(gpu_checks)": "the appendix's list of what to fix before a GPU profile runs on this machine",
    "grader.check(": "otter's report on an unanswered question: one message and one result per check",
    "plan_trl.render_es()": "L7.2's worked example: both routes' memory plans on the lesson's RTX 5090, line by line",
}


def output_lines(outputs) -> int:
    """How many lines a student reads in a cell's outputs: streams, and displayed text (a table as JupyterLab
    shows it: its HTML rows when it has them, else its plain text); not images, and not a traceback (the error
    checks see those)."""
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    n = len(text.rstrip("\n").splitlines())
    for o in outputs:
        data = o.get("data", {})
        if o.get("output_type") not in ("display_data", "execute_result") or "image/png" in data:
            continue
        html = str(data.get("text/html", ""))
        n += html.count("<tr") if "<tr" in html else len(str(data.get("text/plain", "")).splitlines())
    return n


def long_output(source: str, outputs, cap: int = MAX_OUTPUT_LINES) -> str | None:
    """Why a cell's output is too long to read at a glance, or None (fine, or named in ``LONG_OUTPUTS``)."""
    n = output_lines(outputs)
    if n <= cap or any(piece in source for piece in LONG_OUTPUTS):
        return None
    return (f"{n} lines of output (at most {cap}; a longer reference is named in tests/wrong_answers.LONG_OUTPUTS): "
            f"{source.strip()[:60]!r}")


def long_outputs(nb) -> list[str]:
    """``long_output`` for every code cell of an executed notebook."""
    found = [long_output(cell_text(c), c.get("outputs", [])) for c in nb.cells if c.cell_type == "code"]
    return [f for f in found if f]


def run_untouched(student: Path, tmp_path: Path, guard: str, leave_out=()):
    """Run All on a student notebook as generated (every exercise a stub), in ``tmp_path``: no cell may raise, no
    output may hold English library noise (``LIBRARY_NOISE``), and none may be longer than ``MAX_OUTPUT_LINES``
    unless named in ``LONG_OUTPUTS``.

    ``leave_out``: texts of cells to skip (long runs that use no student function: running them is nbval's job).
    Returns what each cell containing ``guard`` (the call that names an unwritten exercise) printed.
    """
    import shutil

    import nbformat
    from nbclient import NotebookClient

    shutil.copy(student, tmp_path / student.name)  # grader.check reads its tests from the notebook's metadata
    nb = nbformat.read(student, as_version=4)
    nb.cells = [c for c in nb.cells if not any(h in cell_text(c) for h in leave_out)]
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [(cell_text(c)[:60], o.get("ename"), o.get("evalue")) for c in nb.cells for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    noise = library_noise(nb)
    assert not noise, noise
    too_long = long_outputs(nb)
    assert not too_long, too_long
    code = [c for c in nb.cells if c.cell_type == "code"]
    guarded = [c for c in code[1:] if guard in cell_text(c)]  # not the first cell: the notebook's imports and setup
    return ["".join(o.get("text", "") for o in c.outputs) for c in guarded], nb


def hint_leaks(tests: dict[str, list[str]], code: re.Pattern) -> dict[str, list[str]]:
    """Each question's hints (``failure_message``); fails if a question has none. Returns the hints that show code."""
    found = {q: hints(codes) for q, codes in tests.items()}
    assert all(found.values()), found
    return {q: [h for h in hs if code.search(h)] for q, hs in found.items() if any(code.search(h) for h in hs)}


def stub_comments(student: Path) -> tuple[int, list[str]]:
    """How many answer cells the student notebook has, and the text of every comment in them."""
    cells = [cell_text(c) for c in json.loads(Path(student).read_text())["cells"]
             if "otter_answer_cell" in c["metadata"].get("tags", [])]
    return len(cells), [line.split("#", 1)[1].strip() for cell in cells for line in cell.splitlines()
                        if line.strip().startswith("#")]
