"""Can the GPU stack's TRL (1.15) take a GRPO step on a CPU? With Triton's interpreter, yes, slowly.

    TRITON_INTERPRET=1 .venv-gpu/bin/python benchmarks/trl115_cpu_step.py [--steps 2] [--tokens 16]

TRL 1.15's loss always launches its Triton log-prob kernel, which fails on CPU tensors ("0 active drivers" without
a card; "cpu tensor?" with one). ``TRITON_INTERPRET=1`` makes Triton interpret the same kernel with numpy on the
CPU. This trains the bundled SmolLM2-135M-Instruct (course cache) for ``--steps`` GRPO steps of 4 completions with
TRL on the CPU (no vLLM) and prints the seconds of each step. docs/testing.md says why the legs do not use it.
"""

import argparse
import json
import os
import tempfile
import time

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from labs.training import models


class StepSeconds(TrainerCallback):
    def __init__(self):
        self.seconds, self._start = [], 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(round(time.perf_counter() - self._start, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args()
    path = models.convert_bundled_model()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"What is {i} + {i}?"}]} for i in range(8)])

    def length_reward(completions, **kwargs):  # any reward that differs inside a group gives a loss to compute
        return [float(len(c[0]["content"]) % 3) for c in completions]

    timer = StepSeconds()
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(output_dir=out, num_generations=4, per_device_train_batch_size=4,
                            max_completion_length=args.tokens, max_steps=args.steps, use_cpu=True, bf16=False,
                            report_to=[], save_strategy="no", logging_steps=1)
        trainer = GRPOTrainer(model=model, reward_funcs=length_reward, args=config, train_dataset=data,
                              processing_class=tokenizer, callbacks=[timer])
        trainer.train()
    import trl

    print(json.dumps({"trl": trl.__version__, "triton_interpret": os.environ.get("TRITON_INTERPRET"),
                      "step_seconds": timer.seconds, "tokens": args.tokens}))


if __name__ == "__main__":
    main()
