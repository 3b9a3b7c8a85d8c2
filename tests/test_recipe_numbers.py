"""Numbers from the recipe (issue 51, item 5): the notebooks never state a number of the course's recipe as the
student's. The student chooses beta, the learning rate, the loss and the reward functions in the L7.1 notebook; a
sentence that fixed them (E3 "La receta usa beta = 0.04", E2 "la receta de la lección", E4 "junto a las tres del
curso", L7.1 §12 "20 veces el ritmo del curso") was wrong for every other recipe. Reads the sources' text only."""

from __future__ import annotations

import json
import re

import pytest

from labs import assign

# (notebook, a phrase that states the course's recipe as the student's)
FIXED = [
    ("E3_peso_kl.ipynb", r"receta usa\s+beta\s*=\s*0[.,]04"),
    ("E3_peso_kl.ipynb", r"beta = 0\.2, 0\.04 y 0\.0"),
    ("E2_reward_hacking.ipynb", r"control es la receta de la lección"),
    ("E4_tu_recompensa.ipynb", r"junto a\s+las tres del curso"),
    ("E4_tu_recompensa.ipynb", r"con las tres recompensas del curso más la tuya"),
    ("L7_1_grpo_trl_vllm.ipynb", r"20 veces el ritmo del curso"),
    ("L7_1_grpo_trl_vllm.ipynb", r"referencia \(`beta` = 0\.04\)"),
]


@pytest.mark.parametrize("notebook, phrase", FIXED, ids=[p for _, p in FIXED])
def test_no_sentence_fixes_the_courses_number_for_the_students_recipe(notebook, phrase):
    cells = json.loads((assign.SOURCES_DIR / notebook).read_text(encoding="utf-8"))["cells"]
    text = " ".join(" ".join("".join(c["source"]).split()) for c in cells)
    assert not re.search(phrase, text), phrase
