"""Share of GRPO groups whose G rewards are all equal, before and after the format pass.

    python benchmarks/bench_zero_variance.py [--profile cpu] [--prompts 64] [--max-completion-length N]

A group whose G completions all get the same reward has advantage 0 for every completion: it teaches
nothing (TRL logs the share of such groups as ``frac_reward_zero_std``). This script samples G
completions for the first ``--prompts`` GRPO training prompts of the profile, exactly as the trainer's
first steps would (same chat prompt, temperature, ``max_completion_length``, the course's three reward
functions), from two starting points:

- ``base``: the bundled model as it comes;
- ``primed``: the same model after the cached format pass (``labs.training.format_pass``; built if missing).

Each model is sampled in its own process (a vLLM engine holds its memory until the process exits).
Prints, per model, the share of zero-variance groups, the share of completions in the answer format,
and the mean reward, and writes them as JSON to standard output's last line.
"""

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys
import numpy as np
from transformers import AutoTokenizer
from labs.training import data, models, vllm_cpu_shim
from labs import l71
from labs.core.profiles import get_profile
from rewards import reward_functions
from rewards import format_reward

which, profile_name, n_prompts, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
profile = get_profile(profile_name)
if int(sys.argv[5]) > 0:
    profile = profile.replace(max_completion_length=int(sys.argv[5]))
start = models.model_path(profile)
tokenizer = AutoTokenizer.from_pretrained(start)
splits = data.course_splits(profile, tokenizer)
path = l71.base_model_for(profile, start, splits)[0] if which == "primed" else start
rows = splits["train"][:n_prompts]

from vllm import LLM, SamplingParams
kwargs = {}
if vllm_cpu_shim.vllm_runs_on_cpu():
    kwargs = dict(dtype="float32", enforce_eager=True, kv_cache_memory_bytes=vllm_cpu_shim.CPU_KV_CACHE_BYTES)
llm = LLM(model=path, seed=seed, max_model_len=profile.vllm_max_model_length, **kwargs)
# No per-request seed: vLLM 0.32's CPU sampler fails with one ("CPU Generator does not use offset");
# the engine's seed above makes the sampling repeatable, as in TRL's colocated engine.
params = SamplingParams(n=profile.num_generations, temperature=profile.temperature,
                        max_tokens=profile.max_completion_length)
texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows]
outputs = llm.generate(texts, params, use_tqdm=False)

funcs = reward_functions()
zero, totals, in_format = 0, [], 0
for row, out in zip(rows, outputs):
    completions = [[{"role": "assistant", "content": c.text}] for c in out.outputs]
    answers = [row["answer"]] * len(completions)
    per_func = [np.asarray(f(completions=completions, answer=answers), dtype=float) for f in funcs]
    group = np.sum(per_func, axis=0)
    totals.extend(group.tolist())
    # TRL's frac_reward_zero_std: the group's standard deviation is (numerically) zero.
    zero += bool(np.isclose(group.std(), 0.0))
    in_format += int(sum(v > 0 for v in format_reward(completions=completions, answer=answers)))
print("RESULT " + json.dumps({
    "model": which, "path": path, "groups": len(rows), "G": profile.num_generations,
    "zero_std_groups": zero, "frac_reward_zero_std": zero / len(rows),
    "completions_in_format": in_format, "completions": len(totals), "mean_reward": float(np.mean(totals)),
}), flush=True)
# vLLM's engine shutdown can hang for minutes after the work is done: stop its engine processes
# (they hold this child's output pipes open) and leave at once; nothing is left to save.
import os, psutil
for proc in psutil.Process().children(recursive=True):
    proc.kill()
os._exit(0)
"""


def sample(which: str, profile: str, prompts: int, seed: int, max_completion_length: int = 0) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, which, profile, str(prompts), str(seed),
                           str(max_completion_length)],
                          capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    sys.exit(f"The {which} child failed (exit {done.returncode}):\n" + "\n".join(done.stderr.splitlines()[-30:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--prompts", type=int, default=64, help="groups to sample (GRPO training prompts)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-completion-length", type=int, default=0,
                        help="new tokens per completion (default: the profile's own)")
    args = parser.parse_args()
    results = [sample(which, args.profile, args.prompts, args.seed, args.max_completion_length)
               for which in ("base", "primed")]
    for r in results:
        print(f"{r['model']:>6}: {r['zero_std_groups']}/{r['groups']} groups with zero reward variance "
              f"({r['frac_reward_zero_std']:.1%}); {r['completions_in_format']}/{r['completions']} completions "
              f"in the answer format; mean reward {r['mean_reward']:.3f}  [{r['path']}]")
    print(json.dumps({"profile": args.profile, "max_completion_length": args.max_completion_length or None,
                      "results": results}))


if __name__ == "__main__":
    main()
