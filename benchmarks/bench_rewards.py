"""How fast the three reward functions score completions, on one core.

    python benchmarks/bench_rewards.py [--completions 20000] [--repeats 5]

Builds a realistic mix from GSM8K train worked solutions (honest tagged answers with varied number
formats, wrong numbers, chat-format completions, pre-filled ``<think>``, untagged rambling and the
known reward hacks; 200 to 4,000 characters, about what 1,024 new tokens allow), scores it in
batches of 256 with correctness_reward + format_reward + soft_format_reward together (what
GRPOTrainer calls), and prints completions per second of CPU time (best of the repeats, so other
processes on a shared machine distort it less; wall-clock figures beside it) and the time of three
1 MB adversarial completions.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script from anywhere, installed or not

from rewards import correctness_reward, format_reward, soft_format_reward  # noqa: E402

TRAIN = REPO / "data" / "gsm8k" / "train.jsonl"
BATCH = 256
FUNCTIONS = (correctness_reward, format_reward, soft_format_reward)


def build_mix(n: int, seed: int = 0) -> tuple[list, list[str]]:
    rng = random.Random(seed)
    rows = [json.loads(line) for line in TRAIN.read_text(encoding="utf-8").splitlines() if line]
    completions, answers = [], []
    for _ in range(n):
        row = rng.choice(rows)
        solution, final = row["answer"].split("####")
        gold = int(final.strip().replace(",", ""))
        reasoning = re.sub(r"<<[^>]*>>", "", solution).strip()
        target = rng.randint(200, 4000)
        while len(reasoning) < target:  # longer reasoning, as sampled completions are
            reasoning += "\nLet me double-check that. " + reasoning[: target - len(reasoning)]
        written = rng.choice(
            [str(gold), f"{gold:,}", f"${gold}", f"{gold}.00", f"**{gold}**", f"\\boxed{{{gold}}}"]
        )
        wrong = str(gold + rng.choice([-10, -1, 1, 2, 100]))
        kind = rng.random()
        if kind < 0.35:
            text = f"<think>\n{reasoning}\n</think>\n<answer>{written}</answer>"
        elif kind < 0.55:
            text = f"<think>\n{reasoning}\n</think>\n<answer>{wrong}</answer>"
        elif kind < 0.65:
            text = f"{reasoning}\n</think>\n<answer>{written}</answer>"  # pre-filled <think>
        elif kind < 0.75:
            text = f"{reasoning}\nSo the answer is {gold}."  # no tags
        elif kind < 0.80:
            text = f"<think>\n{reasoning}"  # truncated at max_completion_length
        else:  # hacks
            text = rng.choice([
                f"<think></think><answer>{written}</answer>",
                f"<think>\n{reasoning}\n</think>\n<answer>{wrong} or {gold}</answer>",
                f"<think>\n{reasoning}\n</think>\n<answer>{wrong}</answer><answer>{gold}</answer>",
                f"<think>\n{reasoning}\n<answer>{gold}</answer></think>\n<answer>{wrong}</answer>",
                f"<think>\n{reasoning}\n</think>\n<answer></answer>",
            ])
        # a third of the prompts are conversational: TRL then passes lists of messages
        completions.append([{"role": "assistant", "content": text}] if rng.random() < 0.33 else text)
        answers.append(final.strip())
    return completions, answers


def score_all(completions, answers) -> float:
    total = 0.0
    for start in range(0, len(completions), BATCH):
        batch, golds = completions[start:start + BATCH], answers[start:start + BATCH]
        for function in FUNCTIONS:
            total += sum(function(batch, answer=golds))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core

    completions, answers = build_mix(args.completions)
    mean_chars = statistics.mean(len(c if isinstance(c, str) else c[0]["content"]) for c in completions)
    score_all(completions[:BATCH], answers[:BATCH])  # warm-up
    cpu, wall = [], []
    for _ in range(args.repeats):
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        reward_sum = score_all(completions, answers)
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    n = len(completions)
    print(f"mix: {n:,} completions, mean {mean_chars:,.0f} characters, "
          f"mean total reward {reward_sum / n:.3f}")
    print(f"three functions together, one core: {n / min(cpu):,.0f} completions/s of CPU time "
          f"(best of {args.repeats}; median {n / statistics.median(cpu):,.0f}/s); "
          f"wall clock best {n / min(wall):,.0f}/s")

    adversarial = {
        "1 MB of <think>": "<think>" * 150_000,
        "1 MB number in <answer>": "<think>a</think><answer>" + "1," * 500_000 + "</answer>",
        "1 MB honest reasoning": "<think>" + "3 * 14 = 42. " * 77_000 + "</think><answer>42</answer>",
    }
    for name, text in adversarial.items():
        start = time.perf_counter()
        scores = [function([text], answer=["42"])[0] for function in FUNCTIONS]
        elapsed = (time.perf_counter() - start) * 1000
        print(f"{name} ({len(text):,} characters): {elapsed:.1f} ms for the three functions, "
              f"scores {scores}")


if __name__ == "__main__":
    main()
