"""The course's exercise cells ask the student to write GRPO, not to type: enough of them, and none a literal, a
dictated line or a copy of profile fields.

An exercise cell is an answer cell of an auto-graded question in ``sources/`` (otter's ``# BEGIN SOLUTION`` cell of a
question without ``manual: true``; a written, manually graded answer such as a prediction is not one). The solution
part of each (between ``# BEGIN SOLUTION`` and ``# END SOLUTION``) must be code that computes or decides something:
- not a literal: a solution whose every statement binds a constant (``beta_del_curso = 0.04``);
- not a copy of profile fields: three or more ``name=profile.name`` keywords (``beta=p.beta``) in one solution (a
  value a rule derives from a field of another name, ``max_lora_rank=perfil.lora_r``, is a choice, not a copy);
- not dictated: no substantial solution line appears word for word in the notebook's prose (a markdown cell).
"""

from __future__ import annotations

import ast
import json
import re
import textwrap

from labs import assign
from wrong_answers import cell_text

MIN_EXERCISE_CELLS = 25  # issue 35's floor for the whole course


def exercise_cells() -> list[tuple[str, str, str]]:
    """(notebook, question, solution code) for every answer cell of an auto-graded question."""
    found = []
    for path in sorted(assign.SOURCES_DIR.glob("*.ipynb")):
        question, manual, in_solution = None, False, False
        for cell in json.loads(path.read_text())["cells"]:
            text = cell_text(cell)
            if cell["cell_type"] == "raw":
                if text.startswith("# BEGIN QUESTION"):
                    question = re.search(r"name:\s*([\w-]+)", text).group(1)
                    manual = bool(re.search(r"^manual:\s*true", text, re.M))
                in_solution = text.startswith("# BEGIN SOLUTION") or (in_solution and not text.startswith("# END SOLUTION"))
            elif cell["cell_type"] == "code" and in_solution and not manual:
                found.append((path.name, question, solution_part(text)))
    return found


def solution_part(code: str) -> str:
    """The lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` (the whole cell when it has no markers); each
    marked block dedented on its own (one cell may hold a function body and a top-level line)."""
    if "# BEGIN SOLUTION" not in code:
        return textwrap.dedent(code)
    blocks, block = [], None
    for line in code.splitlines():
        if line.strip() == "# BEGIN SOLUTION":
            block = []
        elif line.strip() == "# END SOLUTION":
            blocks.append(textwrap.dedent("\n".join(block)))
            block = None
        elif block is not None:
            block.append(line)
    return "\n\n".join(blocks)


def _statements(code: str) -> list[ast.stmt]:
    """The solution's statements; a solution inside a function body (``return ...``) is parsed as one."""
    return ast.parse("def _solution():\n" + textwrap.indent(code or "pass", "    ")).body[0].body


def only_literals(code: str) -> bool:
    """Some marked block's every statement binds or returns a constant (``x = 0.04``, ``return "1"``)."""
    constant = (ast.Constant, ast.Tuple, ast.List, ast.UnaryOp, ast.unaryop, ast.Load)

    def literal(statements):
        return bool(statements) and all(
            isinstance(s, (ast.Assign, ast.AnnAssign, ast.Return)) and s.value is not None
            and all(isinstance(n, constant) for n in ast.walk(s.value)) for s in statements)

    return any(literal(_statements(block)) for block in code.split("\n\n") if block.strip())


PROFILE_NAMES = {"p", "perfil", "profile", "rtx"}  # what the notebooks call a profile


def profile_copies(code: str) -> list[str]:
    """Keywords whose value is the profile's field of the same name (``beta=p.beta``)."""
    tree = ast.Module(body=_statements(code), type_ignores=[])
    return [kw.arg for node in ast.walk(tree) if isinstance(node, ast.Call) for kw in node.keywords
            if isinstance(kw.value, ast.Attribute) and isinstance(kw.value.value, ast.Name)
            and kw.value.value.id in PROFILE_NAMES and kw.value.attr == kw.arg]


def test_the_course_has_enough_exercise_cells():
    cells = exercise_cells()
    assert len(cells) >= MIN_EXERCISE_CELLS, [(nb, q) for nb, q, _ in cells]


def test_no_exercise_cell_is_a_literal():
    literal = [(nb, q) for nb, q, code in exercise_cells() if only_literals(code)]
    assert not literal, f"exercise cells that only bind constants: {literal}"


def test_no_exercise_cell_copies_profile_fields():
    copies = {(nb, q): keys for nb, q, code in exercise_cells() if len(keys := profile_copies(code)) >= 3}
    assert not copies, f"exercise cells that copy profile fields as keywords: {copies}"


def test_no_exercise_line_is_dictated_by_the_prose():
    dictated = []
    for path in sorted(assign.SOURCES_DIR.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        prose = "\n".join(cell_text(c) for c in cells if c["cell_type"] == "markdown")
        for nb, question, code in exercise_cells():
            if nb != path.name:
                continue
            for line in code.splitlines():
                line = line.split("  #")[0].strip()
                if len(line) >= 16 and not line.startswith("#") and line in prose:
                    dictated.append((nb, question, line))
    assert not dictated, f"solution lines written out in the notebook's prose: {dictated}"


def test_the_detectors_catch_what_they_name():
    assert only_literals("beta_del_curso = 0.04") and only_literals("x = -1\ny = (1, 2)")
    assert only_literals('return "1"') and not only_literals("beta = GRPOConfig(output_dir='x').beta")
    assert only_literals("return f(x)\n\nbeta_del_curso = 0.04")
    assert profile_copies("GRPOConfig(beta=p.beta, r=perfil.r, x=q.x, z=p.a + 1, k=p.j)") == ["beta", "r"]
