"""Issue 40, item 1: the README is for the course's readers, short, and says how to reach the first notebook."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_WORDS = 1500


def test_the_readme_is_short():
    assert len(README.split()) <= MAX_WORDS  # what `wc -w` counts


def test_it_says_how_to_open_the_first_notebook_on_each_stack():
    for line in ("make setup", "source .venv-gpu/bin/activate", "source .venv/bin/activate",
                 "jupyter lab notebooks/00_empieza_aqui.ipynb"):
        assert line in README, line
    for requirements in ("requirements.txt", "requirements-gpu.txt"):  # `jupyter` installs JupyterLab
        assert re.search(r"^jupyter==", (ROOT / requirements).read_text(), flags=re.M), requirements


def test_it_names_the_two_commands_and_the_graders_command():
    assert "make        #" in README and "make test   #" in README
    assert "python -m labs grade entregas/ --out notas/" in README
    from labs.grading.report import CLASS_REPORT_NAME, CSV_NAME

    assert CSV_NAME in README and CLASS_REPORT_NAME in README


def test_one_spelling_of_the_course_command_and_no_measured_figures():
    assert ".venv/bin/python -m labs" not in README and ".venv-gpu/bin/python -m labs" not in README
    assert not re.findall(r"\d+ min \d+ s|\d[\d.,]* ?GiB|\d+ passed", README)  # figures live in docs/benchmarks/


def test_its_links_exist():
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        assert (ROOT / target).exists(), target
