"""The reward functions a student writes in L7.1's section 1 are what ``python -m labs l71`` trains.

``labs.l71.student_rewards`` saves them (with the helpers and imports they use) to ``runs/_ajustes/l71-recompensas.py``;
the terminal command and the notebook's ``open_run`` load them, under the lesson's names (the grader reads
``rewards/<name>/mean``), and ``run.json`` records them as the student's with their source's SHA-256. One test
trains a ci run for real with a deliberately distinguishable function (marked ``trains``).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from labs.core import runfolder as rf
from labs.core.profiles import get_profile
from labs.l71 import student_rewards
from rewards import REWARD_NAMES, reward_functions
from rewards.own import describe_reward_functions

from rundirs import GOOD_HOLDOUT, history, make_run, paired_verdicts

REPO = Path(__file__).resolve().parent.parent
PAID = 0.3  # what the student's format_reward pays every completion: the course's (0 or 0.5 each) never averages 0.3 over 4


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    return tmp_path


# The student's section 1, as a notebook defines them: helpers, a lenient regex, a tuple from one of them.
def extract_answer(text: str):
    m = re.search(r"<answer>\s*(-?\d[\d,]*)\s*</answer>", text)
    return m.group(1).replace(",", "") if m else None


def texto(completion):
    return completion if isinstance(completion, str) else completion[0]["content"]


def correctness_reward(completions, answer, **kwargs):
    return [2.0 if extract_answer(texto(c)) == gold else 0.0 for c, gold in zip(completions, answer)]


def format_reward(completions, **kwargs):
    return tuple(PAID for _ in completions)


def soft_format_reward(completions, **kwargs):
    return [0.1 * (("<think>" in texto(c)) + ("<answer>" in texto(c))) for c in completions]


STUDENT = [correctness_reward, format_reward, soft_format_reward]


def test_the_saved_functions_come_back_under_the_lessons_names_and_are_recorded_as_the_students(runs):
    said = []
    path = student_rewards.save(STUDENT, echo=said.append)
    assert path == runs / "_ajustes" / "l71-recompensas.py" and "python -m labs l71" in said[0]
    text = path.read_text()
    assert "def texto(" in text and "def extract_answer(" in text and "import re" in text and f"PAID = {PAID}" in text
    funcs, where = student_rewards.load(echo=said.append)
    assert where == path and [f.__name__ for f in funcs] == list(REWARD_NAMES)
    assert all(f is not g for f, g in zip(funcs, STUDENT))  # loaded from the file, not the test's objects
    assert "[recompensas] Entrenan tus funciones del cuaderno L7.1" in said[-1] and "--recompensas-del-curso" in said[-1]
    chat = [[{"role": "assistant", "content": "<think>\nuno\ndos\n</think><answer>18</answer>"}]]
    assert funcs[0](chat, answer=["18"]) == [2.0] and funcs[1](chat) == (PAID,)
    records = describe_reward_functions(funcs, REWARD_NAMES)
    assert all(r["own"] and r["file"] == str(path) and len(r["source_sha256"]) == 64 for r in records)
    assert not any(r["own"] for r in describe_reward_functions(reward_functions(), REWARD_NAMES))  # the course's


def test_nothing_saved_means_the_course_functions(runs):
    assert student_rewards.load() == (None, None)


@pytest.mark.parametrize("funcs, message", [
    ([texto], "con los nombres de la lección"),
    ([correctness_reward, correctness_reward], "cada una una vez"),
])
def test_saving_other_functions_is_refused_in_spanish(runs, funcs, message):
    with pytest.raises(ValueError, match=message):
        student_rewards.save(funcs)
    assert not student_rewards.reward_file().exists()


def test_a_function_using_what_a_file_cannot_hold_is_refused(runs):
    notebook = {"__name__": "__main__", "tabla": {"72": 2.0}}  # a notebook global the function reads
    exec("def correctness_reward(completions, answer, **kwargs):\n    return [tabla.get(a, 0.0) for a in answer]\n", notebook)
    with pytest.raises(ValueError, match="«tabla» \\(dict\\), que no puedo copiar"):
        student_rewards.save([notebook["correctness_reward"]])
    assert not student_rewards.reward_file().exists()


@pytest.mark.parametrize("content, message", [
    ("def correctness_reward(:\n", "línea 1"),
    ("def correctness_reward(completions, **kwargs):\n    return []\n", "no tiene una lista FUNCIONES"),
    ("FUNCIONES = ['correctness_reward']\n", "ninguna función llamada 'correctness_reward'"),
])
def test_a_bad_saved_file_stops_with_what_to_do_and_is_left_alone(runs, content, message):
    path = student_rewards.reward_file()
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as err:
        student_rewards.load()
    assert "sección 1" in str(err.value) and "--recompensas-del-curso" in str(err.value)
    assert path.read_text() == content


def test_the_terminal_loads_them_and_the_flag_trains_the_course_functions(runs, capsys):
    from labs.l71 import main

    make_run(runs, "l71-ci", metrics=history(2), max_steps=2, profile="ci", verdicts=paired_verdicts(*GOOD_HOLDOUT))
    student_rewards.save(STUDENT, echo=lambda _: None)
    assert main(["--profile", "ci"]) == 0
    assert "[recompensas] Entrenan tus funciones del cuaderno L7.1" in capsys.readouterr().out
    assert main(["--profile", "ci", "--recompensas-del-curso"]) == 0
    assert "[recompensas]" not in capsys.readouterr().out
    student_rewards.reward_file().write_text("def correctness_reward(:\n")
    assert main(["--profile", "ci"]) == 2  # before any model loads, with the Spanish message
    assert "no se pueden usar" in capsys.readouterr().err


@pytest.mark.cpu_stack  # open_run checks the machine for a CPU profile: the GPU stack's vLLM refuses it
def test_the_notebook_opens_its_run_with_the_saved_functions(runs, capsys):
    from labs.l71 import open_run

    student_rewards.save(STUDENT, echo=lambda _: None)
    lab = open_run(get_profile("ci"))  # no run yet: on a CPU profile the notebook trains here (nothing loads yet)
    assert [f.__module__.startswith("_recompensa_propia_") for f in lab.reward_funcs] == [True] * 3
    assert not open_run(get_profile("ci"), listo=False).run.root.exists()  # an unwritten exercise opens nothing


@pytest.mark.trains
def test_a_saved_student_reward_trains_in_the_terminal_run(runs):
    """The only test that trains a saved L7.1 reward file: one ci step of ``python -m labs l71`` (a real trainer),
    whose metrics carry the student's ``format_reward`` (a constant no course function can average to) and whose
    run.json records the three as the student's, with the SHA-256 of the saved source."""
    student_rewards.save(STUDENT, echo=lambda _: None)
    env = {**__import__("os").environ, "COURSE_RUNS": str(runs), "COURSE_PROFILE": "ci"}
    # No vLLM engine: the rewards are called the same way, and the engine's start is most of a one-step run's time.
    done = subprocess.run([sys.executable, "-m", "labs", "l71", "--set", "max_steps=1", "--set", "save_steps=1",
                           "--set", "use_vllm=false"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[recompensas] Entrenan tus funciones del cuaderno L7.1" in done.stdout
    root = runs / "l71-ci"
    metrics = [json.loads(line) for line in (root / rf.METRICS_JSONL).read_text().splitlines()]
    steps = [m for m in metrics if "rewards/format_reward/mean" in m]
    assert steps and all(m["rewards/format_reward/mean"] == pytest.approx(PAID) for m in steps)
    record = rf.read_json(root / rf.RUN_JSON)
    assert record["reward_functions"] == list(REWARD_NAMES)
    saved = student_rewards.reward_file()
    for source in record["reward_sources"]:
        assert source["own"] is True and source["file"] == str(saved)
        assert source["source_sha256"] == hashlib.sha256(source["source"].encode()).hexdigest()
        assert source["source"] in saved.read_text()
    from labs.grading import grade_run

    graded = grade_run(root)
    assert graded.own_rewards == []  # the lesson's names: not E4's level-4 evidence
    assert any("Función propia format_reward: archivo l71-recompensas.py" in e for e in graded.criterion(4).evidence)
