"""The bundled GSM8K copy and the course's deterministic subsets."""

import hashlib
import json

import pytest

from labs.training import data
from labs.core.paths import GSM8K_DIR
from labs.core.profiles import get_profile


def test_bundled_counts_and_checksums_match_the_source_note():
    note = (GSM8K_DIR / "SOURCE.md").read_text()
    for split, count in (("train", 7473), ("test", 1319)):
        path = GSM8K_DIR / f"{split}.jsonl"
        assert sum(1 for _ in open(path)) == count
        assert hashlib.sha256(path.read_bytes()).hexdigest() in note
    assert (GSM8K_DIR / "LICENSE").read_text().startswith("MIT License")


@pytest.mark.parametrize("split", data.SPLITS)
def test_every_gold_answer_parses_and_rows_have_the_course_columns(split):
    rows = data.load_split(split)
    assert len(rows) == {"train": 7473, "test": 1319}[split]
    for i, row in enumerate(rows):
        assert row["id"] == f"gsm8k-{split}-{i:05d}"
        assert str(int(row["answer"])) == row["answer"]
        assert "####" not in row["solution"]
        assert row["prompt"][0] == {"role": "system", "content": data.SYSTEM_PROMPT}
        assert row["prompt"][1] == {"role": "user", "content": row["question"]}


def test_negative_and_comma_answers_are_read_exactly():
    answers = {r["answer"] for r in data.load_split("train")}
    assert {"-7", "-12", "-47"} <= answers


def test_subsets_are_deterministic_and_disjoint():
    profile = get_profile("cpu")
    a = data.course_splits(profile)
    b = data.course_splits(profile)
    assert [r["id"] for r in a["train"]] == [r["id"] for r in b["train"]]
    assert [r["id"] for r in a["eval"]] == [r["id"] for r in b["eval"]]
    fmt, train = {r["id"] for r in a["format"]}, {r["id"] for r in a["train"]}
    assert len(fmt) == profile.format_pass_examples and len(train) == profile.train_size
    assert not fmt & train
    assert all(r["id"].startswith("gsm8k-test-") for r in a["eval"])
    other = data.course_splits(profile.replace(data_seed=7))
    assert [r["id"] for r in other["train"]] != [r["id"] for r in a["train"]]


def test_too_large_subset_is_a_clear_error():
    with pytest.raises(data.DataError, match="train_size"):
        data.course_splits(get_profile("ci").replace(train_size=10_000))


def test_long_prompts_are_filtered_with_a_count(capsys):
    class WordTokenizer:  # counts words; enough to exercise the filter without a model
        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            return " ".join(m["content"] for m in messages).split()

    rows = [data.to_row("train", 0, "short question", "x #### 1"),
            data.to_row("train", 1, "word " * 400, "y #### 2")]
    kept = data.filter_long_prompts(rows, WordTokenizer(), 100, "GRPO")
    assert [r["id"] for r in kept] == ["gsm8k-train-00000"]
    assert "descarto 1 de 2" in capsys.readouterr().out


def test_missing_or_malformed_bundled_file_says_what_to_do(tmp_path):
    with pytest.raises(data.DataError, match="data/gsm8k"):
        data.read_bundled("train", tmp_path)
    (tmp_path / "train.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(data.DataError, match="línea 1"):
        data.read_bundled("train", tmp_path)


def test_hub_route_falls_back_to_the_bundled_copy_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    rows = data.load_split("test", source="hub")
    assert len(rows) == 1319 and rows[0]["id"] == "gsm8k-test-00000"
