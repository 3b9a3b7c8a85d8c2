"""GSM8K for the labs: the same columns whether it comes from the hub or from the bundled copy.

Each row has
    id        "gsm8k-<split>-<line index>", stable across machines (the grader checks the prefix)
    question  the problem text
    solution  the worked solution without the final "#### N" line (used by the format pass)
    answer    the gold number as a string ("72", "-7"): the column TRL hands to
              ``correctness_reward(completions, answer, **kwargs)``
    prompt    the conversational prompt of the lessons: system message + user question

Subsets are deterministic (a seeded permutation of the split), and prompts longer than the
profile's ``max_prompt_tokens`` are dropped with a printed count: TRL 1.x no longer truncates
prompts (``max_prompt_length`` was removed), so a long prompt would otherwise blow up memory.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from labs.core.paths import GSM8K_DIR
from labs.core.profiles import Profile
from rewards import parse_gold

# The lesson's system prompt (L7.3), kept word for word so notebooks and lesson text match.
SYSTEM_PROMPT = (
    "Resuelve el problema. Razona dentro de <think>...</think> "
    "y da el número final dentro de <answer>...</answer>."
)
SPLITS = ("train", "test")
HUB_ID = ("openai/gsm8k", "main")


class DataError(ValueError):
    """The data set cannot be read; the message says what to change."""


def build_prompt(question: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": question},
    ]


def split_solution(answer_field: str) -> tuple[str, str]:
    """Split a GSM8K answer into (worked solution, gold number as text)."""
    if "####" not in answer_field:
        raise DataError(f"La respuesta de GSM8K no tiene '####': {answer_field[:80]!r}")
    solution, _, _ = answer_field.rpartition("####")
    return solution.strip(), str(parse_gold(answer_field))


def to_row(split: str, index: int, question: str, answer_field: str) -> dict:
    solution, gold = split_solution(answer_field)
    return {
        "id": f"gsm8k-{split}-{index:05d}",
        "question": question,
        "solution": solution,
        "answer": gold,
        "prompt": build_prompt(question),
    }


def read_bundled(split: str, directory: Path = GSM8K_DIR) -> list[dict]:
    """The raw records of ``data/gsm8k/<split>.jsonl`` (fields question and answer)."""
    if split not in SPLITS:
        raise DataError(f"Split '{split}' desconocido; usa uno de {SPLITS}.")
    path = Path(directory) / f"{split}.jsonl"
    if not path.exists():
        raise DataError(
            f"No encuentro {path}. La copia de GSM8K va con el repositorio en data/gsm8k/; "
            "vuelve a clonarlo o restaura esa carpeta."
        )
    records = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                records.append({"question": record["question"], "answer": record["answer"]})
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise DataError(f"{path}, línea {number}: no es un registro de GSM8K válido ({exc}).")
    return records


def read_hub(split: str) -> list[dict] | None:
    """The same records from the hub, or None when offline or unreachable."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return None
    try:
        from datasets import load_dataset

        ds = load_dataset(*HUB_ID, split=split)
        return [{"question": q, "answer": a} for q, a in zip(ds["question"], ds["answer"])]
    except Exception as exc:  # no network, hub down, no credentials: fall back to the bundled copy
        print(f"[datos] No se pudo leer GSM8K del hub ({type(exc).__name__}); uso la copia de data/gsm8k.")
        return None


def load_split(split: str, source: str = "bundled") -> list[dict]:
    """Every row of a split as course rows (see the module docstring), in file order."""
    records = read_hub(split) if source == "hub" else None
    if records is None:
        records = read_bundled(split)
    return [to_row(split, i, r["question"], r["answer"]) for i, r in enumerate(records)]


def deterministic_order(n: int, seed: int) -> list[int]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def prompt_token_count(tokenizer, prompt: list[dict]) -> int:
    ids = tokenizer.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # BatchEncoding in some releases
        ids = ids["input_ids"]
    return len(ids)


def filter_long_prompts(rows: list[dict], tokenizer, max_tokens: int, label: str) -> list[dict]:
    kept = [r for r in rows if prompt_token_count(tokenizer, r["prompt"]) <= max_tokens]
    dropped = len(rows) - len(kept)
    if dropped:
        print(f"[datos] {label}: descarto {dropped} de {len(rows)} prompts de más de {max_tokens} tokens.")
    return kept


def course_splits(profile: Profile, tokenizer=None) -> dict[str, list[dict]]:
    """The three disjoint subsets a lab uses, deterministic for a profile.

    ``format`` (the optional supervised format pass) and ``train`` (GRPO prompts) come from GSM8K's
    train split and never overlap; ``eval`` (the holdout) comes from the test split.
    """
    train_rows = load_split("train", profile.data_source)
    test_rows = load_split("test", profile.data_source)
    order = deterministic_order(len(train_rows), profile.data_seed)
    n_format = profile.format_pass_examples if profile.format_pass else 0
    need = n_format + profile.train_size
    if need > len(train_rows):
        raise DataError(
            f"El perfil pide {need} problemas de entrenamiento y GSM8K tiene {len(train_rows)}: "
            "baja train_size o format_pass_examples."
        )
    if profile.eval_size > len(test_rows):
        raise DataError(f"eval_size={profile.eval_size} supera los {len(test_rows)} problemas de test.")
    format_rows = [train_rows[i] for i in order[:n_format]]
    grpo_rows = [train_rows[i] for i in order[n_format:need]]
    eval_order = deterministic_order(len(test_rows), profile.data_seed + 1)
    eval_rows = [test_rows[i] for i in eval_order[: profile.eval_size]]
    if tokenizer is not None:
        grpo_rows = filter_long_prompts(grpo_rows, tokenizer, profile.max_prompt_tokens, "GRPO")
        eval_rows = filter_long_prompts(eval_rows, tokenizer, profile.max_prompt_tokens, "evaluación")
    return {"format": format_rows, "train": grpo_rows, "eval": eval_rows}


def to_dataset(rows: list[dict], columns=("prompt", "answer", "id")):
    """A ``datasets.Dataset`` with the columns GRPOTrainer needs (works with datasets 4.x and 5.x)."""
    from datasets import Dataset

    return Dataset.from_list([{c: r[c] for c in columns} for r in rows])
