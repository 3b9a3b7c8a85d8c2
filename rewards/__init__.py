"""Verifiable rewards for GSM8K: one number reader and the three reward functions of lesson 7.2.

Typical use::

    from rewards import reward_functions
    trainer = GRPOTrainer(..., reward_funcs=reward_functions())              # L7.1, L7.2
    trainer = GRPOTrainer(..., reward_funcs=reward_functions(["format_reward"]))  # E2

and for evaluation ``extract_answer(completion) == parse_gold(example["answer"])``.

``rewards.parsing`` holds the readers (``parse_number``, ``extract_answer``, ``parse_gold``,
``last_number``, ``completion_text``) and their rules; ``rewards.functions`` the reward functions,
``REWARD_VALUES`` and the anti-hacking rules; ``rewards.own`` loads a student's own function named
``"module:function"`` or ``"file.py:function"``; ``rewards.examples`` holds honest and hacking completions
to check any reward function against. All are pure Python with no dependency.
"""

from .functions import (
    REWARD_NAMES,
    REWARD_VALUES,
    SOFT_FORMAT_TAGS,
    accuracy_from_correctness,
    correctness_reward,
    format_reward,
    has_think_answer_format,
    reward_functions,
    soft_format_reward,
)
from .parsing import completion_text, extract_answer, final_segment, last_number, parse_gold, parse_number

__all__ = [
    "REWARD_NAMES",
    "REWARD_VALUES",
    "SOFT_FORMAT_TAGS",
    "accuracy_from_correctness",
    "completion_text",
    "correctness_reward",
    "extract_answer",
    "final_segment",
    "format_reward",
    "has_think_answer_format",
    "last_number",
    "parse_gold",
    "parse_number",
    "reward_functions",
    "soft_format_reward",
]
