"""Is bf16 autocast worth it for the CPU profiles' training? One forward+backward of the bundled model.

    python benchmarks/bench_cpu_bf16.py [--threads 2] [--batch 4] [--tokens 214] [--repeats 3]

Times the best of ``--repeats`` forward+backward passes of SmolLM2-135M-Instruct (the cpu and ci profiles'
model, from the course cache) in float32 and under ``torch.autocast("cpu", dtype=torch.bfloat16)``, after
one warm-up pass each, and prints the CPU's capability as torch sees it. Where the CPU has AMX, bf16 can
halve the time; with AVX512-BF16 alone (no AMX) or AVX2 it can be slower than float32. Run it on an
otherwise idle machine.
"""

import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM

from labs.core.profiles import get_profile
from labs.training.models import model_path


def cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            flags = next(line for line in fh if line.startswith("flags")).split(":", 1)[1].split()
    except (OSError, StopIteration):
        return []
    return sorted(f for f in flags if f.startswith(("amx", "avx512_bf16", "avx512f")))


def best_pass(model, ids: torch.Tensor, bf16: bool, repeats: int) -> float:
    def one() -> float:
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    one()  # warm-up: kernel selection, allocator
    return min(one() for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=214)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(model_path(get_profile("ci")), dtype=torch.float32)
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.tokens), generator=torch.Generator().manual_seed(0))
    fp32 = best_pass(model, ids, False, args.repeats)
    bf16 = best_pass(model, ids, True, args.repeats)
    print(json.dumps({"cpu_capability": torch.backends.cpu.get_cpu_capability(), "cpu_flags": cpu_flags(),
                      "threads": args.threads, "shape": [args.batch, args.tokens],
                      "float32_s": round(fp32, 2), "bf16_autocast_s": round(bf16, 2),
                      "bf16_speed_up": round(fp32 / bf16, 2)}))


if __name__ == "__main__":
    main()
