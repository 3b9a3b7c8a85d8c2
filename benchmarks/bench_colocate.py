"""Time a short GRPO run with vLLM colocate on CPU against the same run without vLLM.

    python benchmarks/bench_colocate.py [--steps 5] [--profile ci]

Both runs use the same profile, steps, G, lengths and prompts; only ``use_vllm`` differs. Each runs
in its own process (a vLLM engine holds its memory until the process exits). Prints, per mode, the
start-up time (process start to the first step), the mean seconds per step split into generation and
the rest, the total, and the ratio of the two. Run it on an otherwise idle machine.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from labs.training import data, models, recipe
from labs.core.profiles import get_profile
from labs.core.runfolder import RunFolder
from rewards import reward_functions
profile = get_profile(sys.argv[1]).replace(max_steps=int(sys.argv[2]), use_vllm=sys.argv[3] == "1",
                                           save_steps=10_000)
rows = data.course_splits(profile)["train"]
run = RunFolder(sys.argv[4])
trainer = recipe.make_trainer(profile, run, models.model_path(profile), reward_functions(), data.to_dataset(rows))
t1 = time.perf_counter()
trainer.train()
t2 = time.perf_counter()
m = run.metrics()
print(json.dumps({"startup_s": t1 - t0, "train_s": t2 - t1, "steps": len(m),
                  "step_s": [r["step_time"] for r in m],
                  "generation_s": [r["course/generation_seconds"] for r in m]}))
"""


def run_mode(profile: str, steps: int, use_vllm: bool) -> dict:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, profile, str(steps), "1" if use_vllm else "0", tmp],
            capture_output=True, text=True, check=True,
        ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - start
    return result


def mean(values):
    return sum(values) / len(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    results = {}
    for label, use_vllm in (("vllm_colocate", True), ("no_vllm", False)):
        r = run_mode(args.profile, args.steps, use_vllm)
        results[label] = r
        print(
            f"{label:>14}: wall {r['wall_s']:.1f} s | start-up {r['startup_s']:.1f} s | "
            f"train {r['train_s']:.1f} s for {r['steps']} steps | per step {mean(r['step_s']):.2f} s "
            f"(generation {mean(r['generation_s']):.2f} s, rest {mean(r['step_s']) - mean(r['generation_s']):.2f} s)"
        )
    a, b = results["vllm_colocate"], results["no_vllm"]
    print(f"ratio colocate / no vLLM: wall {a['wall_s'] / b['wall_s']:.2f}, "
          f"train {a['train_s'] / b['train_s']:.2f}, per-step generation "
          f"{mean(a['generation_s']) / mean(b['generation_s']):.2f}")


if __name__ == "__main__":
    main()
