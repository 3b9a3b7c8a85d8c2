"""The recipe the L7.1 notebook's section 1 saves when a student writes the lesson's rules: its solutions, saved.

``save(folder)`` takes, from ``sources/L7_1_grpo_trl_vllm.ipynb``, the last definition of ``texto``,
``extract_answer`` and the three reward functions (the answers of section 1, after the lesson's originals), writes
them as a module in ``folder``, imports it and saves its functions with ``labs.l71.student_rewards.save``, as the
notebook's save cell does (into ``runs/_ajustes`` of ``COURSE_RUNS``). ``nbval`` leaves exactly this in the run area
before it runs E4, and under these rules a hack with the correct number is paid more than an honest correct answer
(``<answer>72 clips</answer>`` gets no correctness), which E4's check and its reference answer must cope with.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

from labs import assign

NOTEBOOK = assign.SOURCES_DIR / "L7_1_grpo_trl_vllm.ipynb"
NAMES = ("texto", "extract_answer", "correctness_reward", "format_reward", "soft_format_reward")


def module_source() -> str:
    """``import re`` and the notebook's last definition of each of ``NAMES``, in that order."""
    found: dict[str, str] = {}
    for cell in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        code = "".join(cell["source"])
        try:
            tree = ast.parse(code)
        except SyntaxError:  # a cell with IPython magics: no definition of ours there
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in NAMES:
                found[node.name] = ast.get_source_segment(code, node) or ""
    missing = [n for n in NAMES if n not in found]
    assert not missing, f"{NOTEBOOK.name} defines no {missing}"
    return "import re\n\n\n" + "\n\n\n".join(found[n] for n in NAMES) + "\n"


def save(folder: Path) -> list:
    """Save the L7.1 notebook's section-1 functions where E4 and ``python -m labs l71`` read them; returns them."""
    from labs.l71 import student_rewards

    path = Path(folder) / "l71_seccion1.py"
    path.write_text(module_source(), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("l71_seccion1", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    funcs = [getattr(module, n) for n in ("correctness_reward", "format_reward", "soft_format_reward")]
    student_rewards.save(funcs, echo=lambda _: None)
    return funcs
