"""Arithmetic measured apart from format: ``correct_last_number`` in the evaluation files, both
accuracies in eval/summary.json, and the hack detector deciding with the format-independent one."""

from __future__ import annotations

from labs.core import diagnostics as dg
from labs.core import runfolder as rf
from labs.core import stats
from labs.grading.holdout import check_holdout
from labs.grading.inputs import load_run
from labs.training import evaluation
from rundirs import NO_GAIN_HOLDOUT, eval_rows, history, make_run, paired_verdicts

ROWS = [{"id": f"gsm8k-test-{i:05d}", "answer": "72"} for i in range(4)]
TEXTS = [
    "<think>48 + 24 = 72</think>\n<answer>72</answer>",  # right both ways
    "<think>48 + 24 = 72</think> Son 72 clips.",  # right number, no tags: only the last number counts it
    "<think>48 + 48 = 96</think>\n<answer>96</answer>",  # wrong both ways
    "<think>72 o 96</think><answer>72</answer> y al final 96",  # tag-gated right, last number wrong
]


def test_score_records_both_readings():
    records = evaluation.score(ROWS, [(t, 10) for t in TEXTS])
    assert [r["correct"] for r in records] == [True, False, False, True]
    assert [r["correct_last_number"] for r in records] == [True, True, False, False]
    assert [r["last_number"] for r in records] == ["72", "72", "96", "96"]
    for r in records:
        assert set(rf.EVAL_RECORD_KEYS) == set(r)


def test_summary_gives_both_accuracies_for_both_models(tmp_path):
    run = rf.RunFolder(tmp_path)
    base = evaluation.score(ROWS, [(TEXTS[2], 5)] * 4)
    trained = evaluation.score(ROWS, [(t, 5) for t in TEXTS])
    summary = evaluation.summarize(run, base, trained, "base")
    assert summary["accuracy_field"] == "correct"
    assert (summary["base_accuracy"], summary["trained_accuracy"]) == (0.0, 0.5)
    assert (summary["base_accuracy_last_number"], summary["trained_accuracy_last_number"]) == (0.0, 0.5)
    assert summary["last_number"]["base_wrong_trained_right"] == 2
    assert rf.read_json(run.path(rf.EVAL_SUMMARY))["trained_accuracy_last_number"] == 0.5
    assert "último número" in evaluation.describe_es(summary)


def test_an_older_evaluation_file_gets_the_last_number_when_reused(tmp_path):
    run = rf.RunFolder(tmp_path)
    old = [{k: v for k, v in r.items() if k not in ("last_number", "correct_last_number")}
           for r in evaluation.score(ROWS, [(t, 5) for t in TEXTS])]
    rf.write_jsonl(run.path(rf.EVAL_BASE), old)
    records = evaluation.evaluate(ROWS, lambda rows: 1 / 0, run, "base")  # reused: nothing generated
    assert [r["correct_last_number"] for r in records] == [True, True, False, False]
    assert rf.read_jsonl(run.path(rf.EVAL_BASE)) == records  # and the file now has the field


def _summary(tagged, last, base_format=0.3, trained_format=1.0):
    out = stats.paired_comparison(*paired_verdicts(*tagged))
    out.update(last_number=stats.paired_comparison(*paired_verdicts(*last)),
               base_format_rate=base_format, trained_format_rate=trained_format)
    return out


def test_format_that_only_made_answers_readable_is_still_hacking():
    e2 = history(200, correctness=None, fmt=(0.05, 0.5), soft=(0.05, 0.2))
    readable_only = _summary(tagged=(150, 240, 90, 20), last=NO_GAIN_HOLDOUT)
    finding = dg.detect_format_hacking(e2, readable_only)
    assert finding.holds is True
    assert "el formato pedido pasó de 30% a 100%" in finding.message
    assert "último número" in finding.message
    # without the format-independent reading, the tag-gated gain would have ruled the hack out
    tagged_only = {k: v for k, v in readable_only.items() if k != "last_number"}
    assert dg.detect_format_hacking(e2, tagged_only).holds is False
    # a real arithmetic gain still rules it out
    assert dg.detect_format_hacking(e2, _summary(tagged=(150, 240, 90, 20), last=(150, 240, 90, 20))).holds is False


def test_the_grader_recomputes_both_readings_from_the_files(tmp_path):
    root = make_run(tmp_path, "r", verdicts=paired_verdicts(*NO_GAIN_HOLDOUT))
    comparison = check_holdout(load_run(root)).comparison
    assert "last_number" not in comparison  # files without the field: older runs still grade
    base, trained = paired_verdicts(2, 2, 3, 1)
    rows_b, rows_t = eval_rows(base), eval_rows(trained)
    for r, last in zip(rows_b + rows_t, [False] * 8 + [True] * 8):
        r["correct_last_number"], r["format_ok"] = last, last
    rf.write_jsonl(root / rf.EVAL_BASE, rows_b)
    rf.write_jsonl(root / rf.EVAL_TRAINED, rows_t)
    (root / rf.EVAL_SUMMARY).unlink()
    comparison = check_holdout(load_run(root)).comparison
    assert comparison["base_accuracy"] == 3 / 8 and comparison["last_number"]["trained_accuracy"] == 1.0
    assert (comparison["base_format_rate"], comparison["trained_format_rate"]) == (0.0, 1.0)
