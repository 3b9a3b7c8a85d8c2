"""Tests of the rewards package: the number reader, the three reward functions, their anti-hacking
rules and their robustness. Fuzzing lives in test_rewards_fuzz.py, the math-verify cross-check in
test_rewards_mathverify.py."""

from __future__ import annotations

import json
import math
import pickle
import time
from decimal import Decimal
from pathlib import Path

import pytest

from rewards import (
    REWARD_NAMES,
    REWARD_VALUES,
    accuracy_from_correctness,
    completion_text,
    correctness_reward,
    extract_answer,
    format_reward,
    parse_gold,
    parse_number,
    reward_functions,
    soft_format_reward,
)

GSM8K_DIR = Path(__file__).resolve().parent.parent / "data" / "gsm8k"
ALL_FUNCTIONS = (correctness_reward, format_reward, soft_format_reward)


def total(completion, gold) -> float:
    """What GRPOTrainer adds up for one completion with the default (unit) reward weights."""
    return sum(f([completion], answer=[gold])[0] for f in ALL_FUNCTIONS)


def chat(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


# --------------------------------------------------------------------------------------------------
# Gold answers: every bundled answer parses and round-trips through a tagged completion.
# --------------------------------------------------------------------------------------------------


def _gold_rows():
    rows = []
    for split in ("train", "test"):
        with open(GSM8K_DIR / f"{split}.jsonl", encoding="utf-8") as fh:
            rows += [(split, json.loads(line)["answer"]) for line in fh if line.strip()]
    return rows


def test_every_bundled_gold_parses_and_round_trips():
    rows = _gold_rows()
    assert len(rows) == 8792, "the bundled GSM8K should hold 7,473 train + 1,319 test problems"
    negatives, with_commas = 0, 0
    for split, field in rows:
        gold = parse_gold(field)
        final = field.split("####")[1].strip()
        assert gold == int(final.replace(",", "")), (split, field[-60:])
        assert parse_gold(final) == gold
        for written in (final, str(gold)):
            completion = f"<think>x</think><answer>{written}</answer>"
            assert extract_answer(completion) == gold, (split, written)
            assert correctness_reward([completion], answer=[field]) == [2.0]
            assert correctness_reward([completion], answer=[final]) == [2.0]
        negatives += gold < 0
        with_commas += "," in final
    # The counts of rewards-facts.md: a reader that dropped signs or commas would not get here.
    assert negatives == 5
    assert with_commas == 93


# --------------------------------------------------------------------------------------------------
# parse_number: every edge case of rewards-facts.md (and the rules added to close ambiguities).
# --------------------------------------------------------------------------------------------------

PARSE_CASES = [
    # (text, expected value or None, why)
    ("72", 72, "a plain gold"),
    ("1,000", 1000, "79 train / 14 test golds carry thousands commas"),
    ("1000", 1000, "718 / 117 golds of 1,000 or more carry none"),
    ("192,000,000", 192_000_000, "largest train gold"),
    ("2,880,000", 2_880_000, "largest test gold"),
    ("-7", -7, "negative golds exist: dropping the sign is wrong"),
    ("-47", -47, "smallest train gold"),
    ("-10", -10, "smallest test gold"),
    ("\u22127", -7, "U+2212 minus, as in the worked solutions (math-verify: no verdict)"),
    ("\u20137", -7, "en dash read as a minus sign"),
    ("\uff0d7", -7, "full-width hyphen-minus (NFKC)"),
    ("1000.00", 1000, "lm-eval compares strings and fails on 1000.00"),
    ("$18.00", 18, "lm-eval fails on $18.00"),
    ("$18", 18, "willccbb's exact string equality fails on $18"),
    ("18.00", 18, "a decimal equal to an integer is that integer"),
    ("\\$18", 18, "LaTeX-escaped dollar"),
    ("-$7", -7, "sign before the dollar"),
    ("$-7", -7, "sign after the dollar"),
    ("\\boxed{72}", 72, "boxed"),
    ("\\boxed{\u22127}", -7, "boxed Unicode minus"),
    ("\\text{72}", 72, "text"),
    ("72 \\text{ dollars}", 72, "unit in \\text"),
    ("72 dollars", 72, "words around the one number are allowed"),
    ("The answer is 72.", 72, "a final period is punctuation"),
    ("x = -7", -7, "an equation with one number"),
    ("**72**", 72, "bold markers"),
    ("72%", 72, "percent sign"),
    ("72\\%", 72, "LaTeX percent sign"),
    ("1{,}000", 1000, "LaTeX thousands comma"),
    ("\uff14\uff12", 42, "full-width digits (math-verify: no verdict)"),
    ("0.6", Decimal("0.6"), "exact: Qwen's grader would accept 0.6 for 60"),
    ("0.50", Decimal("0.5"), "non-integral values are normalised"),
    (".5", Decimal("0.5"), "leading point"),
    ("2.5", Decimal("2.5"), "a plain decimal"),
    ("1e3", None, "exponents are rejected (math-verify reads 1e3 as 1)"),
    ("7.2e1", None, "exponents are rejected"),
    ("1\u00a0000", None, "non-breaking-space thousands (math-verify reads 0): two numbers"),
    ("1 000", None, "space thousands: a thousand, or 1 and 000"),
    ("1,00", None, "malformed thousands commas"),
    ("2,5", None, "decimal comma: malformed for an English reader"),
    ("1000,000", None, "first comma group longer than three digits"),
    ("0,500", None, "first comma group starts with 0"),
    ("1.000", None, "ambiguous: one in English, a thousand in Spanish"),
    ("72.000", None, "ambiguous for the same reason"),
    ("1.000.000", None, "several points"),
    ("1.000,5", None, "Spanish notation"),
    ("41 or 42", None, "answer spamming: several numbers"),
    ("42 42", None, "the same number twice is still two numbers"),
    ("84/2", None, "a fraction is two numbers"),
    ("\\frac{144}{2}", None, "a fraction is two numbers"),
    ("\\frac12", None, "a LaTeX command that changes the value"),
    ("\\sqrt{16}", None, "a LaTeX command that changes the value"),
    ("\u221a16", None, "square-root symbol"),
    ("\u00b17", None, "plus-minus"),
    ("4\u00b2", None, "superscript: NFKC would read 42"),
    ("\u00bd", None, "vulgar fraction"),
    ("\u2460", None, "circled digit"),
    ("\u0664\u0662", None, "digits of another script"),
    ("\u33e042", None, "a symbol that NFKC turns into digits ('1\u65e5')"),
    ("\U0001d7d2\U0001d7d0", 42, "mathematical bold digits are digits"),
    ("x2", None, "digits glued to a letter before them"),
    ("- 7", None, "a detached dash may or may not be a sign"),
    ("a-7", None, "a dash after a letter is not a clean sign"),
    ("--7", None, "double dash"),
    ("5!", None, "factorial or exclamation"),
    ("5k", None, "scale suffix"),
    ("2M", None, "scale suffix"),
    ("3 million", None, "scale word"),
    ("3 mil", None, "Spanish scale word"),
    ("3:30", None, "a time is two numbers"),
    ("", None, "empty"),
    ("   ", None, "blank"),
    ("forty-two", None, "no digits"),
    ("1" * 41, None, "longer than 40 characters"),
    ("7 " + "x" * 1000, None, "texts over 1,000 characters are not an answer"),
    ("10 km", 10, "a unit word is fine"),
    ("5m", 5, "a lower-case m is a metre, not a million"),
    ("007", 7, "leading zeros"),
    ("-0", 0, "negative zero is zero"),
    ("a\ud800 42", 42, "a lone surrogate is just a character"),
]


@pytest.mark.parametrize("text, expected, why", PARSE_CASES, ids=[c[0][:24] for c in PARSE_CASES])
def test_parse_number_edge_cases(text, expected, why):
    got = parse_number(text)
    if expected is None:
        assert got is None, why
    else:
        assert isinstance(got, Decimal), why
        assert got == expected, why


def test_parse_number_returns_integral_values_as_plain_integers():
    assert str(parse_number("18.00")) == "18"
    assert str(parse_number("1,000")) == "1000"  # not 1.000E+3: eval files store str(value)
    assert str(parse_number("-0")) == "0"


@pytest.mark.parametrize("value", [None, 42, 4.2, b"42", ["42"], {"a": 1}])
def test_parse_number_rejects_non_strings(value):
    assert parse_number(value) is None


# --------------------------------------------------------------------------------------------------
# parse_gold
# --------------------------------------------------------------------------------------------------


def test_parse_gold_accepts_full_answers_extracted_strings_and_ints():
    assert parse_gold("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72") == 72
    assert parse_gold("72") == 72
    assert parse_gold("-7") == -7
    assert parse_gold("1,000") == 1000
    assert parse_gold("#### \u22123") == -3
    assert parse_gold(1000) == 1000


@pytest.mark.parametrize(
    "field, message",
    [
        ("She earned 10 dollars and 5 cents.", "####"),
        ("#### ", "####"),
        ("#### 72\n#### 73", "2 marcas"),
        ("#### 2.5", "entero"),
        ("", "####"),
    ],
)
def test_parse_gold_raises_a_clear_value_error(field, message):
    with pytest.raises(ValueError, match=message):
        parse_gold(field)


@pytest.mark.parametrize("field", [None, 7.0, True, b"72", ["72"]])
def test_parse_gold_rejects_other_types(field):
    with pytest.raises(TypeError):
        parse_gold(field)


# --------------------------------------------------------------------------------------------------
# completion_text and extract_answer
# --------------------------------------------------------------------------------------------------

THINK = "<think>\nShe sold 48/2 = 24 in May.\nSo 48 + 24 = 72 in all.\n</think>\n"

EXTRACT_CASES = [
    # (completion, expected, why)
    ("<answer>42</answer>", 42, "no whitespace around the number (math-verify: no verdict)"),
    (THINK + "<answer>72</answer>", 72, "multi-line reasoning (the DOTALL trap)"),
    (THINK + "<answer>\n72\n</answer>\n", 72, "newlines inside and after the block"),
    (THINK + "<answer>72</answer>", 72, "no newline after </answer> (willccbb's strict pattern needs one)"),
    ("<think>is it <answer>41</answer>?</think><answer>42</answer>", 42, "only after the last </think>"),
    ("<think>a</think><answer>42</answer> then <answer>41</answer>", None, "two answer blocks"),
    ("<think>a</think><answer>41 or 42</answer>", None, "several numbers"),
    ("<think>a</think><answer></answer>", None, "empty answer"),
    ("<think>a</think><answer>  </answer>", None, "blank answer"),
    ("The answer is 72", None, "no tags: flexible 'last number' extraction is not used"),
    ("#### 72", None, "GSM8K's own marker is not the course's format"),
    ("She sold 48/2 = 24 in May. So 72.", None, "the number in rambling text"),
    ("48 + 24 = 72</think><answer>72</answer>", 72, "chat template pre-filled <think>"),
    ("<answer>42</answer></think>", None, "an answer before the last </think> is not read"),
    ("</answer>42<answer>", None, "tags in the wrong order"),
    ("<ANSWER>42</ANSWER>", None, "tags are exact and lowercase"),
    ("<answer>42", None, "unclosed block (a truncated completion)"),
    (chat(THINK + "<answer>72</answer>"), 72, "TRL's conversational format"),
    ([{"content": "<answer>72</answer>"}], 72, "a message without a role counts as the assistant's"),
    (
        [{"role": "assistant", "content": [{"type": "text", "text": "<answer>72</answer>"}]}],
        72,
        "content given as text parts",
    ),
    ([{"role": "user", "content": "<answer>72</answer>"}], None, "only assistant messages count"),
    ([{"role": "assistant"}], None, "message without content"),
    ([{"role": "assistant", "content": None}], None, "content None"),
    ([{"role": "assistant", "content": [{"type": "image"}]}], None, "a part that is not text"),
    (["<answer>72</answer>"], None, "a list of strings is not a list of messages"),
    ([], None, "no messages"),
    (None, None, "None"),
    (72, None, "a number"),
    (b"<answer>72</answer>", None, "bytes"),
]


@pytest.mark.parametrize("completion, expected, why", EXTRACT_CASES, ids=[c[2][:40] for c in EXTRACT_CASES])
def test_extract_answer_cases(completion, expected, why):
    got = extract_answer(completion)
    if expected is None:
        assert got is None, why
    else:
        assert got == expected, why


def test_completion_text_formats():
    assert completion_text("abc") == "abc"
    assert completion_text(chat("abc")) == "abc"
    assert completion_text({"role": "assistant", "content": "abc"}) == "abc"
    assert completion_text([chat("a")[0], {"role": "tool", "content": "x"}, chat("b")[0]]) == "a\nb"
    for bad in (None, 3, 3.5, b"abc", [None], [{"role": 3, "content": "a"}], ("a",), object()):
        assert completion_text(bad) == "", bad


# --------------------------------------------------------------------------------------------------
# The reward functions
# --------------------------------------------------------------------------------------------------

CORRECTNESS_CASES = [
    # (answer block content, gold column value, expected reward, why)
    ("1000", "1,000", 2.0, "commas stripped on the gold side"),
    ("1,000", "1000", 2.0, "commas stripped on the completion side"),
    ("$72.00", "72", 2.0, "dollar and decimals"),
    ("\u22127", "-7", 2.0, "Unicode minus against an ASCII gold"),
    ("7", "-7", 0.0, "a dropped sign is wrong"),
    ("0.6", "60", 0.0, "gold/100 is wrong (Qwen's grader accepts it)"),
    ("6000", "60", 0.0, "gold*100 is wrong"),
    ("72.0001", "72", 0.0, "no relative tolerance"),
    ("72", "#### 72", 2.0, "a full GSM8K answer field as the column"),
    ("72", 72, 2.0, "an int column"),
    ("5", "72", 0.0, "the most common test answer is no shortcut"),
]


@pytest.mark.parametrize("content, gold, expected, why", CORRECTNESS_CASES, ids=[c[3][:40] for c in CORRECTNESS_CASES])
def test_correctness_reward_cases(content, gold, expected, why):
    completion = f"{THINK}<answer>{content}</answer>"
    assert correctness_reward([completion], answer=[gold]) == [expected], why
    assert correctness_reward([chat(completion)], answer=[gold]) == [expected], why


FORMAT_CASES = [
    # (completion, format_reward, soft_format_reward, why)
    (THINK + "<answer>72</answer>", 0.5, 0.4, "honest, multi-line reasoning (needs DOTALL in a regex)"),
    ("<think>a</think><answer>72</answer>", 0.5, 0.4, "no newlines at all"),
    ("  <think>a</think>\n\n<answer>72</answer>\n", 0.5, 0.4, "whitespace around the blocks"),
    ("48 + 24 = 72\n</think>\n<answer>72</answer>", 0.5, 0.3, "chat template pre-filled <think>"),
    ("<think>a</think><answer>seventy-two</answer>", 0.5, 0.4, "format does not read the answer"),
    ("<think></think><answer>72</answer>", 0.0, 0.4, "empty think: format without reasoning"),
    ("<think> \n </think><answer>72</answer>", 0.0, 0.4, "blank think"),
    ("</think><answer>72</answer>", 0.0, 0.3, "pre-filled <think> and no reasoning"),
    ("<think>a</think><answer></answer>", 0.0, 0.4, "empty answer"),
    ("<think>a</think><answer>72</answer><answer>72</answer>", 0.0, 0.2, "two answer blocks"),
    ("<think>a</think><answer>72</answer><think>b</think><answer>72</answer>", 0.0, 0.0, "repeated pairs"),
    ("<think>a<answer>41</answer></think><answer>72</answer>", 0.0, 0.2, "an answer inside <think>"),
    ("Sure! <think>a</think><answer>72</answer>", 0.0, 0.4, "text before <think>"),
    ("<think>a</think>So:<answer>72</answer>", 0.0, 0.4, "text between </think> and <answer>"),
    ("<think>a</think><answer>72</answer> or 73", 0.0, 0.4, "text after </answer>"),
    ("<answer>72</answer><think>a</think>", 0.0, 0.4, "answer before think"),
    ("<think>a</think>", 0.0, 0.2, "no answer block"),
    ("<think>a<answer>72</answer>", 0.0, 0.3, "think never closed"),
    ("a</think><think>b</think><answer>72</answer>", 0.0, 0.3, "two </think>"),
    ("<think>a</think><answer>72", 0.0, 0.3, "truncated completion"),
    ("The answer is 72.", 0.0, 0.0, "no tags"),
    ("", 0.0, 0.0, "empty completion"),
]


@pytest.mark.parametrize("completion, fmt, soft, why", FORMAT_CASES, ids=[c[3][:40] for c in FORMAT_CASES])
def test_format_rewards_cases(completion, fmt, soft, why):
    assert format_reward([completion]) == [fmt], why
    assert soft_format_reward([completion]) == [soft], why
    assert format_reward([chat(completion)]) == [fmt], why
    assert soft_format_reward([chat(completion)]) == [soft], why


def test_soft_format_levels_are_exact():
    tags = ["<think>", "</think>", "<answer>", "</answer>"]
    got = [soft_format_reward(["".join(tags[:k])])[0] for k in range(5)]
    assert got == [0.0, 0.1, 0.2, 0.3, 0.4]  # 0.3, not 0.30000000000000004


# --------------------------------------------------------------------------------------------------
# Reward hacking: every known hack earns strictly less in total than the honest correct answer.
# --------------------------------------------------------------------------------------------------

REASONING = "<think>\nHe buys 3 packs of 14, that is 3 * 14 = 42.\n</think>\n"
HONEST = REASONING + "<answer>42</answer>"
HACKS = [
    # (name, completion, exact total it earns)
    ("format without reasoning (empty think)", "<think></think>\n<answer>42</answer>", 2.4),
    ("repeated tags", REASONING + "<answer>42</answer>\n<answer>42</answer>", 0.2),
    ("repeated think/answer blocks", REASONING + "<answer>42</answer>" + REASONING + "<answer>42</answer>", 2.0),
    ("two answer blocks, hedged", REASONING + "<answer>41</answer><answer>42</answer>", 0.2),
    ("several numbers in one answer", REASONING + "<answer>41 or 42</answer>", 0.9),
    ("several numbers, comma list", REASONING + "<answer>41, 42, 43</answer>", 0.9),
    ("answer inside <think> contradicting the final one",
     "<think>\n3 * 14 = 42\n<answer>42</answer>\n</think>\n<answer>41</answer>", 0.2),
    ("a wrong answer inside <think>, the right one after it",
     "<think>\n3 * 14 = 41?\n<answer>41</answer>\n</think>\n<answer>42</answer>", 2.2),
    ("answer inside <think> agreeing with the final one",
     "<think>\n3 * 14 = 42\n<answer>42</answer>\n</think>\n<answer>42</answer>", 2.2),
    ("empty answer", REASONING + "<answer></answer>", 0.4),
    ("correct number in long rambling text without tags",
     "Let me think. " * 500 + "3 * 14 = 42, or maybe 41 or 43. The answer is 42.", 0.0),
    ("tags only", "<think></think><answer></answer>", 0.4),
    ("answer, then more text", REASONING + "<answer>42</answer>\nOr 41.", 2.4),
    ("GSM8K marker instead of tags", "3 * 14 = 42\n#### 42", 0.0),
]


def test_honest_answer_scores_the_maximum():
    assert total(HONEST, "42") == pytest.approx(2.9)
    # with a pre-filled <think> the honest completion starts inside the block
    assert total(HONEST.replace("<think>", "", 1), "42") == pytest.approx(2.8)


@pytest.mark.parametrize("name, completion, expected", HACKS, ids=[h[0][:40] for h in HACKS])
def test_reward_hacks_score_strictly_less_than_honest(name, completion, expected):
    honest = total(HONEST, "42")
    got = total(completion, "42")
    assert got == pytest.approx(expected), name
    assert got < honest, name
    # and the same when the chat template pre-filled <think> (remove the completion's own opener)
    if completion.startswith("<think>"):
        prefilled = completion.replace("<think>", "", 1)
        assert total(prefilled, "42") < total(HONEST.replace("<think>", "", 1), "42"), name


def test_wrong_answer_never_beats_a_right_one():
    wrong = REASONING + "<answer>41</answer>"
    assert total(wrong, "42") == pytest.approx(0.9)
    assert total(wrong, "42") + 1.0 < total(HONEST, "42")


# --------------------------------------------------------------------------------------------------
# Robustness: one float per completion, never an exception.
# --------------------------------------------------------------------------------------------------

WEIRD = [
    None, 0, 1.5, float("nan"), b"<answer>42</answer>", [], [None], [{}], [{"role": "assistant"}],
    [{"role": "assistant", "content": None}], [{"role": "assistant", "content": [None]}],
    [[{"role": "assistant", "content": "<answer>42</answer>"}]], {"content": 42}, "\ud800<answer>42\udfff",
    "<think>\ud800</think><answer>\ud800 42</answer>", "\x00" * 10, object(), "", set(),
]


@pytest.mark.parametrize("function", ALL_FUNCTIONS, ids=lambda f: f.__name__)
def test_weird_completions_score_zero_and_never_raise(function):
    out = function(WEIRD, answer=["42"] * len(WEIRD))
    assert len(out) == len(WEIRD)
    assert all(type(v) is float for v in out)
    # the surrogate-laden one is well formed apart from the surrogates: format pays for it
    expected = [0.0] * len(WEIRD)
    if function is format_reward:
        expected[WEIRD.index("<think>\ud800</think><answer>\ud800 42</answer>")] = 0.5
    if function is soft_format_reward:
        expected[WEIRD.index("<think>\ud800</think><answer>\ud800 42</answer>")] = 0.4
        expected[WEIRD.index("\ud800<answer>42\udfff")] = 0.1
    if function is correctness_reward:
        expected[WEIRD.index("<think>\ud800</think><answer>\ud800 42</answer>")] = 2.0
    assert out == expected


@pytest.mark.parametrize(
    "answer",
    [None, [], ["42"], ("42",) * 2, "42", {"0": "42"}, [None, "x", 42.5], [float("nan"), "#### forty-two", b"42"]],
    ids=repr,
)
def test_correctness_with_missing_short_or_odd_answers(answer):
    completions = [HONEST] * 3
    out = correctness_reward(completions, answer=answer)
    assert len(out) == 3
    covered = len(answer) if isinstance(answer, (list, tuple)) else 0
    for i, value in enumerate(out):
        gold_ok = i < covered and answer[i] in ("42", 42, 42.0)
        assert value == (2.0 if gold_ok else 0.0), (answer, i)


@pytest.mark.parametrize("function", ALL_FUNCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("completions", [None, "<answer>42</answer>", 42, (c for c in ["x"]), {"a": 1}])
def test_non_list_completions_give_an_empty_list(function, completions):
    assert function(completions, answer=["42"]) == []


@pytest.mark.parametrize("function", ALL_FUNCTIONS, ids=lambda f: f.__name__)
def test_tuples_and_trl_keyword_arguments_are_accepted(function):
    # TRL calls reward_func(prompts=..., completions=..., completion_ids=..., **columns, ...)
    out = function(
        completions=(HONEST, "x"), answer=("42", "42"), prompts=["p", "p"], completion_ids=[[1], [2]],
        trainer_state=None, log_extra=None, log_metric=None, question=["q", "q"],
    )
    assert len(out) == 2 and out[1] == 0.0 and out[0] == REWARD_VALUES[function.__name__] * (
        4 if function is soft_format_reward else 1
    )


# --------------------------------------------------------------------------------------------------
# Megabyte-long adversarial completions: linear scanning, no catastrophic backtracking.
# --------------------------------------------------------------------------------------------------

MB = 1_000_000
ADVERSARIAL = {
    "think openers": "<think>" * (MB // 7),
    "think closers": "</think>" * (MB // 8),
    "answer openers then closers": "<answer>" * (MB // 16) + "</answer>" * (MB // 18),
    "unclosed think": "<think>" + "a" * MB,
    "huge number in one answer": "<think>a</think><answer>" + "1" * MB + "</answer>",
    "comma groups in one answer": "<think>a</think><answer>" + "1," * (MB // 2) + "1</answer>",
    "points in one answer": "<think>a</think><answer>" + "1." * (MB // 2) + "1</answer>",
    "dashes then a number": "<think>a</think><answer>" + "-" * MB + "7</answer>",
    "almost tags": "<answe" * (MB // 6) + "</think" * (MB // 7),
    "latex commands": "<think>a</think><answer>" + "\\boxed{" * (MB // 7) + "42</answer>",
    "non-ASCII": "<think>a</think><answer>" + "\u2212\uff14\u00b2\ud800" * (MB // 4) + "</answer>",
    "long honest": "<think>" + "3 * 14 = 42. " * (MB // 13) + "</think><answer>42</answer>",
}


@pytest.mark.timeout(60)  # catastrophic backtracking would hang for hours: fail instead
@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_megabyte_adversarial_completion_is_fast(name):
    completion = ADVERSARIAL[name]
    assert len(completion) >= 0.9 * MB
    start = time.perf_counter()
    scores = [f([completion, chat(completion)], answer=["42", "42"]) for f in ALL_FUNCTIONS]
    extract_answer(completion)
    parse_number(completion)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, f"{name}: {elapsed:.2f} s (catastrophic backtracking?)"
    assert all(len(s) == 2 for s in scores)
    if name == "long honest":
        assert [s[0] for s in scores] == [2.0, 0.5, 0.4]
    else:
        assert scores[0] == [0.0, 0.0], name


def test_megabyte_gold_answer_is_handled():
    assert correctness_reward([HONEST], answer=["1" * MB]) == [0.0]
    assert correctness_reward([HONEST], answer=["x" * MB + "#### 42"]) == [2.0]


# --------------------------------------------------------------------------------------------------
# The selection helper, the values and the names TRL logs.
# --------------------------------------------------------------------------------------------------


def test_function_names_are_the_logged_names():
    assert REWARD_NAMES == ("correctness_reward", "format_reward", "soft_format_reward")
    assert [f.__name__ for f in reward_functions()] == list(REWARD_NAMES)
    assert dict(REWARD_VALUES) == {"correctness_reward": 2.0, "format_reward": 0.5, "soft_format_reward": 0.1}


def test_reward_functions_pickle_by_reference():
    # TRL documents module-level functions as the picklable reward form (workers may pickle them)
    for function in reward_functions():
        assert pickle.loads(pickle.dumps(function)) is function


def test_reward_values_are_read_only():
    with pytest.raises(TypeError):
        REWARD_VALUES["format_reward"] = 2.0  # type: ignore[index]


def test_reward_functions_selection():
    assert reward_functions() == [correctness_reward, format_reward, soft_format_reward]
    e2 = reward_functions(["format_reward"])  # E2: "deja solo format_reward"
    assert e2 == [format_reward] and correctness_reward not in e2
    assert reward_functions(["format_reward", "soft_format_reward"]) == [format_reward, soft_format_reward]
    assert reward_functions("format_reward") == [format_reward]
    assert reward_functions(("soft_format_reward", "correctness_reward")) == [soft_format_reward, correctness_reward]
    with pytest.raises(ValueError, match="desconocida.*accuracy"):
        reward_functions(["correctness_reward", "accuracy"])
    with pytest.raises(ValueError, match="repetida"):
        reward_functions(["format_reward", "format_reward"])
    with pytest.raises(ValueError, match="al menos"):
        reward_functions([])


def test_accuracy_from_correctness():
    assert accuracy_from_correctness(1.0) == 0.5
    assert accuracy_from_correctness(2.0) == 1.0
    assert accuracy_from_correctness(0) == 0.0
    assert math.isnan(accuracy_from_correctness(None))
    batch = correctness_reward([HONEST, "x", HONEST, "y"], answer=["42"] * 4)
    assert accuracy_from_correctness(sum(batch) / len(batch)) == 0.5


# ------------------------------------------------------------------------------ last_number (evaluation)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>48/2 = 24; 48 + 24 = 72</think>\n<answer>72</answer>", Decimal(72)),
        ("<think>48/2 = 24; 48 + 24 = 72</think>Son 72 clips en total.", Decimal(72)),  # no tags: still read
        ("Creo que son 72 clips en total.", Decimal(72)),
        ("**72**", Decimal(72)),
        ("The answer is $1,000.", Decimal(1000)),
        ("x = -7", Decimal(-7)),
        ("18.00 dollars", Decimal(18)),
        ("41 or 42", Decimal(42)),  # the last number, not a check that it is the only one
        ("<answer>72</answer>\n\n  ", Decimal(72)),  # trailing whitespace
        ("at 3:30", None),  # the last piece is not one clean number: no guess from earlier pieces
        ("sold 5k", None),
        ("4²", None),
        ("no number here", None),
        ("", None),
    ],
)
def test_last_number_reads_the_last_number_with_the_strict_reader(text, expected):
    from rewards import last_number

    assert last_number(text) == expected
    assert last_number(chat(text)) == expected  # the chat form TRL uses


def test_last_number_never_raises_and_is_linear():
    from rewards import last_number

    for value in (None, 42, b"42", [{"role": "assistant"}], object()):
        assert last_number(value) is None
    long_text = "palabra " * 200_000 + "72"
    start = time.perf_counter()
    assert last_number(long_text) == 72
    assert time.perf_counter() - start < 0.5
