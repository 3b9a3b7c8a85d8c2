"""labs.training.completions picks one prompt across training and one holdout problem before/after.

The files here have the layout TRL 1.x writes (tests/test_l71_run.py checks that on a real run);
these tests pin the choice rules on cases a 2-step run cannot produce (a prompt generated at several steps).
"""

import pandas as pd

from labs.core.runfolder import write_json, write_jsonl
from labs.training import completions


def chat(role, text):
    return [{"role": role, "content": text}]


def write_step(root, step, groups):
    rows = []
    for question, texts in groups.items():
        for i, text in enumerate(texts):
            rows.append({"step": step, "prompt": chat("user", question), "completion": chat("assistant", text),
                         "correctness_reward": 2.0 * (i == 0), "format_reward": 0.5, "advantage": 0.1 * i})
    where = root / "checkpoints" / "completions"
    where.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(where / f"completions_{step:05d}.parquet")


def test_a_prompt_seen_at_several_steps_is_followed_first_middle_last(tmp_path):
    write_json(tmp_path / "run.json", {"reward_functions": ["correctness_reward", "format_reward"]})
    for step in range(1, 10):
        groups = {f"q{step}": ["a", "b"]}
        if step in (2, 4, 6, 9):
            groups["repetida"] = [f"bien {step}", f"mal {step}"]
        write_step(tmp_path, step, groups)
    samples, same = completions.over_training(tmp_path)
    assert same and [s.step for s in samples] == [2, 4, 9] and {s.question for s in samples} == {"repetida"}
    best, worst = samples[-1].completions
    assert best.text == "bien 9" and best.total == 2.5 and worst.total == 0.5 and worst.advantage == 0.1
    assert "El mismo problema en 3 pasos" in completions.over_training_es(samples, same)


def test_without_a_repeated_prompt_each_step_shows_its_own(tmp_path):
    for step in (1, 2, 3, 4, 5):
        write_step(tmp_path, step, {f"q{step}": ["x"]})
    samples, same = completions.over_training(tmp_path)
    assert not same and [(s.step, s.question) for s in samples] == [(1, "q1"), (3, "q3"), (5, "q5")]
    assert "cada paso muestra el suyo" in completions.over_training_es(samples, same)
    assert completions.over_training(tmp_path / "nada") == ([], False)


def record(pid, correct, text):
    return {"id": pid, "gold": 72, "extracted": "72" if correct else "9", "correct": correct, "format_ok": True,
            "length": 5, "completion": text}


def test_before_after_prefers_a_problem_that_improved(tmp_path):
    assert completions.before_after(tmp_path) is None  # no evaluation yet
    write_jsonl(tmp_path / "eval" / "base.jsonl", [record("a", True, "x"), record("b", False, "antes"), record("c", True, "y")])
    write_jsonl(tmp_path / "eval" / "trained.jsonl", [record("a", False, "x2"), record("b", True, "después"), record("c", True, "y")])
    pair = completions.before_after(tmp_path, questions={"b": "¿cuántos?"})
    assert (pair.id, pair.base["completion"], pair.trained["completion"], pair.question) == ("b", "antes", "después", "¿cuántos?")
    text = completions.before_after_es(pair)
    assert "Modelo base: falla" in text and "Modelo entrenado: acierta" in text
    assert completions.before_after(tmp_path, "c").id == "c"
