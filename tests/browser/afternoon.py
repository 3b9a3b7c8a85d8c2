"""The student's afternoon in JupyterLab, in a real browser (issue 52): ``make test-browser``, a CI leg of its own.

For every student notebook in notebooks/, in course order, on the ``ci`` profile with an empty runs folder:

1. **Run All** on the notebook as generated (every exercise a stub);
2. where it has exercises, the solutions (from sources/) are **typed into the answer cells** through the page, each
   answer cell is run and then its ``grader.check`` cell, whose result must be "correcto";
3. the cells that waited for the exercises (``ejercicios_hechos(`` and the like) are **run again**, in order, as a
   student would, up to the first that trains a run (``STOP_AT``: the terminal's job, or nbval's).

After each step the notebook is saved from the page and read back: no cell may show a traceback, English library
noise or an output over the cap (``tests/wrong_answers``: ``LIBRARY_NOISE``, ``MAX_OUTPUT_LINES``), a check says
"correcto" in Spanish, and nothing trains (no ``metrics.jsonl`` under the runs folder).

Artifacts: ``BROWSER_ARTIFACTS`` (default ``<pytest's tmp>/browser``) gets a screenshot of the page after Run All and
of every check cell, and ``summary.json`` (per notebook: Run All seconds, the longest output, the checks run). Not
committed. Run it alone (``make test-browser``); it is not part of ``make test``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: wrong_answers
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/browser/: lab_page

from lab_page import Lab, NotebookPage, chromium  # noqa: E402
from wrong_answers import cell_text, library_noise, long_outputs, output_lines  # noqa: E402

from labs import assign  # noqa: E402

# Course order (the Makefile's NOTEBOOKS): a later notebook may read what an earlier one left.
NOTEBOOKS = ("00_empieza_aqui", "00b_apendice", "L6_de_policy_gradient_a_grpo", "L7_1_grpo_trl_vllm",
             "L7_2_unsloth_standby", "L7_3_mas_alla_de_una_gpu", "E1_tamano_de_grupo", "E2_reward_hacking",
             "E3_peso_kl", "E4_tu_recompensa", "C2b_rubrica")
# A cell waits for the student's exercises when it calls one of these.
WAITS = ("ejercicios_hechos(", "recompensa_hecha(")
# The first waiting cell that trains a run (minutes on ci): the re-run stops before it.
STOP_AT = {
    "L7_1_grpo_trl_vllm": "l71.open_run(",
    "L7_2_unsloth_standby": "train_and_evaluate(",
    "E1_tamano_de_grupo": "sweep.read_or_run(",
    "E2_reward_hacking": "sweep.read_or_run(",
    "E3_peso_kl": "sweep.read_or_run(",
    "E4_tu_recompensa": "train_or_read(",
}
RUN_ALL_TIMEOUT_S = 900
CELL_TIMEOUT_S = 600
# otter's English frame and Python's: what a check's output must not show
ENGLISH = re.compile(r"Traceback|Test case failed|Error at line|results:|passed!|Error:|Exception")
MARKERS = re.compile(r"^\s*# (BEGIN|END) (SOLUTION|PROMPT)\s*$")


def solutions(name: str) -> list[tuple[str, str]]:
    """(cell type, text) of each solution in the source notebook, in order: what the student writes in each answer
    cell (otter's markers dropped; a prompt block, the stub the student reads, dropped with them)."""
    cells = json.loads((assign.SOURCES_DIR / f"{name}.ipynb").read_text(encoding="utf-8"))["cells"]
    out, inside = [], False
    for cell in cells:
        text = cell_text(cell)
        if cell["cell_type"] == "raw" and text.startswith("# BEGIN SOLUTION"):
            inside = True
        elif cell["cell_type"] == "raw" and text.startswith("# END SOLUTION"):
            inside = False
        elif inside:
            lines, prompt = [], False
            for line in text.splitlines():
                if re.match(r"^\s*# BEGIN PROMPT", line):
                    prompt = True
                elif re.match(r"^\s*# END PROMPT", line):
                    prompt = False
                elif not prompt and not MARKERS.match(line):
                    lines.append(re.sub(r"\s*# SOLUTION$", "", line))
            out.append((cell["cell_type"], "\n".join(lines).strip("\n")))
    return out


def problems(nb: dict, runs: Path) -> list[str]:
    """What a student must not see in the saved notebook, and no run trained."""
    node = nbformat.from_dict(nb)
    found = [f"traceback in {cell_text(c)[:60]!r}: {o.get('ename')}: {o.get('evalue')}" for c in node.cells
             for o in c.get("outputs", []) if o.get("output_type") == "error"]
    found += [f"library noise in {where!r}: {line}" for where, line in library_noise(node)]
    found += long_outputs(node)
    found += [f"a run trained: {p}" for p in runs.glob("*/metrics.jsonl")]
    return found


def longest(nb: dict) -> tuple[int, str]:
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    return max(((output_lines(c.get("outputs", [])), cell_text(c)[:60]) for c in cells), default=(0, ""))


def shown(cell: dict) -> str:
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/html", "")) + str(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


@pytest.fixture(scope="module")
def afternoon(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    work = tmp_path_factory.mktemp("afternoon")
    root, runs = work / "notebooks", work / "runs"
    shutil.copytree(assign.STUDENT_DIR, root)
    runs.mkdir()
    artifacts = Path(os.environ.get("BROWSER_ARTIFACTS") or work / "browser")
    artifacts.mkdir(parents=True, exist_ok=True)
    lab = Lab(root, runs, locale="es_ES")  # JupyterLab in Spanish (its language pack, requirements.txt)
    summary: dict = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            yield {"page": page, "lab": lab, "runs": runs, "artifacts": artifacts, "summary": summary}
        finally:
            (artifacts / "summary.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False))
            print(f"\nbrowser artifacts: {artifacts}")
            browser.close()
            lab.close()


# L6's kernel takes optimizer steps: §6's one real GRPOTrainer step at Run All and §8's accumulation check (two micro-
# batches, one step) when its cell runs again after the answers; seconds each, but tests/conftest.py wants the mark.
TRAINS = {"L6_de_policy_gradient_a_grpo"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.trains) if n in TRAINS else n for n in NOTEBOOKS])
def test_the_students_afternoon(name, afternoon):
    """One notebook of the afternoon: Run All untouched, the answers typed and checked, the waiting cells re-run; what
    the page shows after each step read back from the saved notebook."""
    page, lab, runs, artifacts = afternoon["page"], afternoon["lab"], afternoon["runs"], afternoon["artifacts"]
    record = afternoon["summary"][name] = {}
    nb_page = NotebookPage(page, lab, f"{name}.ipynb")
    try:
        record["run_all_s"] = round(nb_page.run_all(RUN_ALL_TIMEOUT_S), 1)
        nb_page.screenshot(None, artifacts / name / "00-run-all.png")
        nb = nb_page.save()
        record["longest_output"] = longest(nb)
        assert not problems(nb, runs), problems(nb, runs)

        answers = [i for i, c in enumerate(nb["cells"]) if "otter_answer_cell" in c["metadata"].get("tags", [])]
        written = solutions(name)
        assert len(answers) == len(written), (name, len(answers), len(written))
        record["checks"] = {}
        for index, (kind, text) in zip(answers, written):
            assert nb["cells"][index]["cell_type"] == kind, (name, index)
            nb_page.type_into(index, text)
            nb_page.run_cell(index, CELL_TIMEOUT_S)
            check = next((j for j in range(index + 1, len(nb["cells"]))
                          if "grader.check(" in cell_text(nb["cells"][j])), None)
            if check is None or any(j in answers for j in range(index + 1, check)):
                continue  # a written answer (a prediction): no check of its own
            nb_page.run_cell(check, CELL_TIMEOUT_S)
            question = re.search(r'grader\.check\("([\w-]+)"\)', cell_text(nb["cells"][check])).group(1)
            nb_page.screenshot(check, artifacts / name / f"check-{question}.png")
            said = shown(nb_page.save()["cells"][check])
            record["checks"][question] = "correcto" if "correcto" in said and "aún no" not in said else said[:300]
            assert record["checks"][question] == "correcto", (question, said[:500])
            assert not ENGLISH.search(said), (question, said[:500])

        waiting = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and i not in answers
                   and any(w in cell_text(c) for w in WAITS)]
        rerun = []
        for index in waiting:
            if name in STOP_AT and STOP_AT[name] in cell_text(nb["cells"][index]):
                break
            started = time.perf_counter()
            nb_page.run_cell(index, CELL_TIMEOUT_S)
            rerun.append((cell_text(nb["cells"][index])[:50], round(time.perf_counter() - started, 1)))
        record["rerun"] = rerun
        after = nb_page.save()
        record["longest_output_after"] = longest(after)
        assert not problems(after, runs), problems(after, runs)
        nb_page.screenshot(None, artifacts / name / "99-after-answers.png")
    finally:
        nb_page.close()
