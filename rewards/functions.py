"""The three GSM8K reward functions of lesson 7.2, hardened against reward hacking.

Each function has TRL's signature (``completions`` plus the data-set columns as keyword arguments,
so ``**kwargs`` is mandatory), returns exactly one float per completion and never raises:

===================== ======= =======================================================================
function               pays    rule
===================== ======= =======================================================================
correctness_reward     2.0     ``extract_answer(completion)`` equals the gold number of ``answer``
format_reward          0.5     think-then-answer structure (rules below)
soft_format_reward     0.1     for each of ``<think>``, ``</think>``, ``<answer>``, ``</answer>``
                               that appears exactly once (so 0.0 to 0.4)
===================== ======= =======================================================================

``format_reward`` pays when, in order: only whitespace, then ``<think>`` (or nothing, when the chat
template pre-filled ``<think>`` and the completion starts inside the think block), non-blank
reasoning, ``</think>``, only whitespace, ``<answer>``, a non-blank answer, ``</answer>``, only
whitespace to the end; each tag exactly once (``<think>`` at most once). One regular-expression
scan lists the tags (no quantifier, so no backtracking) and ``str.find`` locates them; multi-line
reasoning needs no DOTALL flag, and the cost is linear in the length.

An honest correct completion scores 2.9 (2.8 when ``<think>`` is pre-filled); every known hack scores
strictly less: an empty think (2.4), two answer blocks (0.2), repeated think/answer pairs (2.0),
"41 or 42" (0.9), a different answer inside ``<think>`` (2.2), an empty answer (0.4), the right number
in rambling text without tags (0.0).

The values live in ``REWARD_VALUES`` (read-only): change a weight with
``GRPOConfig(reward_weights=...)`` rather than by editing a function. ``reward_functions(names)`` picks the functions for
``GRPOTrainer(reward_funcs=...)``; exercise E2 ("quita correctness_reward y deja solo
format_reward") is ``reward_functions(["format_reward"])``. TRL logs each one as
``rewards/<function name>/mean``, so the names never change.

Malformed input scores 0.0 for that completion: ``None``, numbers, messages without content, invalid
Unicode, an ``answer`` list that is ``None``, too short or holds no readable gold. When
``completions`` itself is not a list or tuple (``None``, a lone string, a generator) the functions
return ``[]``, and TRL then stops with its own "wrong length" error naming the function: loud, not
silently zero.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from functools import lru_cache
from types import MappingProxyType

from .own import is_spec, load_reward_function
from .parsing import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    completion_text,
    extract_answer,
    parse_gold,
)

__all__ = [
    "REWARD_NAMES",
    "REWARD_VALUES",
    "accuracy_from_correctness",
    "correctness_reward",
    "format_reward",
    "reward_functions",
    "soft_format_reward",
]

# The one place the reward values live. Read-only on purpose: weights belong in GRPOConfig.
REWARD_VALUES = MappingProxyType(
    {"correctness_reward": 2.0, "format_reward": 0.5, "soft_format_reward": 0.1}
)
REWARD_NAMES = tuple(REWARD_VALUES)
SOFT_FORMAT_TAGS = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)
# soft_format_reward pays k * 0.1 for k tags; rounded so that 3 tags give 0.3, not 0.30000000000000004.
SOFT_FORMAT_LEVELS = tuple(
    round(k * REWARD_VALUES["soft_format_reward"], 10) for k in range(len(SOFT_FORMAT_TAGS) + 1)
)
_TAG = re.compile(r"</?(?:think|answer)>")
_FULL_SEQUENCE = (THINK_OPEN, THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)
_PREFILLED_SEQUENCE = (THINK_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)
# format_reward and soft_format_reward both need the tag sequence of the same completions (TRL
# passes the same string objects to each function): scan once, remember the last batches. Only
# texts up to this length are remembered, so the cache holds at most a few megabytes.
_CACHE_TEXT_CHARS = 16_384
_NON_SPACE = re.compile(r"\S")
# Gold strings longer than this are parsed but not cached (the cache must not pin megabytes).
_CACHE_GOLD_CHARS = 4_096


def _as_list(completions):
    return completions if isinstance(completions, (list, tuple)) else None


@lru_cache(maxsize=4096)
def _gold_cached(gold: str) -> int | None:
    try:
        return parse_gold(gold)
    except (ValueError, TypeError):
        return None


def _gold_value(gold) -> int | None:
    """The gold integer of one ``answer`` entry, or None when it cannot be read."""
    if isinstance(gold, str):
        if len(gold) > _CACHE_GOLD_CHARS:
            return _gold_cached.__wrapped__(gold)
        return _gold_cached(gold)
    if isinstance(gold, int) and not isinstance(gold, bool):
        return gold
    if isinstance(gold, float) and math.isfinite(gold) and gold.is_integer():
        return int(gold)
    if isinstance(gold, Decimal) and gold.is_finite() and gold == gold.to_integral_value():
        return int(gold)
    return None


def correctness_reward(completions, answer, **kwargs) -> list[float]:
    """2.0 for each completion whose extracted answer equals its gold number, else 0.0.

    ``answer`` is the data-set column TRL passes, aligned with ``completions``: full GSM8K answers
    (``"... #### 72"``) or extracted golds (``"72"``, ``"1,000"``, ``72``). The comparison is exact
    (``Decimal`` against ``int``): ``18.00`` matches 18, ``0.6`` never matches 60. See
    ``extract_answer`` for what counts as an answer. An ``answer`` that is ``None``, not a list or
    tuple, too short, or holds an unreadable gold gives 0.0 for the completions it does not cover;
    a data set without an ``answer`` column makes TRL call without it, and Python raises
    ``TypeError`` (missing argument): a configuration error should stop the run, not score zero.
    """
    items = _as_list(completions)
    if items is None:
        return []
    paid = REWARD_VALUES["correctness_reward"]
    golds = answer if isinstance(answer, (list, tuple)) else ()
    out = []
    for i, completion in enumerate(items):
        try:
            gold = _gold_value(golds[i]) if i < len(golds) else None
            if gold is None:
                out.append(0.0)
                continue
            predicted = extract_answer(completion)
            out.append(paid if predicted is not None and predicted == gold else 0.0)
        except Exception:  # never crash a training step
            out.append(0.0)
    return out


def tag_sequence(text: str) -> tuple[str, ...]:
    """The tags ``<think>``, ``</think>``, ``<answer>``, ``</answer>`` of ``text`` in order.

    One linear regular-expression scan (no quantifier, nothing to backtrack); tags cannot overlap,
    since each holds a single ``<``, so counting in this tuple equals ``str.count``.
    """
    if len(text) <= _CACHE_TEXT_CHARS:
        return _tag_sequence_cached(text)
    return tuple(_TAG.findall(text))


@lru_cache(maxsize=1024)
def _tag_sequence_cached(text: str) -> tuple[str, ...]:
    return tuple(_TAG.findall(text))


def has_think_answer_format(text: str) -> bool:
    """True when ``text`` has the think-then-answer structure ``format_reward`` pays for.

    The tags, in order of appearance, are exactly ``<think> </think> <answer> </answer>``, or
    ``</think> <answer> </answer>`` when the chat template pre-filled ``<think>`` and the completion
    starts inside the think block. Only whitespace before ``<think>``, between ``</think>`` and
    ``<answer>`` and after ``</answer>``; non-blank text inside the think block and inside the
    answer block.
    """
    tags = tag_sequence(text)
    if tags == _FULL_SEQUENCE:
        think_open = text.find(THINK_OPEN)
        if not _blank(text, 0, think_open):
            return False
        think_start = think_open + len(THINK_OPEN)
    elif tags == _PREFILLED_SEQUENCE:
        think_start = 0  # <think> was pre-filled by the chat template
    else:
        return False
    think_close = text.find(THINK_CLOSE, think_start)
    after_think = think_close + len(THINK_CLOSE)
    answer_open = text.find(ANSWER_OPEN, after_think)
    answer_start = answer_open + len(ANSWER_OPEN)
    answer_close = text.find(ANSWER_CLOSE, answer_start)
    return (
        not _blank(text, think_start, think_close)
        and _blank(text, after_think, answer_open)
        and not _blank(text, answer_start, answer_close)
        and _blank(text, answer_close + len(ANSWER_CLOSE), len(text))
    )


def _blank(text: str, start: int, end: int) -> bool:
    """True when text[start:end] is empty or only whitespace (searched in place, not copied)."""
    return _NON_SPACE.search(text, start, end) is None


def format_reward(completions, **kwargs) -> list[float]:
    """0.5 for each completion with the think-then-answer structure, else 0.0.

    The rules are those of ``has_think_answer_format``. They close the hacks that lenient format
    checks pay for: an empty think block, repeated tags or repeated think/answer pairs, an answer
    block inside the reasoning, an empty answer, text after the answer. A chat template that
    pre-fills ``<think>`` is tolerated. The answer is not read: correctness is another function.
    """
    items = _as_list(completions)
    if items is None:
        return []
    paid = REWARD_VALUES["format_reward"]
    out = []
    for completion in items:
        try:
            out.append(paid if has_think_answer_format(completion_text(completion)) else 0.0)
        except Exception:
            out.append(0.0)
    return out


def soft_format_reward(completions, **kwargs) -> list[float]:
    """0.1 for each of ``<think>``, ``</think>``, ``<answer>``, ``</answer>`` that appears exactly once.

    Partial credit that guides a model towards the tags before it manages the whole structure
    (lesson 7.2 paid for ``<think>`` and ``<answer>`` only; the four tags make the closing tags
    count too). A tag present twice or more pays nothing, so repeating blocks never collects more.
    With a pre-filled ``<think>`` the maximum is 0.3 for every completion of the prompt, which
    leaves GRPO's group advantages unchanged.
    """
    items = _as_list(completions)
    if items is None:
        return []
    levels = SOFT_FORMAT_LEVELS
    out = []
    for completion in items:
        try:
            tags = tag_sequence(completion_text(completion))
            out.append(levels[sum(tags.count(tag) == 1 for tag in SOFT_FORMAT_TAGS)])
        except Exception:
            out.append(0.0)
    return out


_FUNCTIONS = {f.__name__: f for f in (correctness_reward, format_reward, soft_format_reward)}
assert tuple(_FUNCTIONS) == REWARD_NAMES  # one list of names, one of values


def reward_functions(names=None) -> list:
    """The reward functions to pass as ``GRPOTrainer(reward_funcs=...)``, in the order asked.

    ``names`` is ``None`` for all three (correctness, format, soft format), one name, or an iterable
    of names from ``REWARD_NAMES``. Exercise E2 (only format): ``reward_functions(["format_reward"])``
    (or ``["format_reward", "soft_format_reward"]`` to keep the partial credit). A student's own
    function is named ``"module:function"`` or ``"file.py:function"`` (``rewards.own``), alone or
    beside the course's: ``["correctness_reward", "mi_recompensa.py:respuesta_unica"]``. An unknown or
    repeated name, or an empty selection, raises ``ValueError`` (in Spanish: students call this).
    """
    if names is None:
        return list(_FUNCTIONS.values())
    if isinstance(names, str):
        names = [names]
    names = [n.strip() if isinstance(n, str) else n for n in names]
    unknown = [n for n in names if n not in _FUNCTIONS and not is_spec(n)]
    if unknown:
        raise ValueError(
            f"Función de recompensa desconocida: {', '.join(map(repr, unknown))}. "
            f"Válidas: {', '.join(REWARD_NAMES)}, o una tuya como modulo:funcion o archivo.py:funcion."
        )
    if not names:
        raise ValueError(f"Hace falta al menos una función de recompensa ({', '.join(REWARD_NAMES)}).")
    funcs = [_FUNCTIONS[n] if n in _FUNCTIONS else load_reward_function(n, REWARD_NAMES) for n in names]
    loaded = [f.__name__ for f in funcs]
    if len(set(loaded)) != len(loaded):
        raise ValueError(f"Función de recompensa repetida en {names}: TRL la sumaría dos veces.")
    return funcs


def accuracy_from_correctness(mean) -> float:
    """Turn a logged ``rewards/correctness_reward/mean`` into an accuracy in [0, 1].

    The mean divided by ``REWARD_VALUES["correctness_reward"]`` (2.0). ``None`` (a missing log value)
    gives NaN. Valid because the function pays exactly 0.0 or 2.0 per completion; a
    ``reward_weights`` setting in GRPOConfig does not change the logged per-function mean.
    """
    if mean is None:
        return math.nan
    return float(mean) / REWARD_VALUES["correctness_reward"]
