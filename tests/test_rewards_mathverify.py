"""Independent cross-check of correctness_reward against math-verify (a test-only dependency).

The corpus: GSM8K test problems whose worked solution becomes the reasoning of a completion
(``<think>solution</think><answer>X</answer>``), and X is the gold written with one controlled
perturbation: commas, dollars, bold, decimals, LaTeX, a Unicode minus, a wrong number, several
numbers... math-verify does not know the course's tags, so it reads X alone (padded with spaces,
which it needs); the course reads the whole completion. Wherever math-verify returns a verdict the
two must agree, except for the perturbations listed in KNOWN_DISAGREEMENTS, each with the verdicts
expected on both sides and the reason. An entry that no longer occurs fails the test too, so the
list cannot go stale.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

math_verify = pytest.importorskip("math_verify")

from rewards import correctness_reward  # noqa: E402

TEST_JSONL = Path(__file__).resolve().parent.parent / "data" / "gsm8k" / "test.jsonl"
FULLWIDTH = str.maketrans("0123456789", "\uff10\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18\uff19")


def _digits(g: int) -> str:
    return str(abs(g))


# name -> gold int -> the answer block's content (None: the perturbation does not apply to g)
PERTURBATIONS = {
    "plain": lambda g: str(g),
    "commas": lambda g: f"{g:,}",
    "dollar": lambda g: f"${g:,}" if g >= 0 else f"-${-g:,}",
    "dollar decimals": lambda g: f"${g:,}.00" if g >= 0 else None,
    "latex dollar": lambda g: f"\\${g}",
    "bold": lambda g: f"**{g}**",
    "decimals": lambda g: f"{g}.00",
    "one decimal": lambda g: f"{g}.0",
    "boxed": lambda g: f"\\boxed{{{g}}}",
    "unit in text": lambda g: f"{g} \\text{{ dollars}}",
    "sentence": lambda g: f"The answer is {g}.",
    "percent": lambda g: f"{g}%",
    "unicode minus": lambda g: f"\u2212{abs(g)}",
    "full-width digits": lambda g: str(g).translate(FULLWIDTH),
    "wrong: plus one": lambda g: str(g + 1),
    "wrong: times 100": lambda g: str(g * 100),
    "wrong: over 100": lambda g: str(Decimal(g) / 100),
    "wrong: sign flipped": lambda g: str(-g) if g else None,
    "wrong: half more": lambda g: f"{g}.5",
    "malformed commas": lambda g: f"{_digits(g)[:-2]},{_digits(g)[-2:]}" if abs(g) >= 100 else None,
    "non-breaking-space thousands": lambda g: f"{g:,}".replace(",", "\u00a0") if g >= 1000 else None,
    "several numbers": lambda g: f"{g - 1} or {g}",
    "three zero decimals": lambda g: f"{g}.000" if abs(g) < 1000 else None,
    "exponent": lambda g: f"{g}e0",
    "fraction": lambda g: f"\\frac{{{2 * g}}}{{2}}",
    "space thousands": lambda g: f"{g:,}".replace(",", " ") if g >= 1000 else None,
    "exclamation": lambda g: f"{g}!",
}

# perturbation -> (course verdict, math-verify verdict, why they differ). The course is stricter in
# every case: for a reward, paying a wrong or ambiguous answer is worse than refusing a right one.
KNOWN_DISAGREEMENTS = {
    "several numbers": (
        False, True,
        "'41 or 42': math-verify accepts when any extracted candidate matches; the course pays only "
        "an answer holding exactly one number, or hedging would be rewarded (answer spamming)",
    ),
    "three zero decimals": (
        False, True,
        "'72.000': one to three digits, a point and three zeros is 72 in English and 72,000 in "
        "Spanish, the course's language; the course refuses to guess",
    ),
    "exponent": (
        False, True,
        "'72e0': exponents are rejected (no GSM8K answer needs one, and math-verify reads '1e3' as 1, "
        "so its verdicts on exponents are not trustworthy either)",
    ),
    "fraction": (
        False, True,
        "'\\frac{144}{2}': the course reads one number and computes nothing; a fraction is two numbers "
        "and the prompt asks for the final number",
    ),
    "space thousands": (
        False, True,
        "'1 000': a space inside a number could also separate two numbers; math-verify joins the "
        "groups, the course rejects the form",
    ),
    "exclamation": (
        False, True,
        "'72!': could be a factorial (an integer GSM8K answer could be one); math-verify ignores the "
        "mark, the course rejects it",
    ),
}


def _corpus():
    """GSM8K test problems: every 15th one, every negative gold and the 20 largest golds."""
    rows = [json.loads(line) for line in TEST_JSONL.read_text(encoding="utf-8").splitlines() if line]
    finals = [row["answer"].split("####")[1].strip() for row in rows]
    golds = [int(f.replace(",", "")) for f in finals]
    chosen = set(range(0, len(rows), 15))
    chosen |= {i for i, g in enumerate(golds) if g < 0}
    chosen |= set(sorted(range(len(rows)), key=lambda i: golds[i])[-20:])
    for i in sorted(chosen):
        solution, _ = rows[i]["answer"].split("####")
        reasoning = re.sub(r"<<[^>]*>>", "", solution).strip()  # drop the calculator notes
        yield rows[i]["answer"], finals[i], golds[i], reasoning


def _math_verify(gold_parsed, content: str):
    """math-verify's verdict on one answer, or None when it extracts nothing."""
    predicted = math_verify.parse(f" {content} ")
    if not predicted:
        return None
    return bool(math_verify.verify(gold_parsed, predicted))


def test_correctness_agrees_with_math_verify():
    verdicts, no_verdict = Counter(), Counter()
    observed = defaultdict(list)
    unexplained = []
    for field, final, gold, reasoning in _corpus():
        gold_parsed = math_verify.parse(f" {final} ")
        assert gold_parsed, final  # math-verify reads every gold of the sample
        for kind, perturb in PERTURBATIONS.items():
            content = perturb(gold)
            if content is None:
                continue
            completion = f"<think>\n{reasoning}\n</think>\n<answer>{content}</answer>"
            ours = correctness_reward([completion], answer=[field]) == [2.0]
            theirs = _math_verify(gold_parsed, content)
            if theirs is None:
                no_verdict[kind] += 1
                continue
            verdicts["compared"] += 1
            if ours == theirs:
                continue
            observed[kind].append(content)
            if KNOWN_DISAGREEMENTS.get(kind, (None, None))[:2] != (ours, theirs):
                unexplained.append(f"{kind}: {content!r} (gold {final}) course={ours} math-verify={theirs}")
    print("\ncompared:", verdicts["compared"], "| no verdict from math-verify:", dict(no_verdict))
    print("explained disagreements:", {kind: len(v) for kind, v in observed.items()})
    assert verdicts["compared"] > 2000, verdicts  # the comparison really happened
    assert not unexplained, "disagreements without an explanation:\n" + "\n".join(unexplained[:40])
    stale = sorted(set(KNOWN_DISAGREEMENTS) - set(observed))
    assert not stale, f"listed disagreements that no longer occur (remove them): {stale}"
