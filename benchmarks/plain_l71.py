"""The L7.1 lab as a student would write it with TRL alone: GRPOConfig + GRPOTrainer + vLLM colocate, nothing else.

    python benchmarks/plain_l71.py START_MODEL OUTPUT_DIR RESULT_JSON

Run by ``benchmarks/bench_plain_trl.py`` beside ``python -m labs l71 --profile cpu``. Same start weights (the format
pass's model, passed in), the same GSM8K prompts and holdout (``course_splits``: the same rows, no download), the
same reward functions (``rewards/``), knobs and seed, and the same two greedy holdout evaluations through the
trainer's own vLLM engine. What it leaves out is everything the course adds around the trainer: the pre-flight
checks, ``run.json``, the run folder's callbacks (``metrics.jsonl``, ``status.json``), the resume point, the phase
timers, the memory sampling thread, the curves and the grading report.

The one course piece it keeps is ``vllm_cpu_shim.apply()``: without it TRL's colocate engine on vLLM's CPU back-end
fails at the first weight sync (labs/training/vllm_cpu_shim.py says why), so no plain script trains here without it.
"""

import json
import os
import sys
import time

started = time.perf_counter()
start_model, output_dir, result_path = sys.argv[1:4]

from labs.training import vllm_cpu_shim  # noqa: E402

vllm_cpu_shim.apply()

from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from vllm import SamplingParams  # noqa: E402

from labs.core.profiles import get_profile  # noqa: E402
from labs.training import data  # noqa: E402
from rewards import correctness_reward, format_reward, soft_format_reward  # noqa: E402

profile = get_profile("cpu")  # only for the rows: the knobs below are written out, as a student writes them
splits = data.course_splits(profile)

config = GRPOConfig(
    output_dir=output_dir,
    use_cpu=True,
    bf16=False,  # TRL turns bf16 on by default; a CPU trains float32 here
    gradient_checkpointing=False,  # TRL turns it on by default; on a CPU it only costs time
    num_generations=4,
    max_completion_length=64,
    per_device_train_batch_size=1,
    gradient_accumulation_steps=8,
    learning_rate=1e-5,
    beta=0.04,
    loss_type="dapo",
    temperature=1.0,
    epsilon=0.2,  # the clip range and the advantage scaling: the lesson's knobs, written as the student writes them
    scale_rewards="group",
    max_steps=16,
    seed=42,
    logging_steps=1,
    save_strategy="steps",
    save_steps=8,
    save_total_limit=2,
    report_to=[],
    remove_unused_columns=False,
    use_vllm=True,
    vllm_mode="colocate",
    vllm_gpu_memory_utilization=0.3,
    vllm_max_model_length=320,
    vllm_importance_sampling_correction=False,
)
trainer = GRPOTrainer(
    model=start_model,
    reward_funcs=[correctness_reward, format_reward, soft_format_reward],
    args=config,
    train_dataset=data.to_dataset(splits["train"]),
)


def holdout_accuracy() -> float:
    """Greedy answers to the holdout from the trainer's vLLM engine, scored by the correctness reward."""
    tokenizer = trainer.processing_class
    texts = [tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True)
             for r in splits["eval"]]
    outputs = trainer.vllm_generation.llm.generate(
        texts, SamplingParams(temperature=0.0, max_tokens=profile.eval_max_new_tokens), use_tqdm=False)
    completions = [[{"role": "assistant", "content": o.outputs[0].text}] for o in outputs]
    scores = correctness_reward(completions, answer=[r["answer"] for r in splits["eval"]])
    return sum(s > 0 for s in scores) / len(scores)


ready = time.perf_counter()
base_accuracy = holdout_accuracy()
trained_at = time.perf_counter()
trainer.train()
trained = time.perf_counter()
trainer.vllm_generation.sync_weights()  # TRL syncs before each generation, not after the last step
trained_accuracy = holdout_accuracy()
trainer.save_model(os.path.join(output_dir, "model"))
done = time.perf_counter()

with open(result_path, "w", encoding="utf-8") as f:
    json.dump({"log_history": trainer.state.log_history, "config": config.to_dict(),
               "seconds": {"start_to_trainer": ready - started, "base_eval": trained_at - ready,
                           "train": trained - trained_at, "trained_eval_and_save": done - trained,
                           "total_in_process": done - started},
               "base_accuracy": base_accuracy, "trained_accuracy": trained_accuracy}, f, default=str)
