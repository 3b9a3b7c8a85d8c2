"""Property-based fuzzing of the rewards package with hypothesis.

Hypothesis draws a byte string and ``decode_batch`` turns it into a batch of completions plus an
``answer`` column: tagged text, chat messages, malformed messages, scalars, near-valid
think/answer structures with tags dropped or repeated, arbitrary code points (lone surrogates
included). Drawing bytes rather than nested strategies keeps an example under a millisecond, so
10,000 of them fit in the test budget, and hypothesis still shrinks a failure to a short byte
string (which decodes to a short batch).

For every example: each reward function returns one float per completion, every value from its
documented set, and never raises; the readers return their documented types. The test counts the
examples it ran and checks that every reward value did occur, so it cannot pass vacuously.
"""

from __future__ import annotations

import math
from decimal import Decimal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewards import (
    REWARD_VALUES,
    completion_text,
    correctness_reward,
    extract_answer,
    format_reward,
    parse_gold,
    parse_number,
    soft_format_reward,
)

EXAMPLES = 10_000

# Pieces that reach the parser's and the format checks' branches far more often than random text.
PIECES = [
    "<think>", "</think>", "<answer>", "</answer>", "<answer", "think>", "42", "-7", "\u22127", "1,000",
    "1,00", "18.00", "1.000", "1e3", ".5", " ", "\n", "$", "\\$", "\\boxed{", "\\text{", "\\frac", "}",
    "**", "%", "!", "k", " million", " or ", "x", "\uff14\uff12", "\u00b2", "\u00bd", "\u0664", "\u221a",
    "\ud800", "\x00", ".", ",", "-", "\u2013", "\u00a0", "####", "a", "\t",
]
SCALARS = [None, 0, 42, -1, 3.5, math.nan, math.inf, True, b"<answer>42</answer>", object()]
ROLES = ["assistant", "assistant", "user", "tool", None, 7]
GOLDS = [42, -7, 1000, 0]
ALLOWED = {
    "correctness_reward": {0.0, REWARD_VALUES["correctness_reward"]},
    "format_reward": {0.0, REWARD_VALUES["format_reward"]},
    "soft_format_reward": {0.0, 0.1, 0.2, 0.3, 0.4},
}


class Reader:
    """Hands out the drawn bytes one at a time; 0 once they run out (so shrinking simplifies)."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int = 256) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1] % n

    def number(self) -> int:
        n = self.take() * 256 + self.take()
        return -n if self.take(4) == 0 else n


def decode_text(r: Reader) -> str:
    parts = []
    for _ in range(r.take(10)):
        b = r.take()
        if b < len(PIECES):
            parts.append(PIECES[b])
        elif b < 150:
            parts.append(str(r.number()))
        elif b < 200:
            parts.append(str(GOLDS[b % len(GOLDS)]))
        else:  # any code point, surrogates included
            parts.append(chr((r.take() * 65536 + r.take() * 256 + r.take()) % 0x110000))
    return "".join(parts)


def decode_structured(r: Reader) -> str:
    """A think/answer completion; each byte flag drops or repeats a piece."""
    flags = r.take()
    think = "" if flags & 1 else decode_text(r)
    answer = str(GOLDS[r.take(len(GOLDS))]) if flags & 2 else decode_text(r)
    text = ("" if flags & 4 else "<think>") + think + "</think>\n<answer>" + answer + "</answer>"
    if flags & 8:
        text = text + text  # repeated blocks
    if flags & 16:
        text = decode_text(r) + text
    if flags & 32:
        text = text + decode_text(r)
    return text


def decode_message(r: Reader):
    message = {}
    role = r.take(len(ROLES) + 1)
    if role < len(ROLES):
        message["role"] = ROLES[role]
    kind = r.take(6)
    if kind <= 1:
        message["content"] = decode_structured(r) if kind else decode_text(r)
    elif kind == 2:
        message["content"] = SCALARS[r.take(len(SCALARS))]
    elif kind == 3:
        message["content"] = [
            {"type": ["text", "image"][r.take(2)], "text": decode_text(r)} for _ in range(r.take(3))
        ]
    elif kind == 4:
        message["content"] = [decode_text(r)]
    return message  # kind 5: no content at all


def decode_completion(r: Reader):
    kind = r.take(9)
    if kind <= 1:
        return decode_text(r)
    if kind <= 3:
        return decode_structured(r)
    if kind == 4:
        return [decode_message(r) for _ in range(r.take(4))]
    if kind == 5:
        return [{"role": "assistant", "content": decode_structured(r)}]
    if kind == 6:
        return decode_message(r)
    if kind == 7:
        return SCALARS[r.take(len(SCALARS))]
    return [decode_text(r) for _ in range(r.take(3))]  # a list of strings is malformed


def decode_gold(r: Reader):
    kind = r.take(7)
    n = GOLDS[r.take(len(GOLDS))] if r.take(2) else r.number()
    return [str(n), f"{n:,}", f"Work: <<6*7=42>>.\n#### {n}", n, decode_text(r), float(n), None][kind]


def decode_batch(data: bytes):
    r = Reader(data)
    completions = [decode_completion(r) for _ in range(r.take(7))]
    kind = r.take(6)
    if kind <= 2:
        answer = [decode_gold(r) for _ in range(len(completions) + r.take(3) - 1)]  # short, exact, long
    elif kind == 3:
        answer = None
    elif kind == 4:
        answer = decode_text(r)  # a string is not a column
    else:
        answer = tuple(decode_gold(r) for _ in completions)
    return completions, answer


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.binary(max_size=160))
def _fuzz_once(data, seen):
    completions, answer = decode_batch(data)
    seen["examples"] += 1
    for function in (correctness_reward, format_reward, soft_format_reward):
        name = function.__name__
        out = function(completions, answer=answer, prompts=None, completion_ids=None)
        assert isinstance(out, list)
        assert len(out) == len(completions)
        for value in out:
            assert type(value) is float
            assert value in ALLOWED[name], (name, value)
        seen[name].update(out)
        seen["completions"] += len(out)
    for completion in completions:
        text = completion_text(completion)
        assert isinstance(text, str)
        value = extract_answer(completion)
        assert value is None or (isinstance(value, Decimal) and value.is_finite())
        number = parse_number(text)
        assert number is None or (isinstance(number, Decimal) and number.is_finite())
    for gold in answer if isinstance(answer, (list, tuple)) else [answer]:
        try:
            assert isinstance(parse_gold(gold), int)
        except (ValueError, TypeError):
            pass


def test_fuzz_reward_functions_and_readers():
    seen = {"examples": 0, "completions": 0, **{name: set() for name in ALLOWED}}
    _fuzz_once(seen=seen)
    # at least 10,000 generated batches went through each of the three functions ...
    assert seen["examples"] >= EXAMPLES, seen["examples"]
    assert seen["completions"] >= 3 * EXAMPLES
    # ... and every value each function can pay did occur: the properties were not checked vacuously
    for name, allowed in ALLOWED.items():
        assert seen[name] == allowed, (name, sorted(seen[name]))
