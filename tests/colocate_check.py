"""A real GRPO run with vLLM colocate on CPU; prints a JSON verdict (run by test_vllm_colocate.py).

Runs in its own process because a vLLM engine keeps ~30% of RAM until its process exits.
The reward is deterministic and different for every completion of a group (the completion's
length), so every step has a non-zero advantage and therefore a non-zero gradient.
"""

import json
import sys
import tempfile

import torch


def length_reward(completions, **kwargs):
    return [len(c[0]["content"]) / 100.0 for c in completions]


def main(out_path: str) -> None:
    from labs.training import data
    from labs.core.profiles import get_profile
    from labs.core.runfolder import RunFolder

    # float32 as the cpu profile trains (the other ci trainings use bf16 autocast where the CPU has bf16 units)
    profile = get_profile("ci").replace(max_steps=2, save_steps=10, learning_rate=1e-4, max_completion_length=24,
                                        bf16=False)
    rows = data.course_splits(profile)["train"][:4]
    with tempfile.TemporaryDirectory(prefix="colocate-") as tmp:  # its checkpoint alone is 1.6 GB
        verdict = train_and_compare(profile, rows, RunFolder(tmp))
    with open(out_path, "w") as fh:
        json.dump(verdict, fh)


def train_and_compare(profile, rows, run) -> dict:
    from labs.training import data, models, recipe, vllm_cpu_shim

    trainer = recipe.make_trainer(
        profile, run, models.model_path(profile), [length_reward], data.to_dataset(rows)
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    start = vllm_cpu_shim.engine_weight_diff(trainer)
    trainer.train()
    stale = vllm_cpu_shim.engine_weight_diff(trainer)  # the last step is not synced yet
    # TRL's own sync without the shim's repack: the live weights are new, the kernels' packed copies are not
    type(trainer.vllm_generation).sync_weights.__wrapped__(trainer.vllm_generation)
    not_repacked = vllm_cpu_shim.engine_weight_diff(trainer)
    trainer.vllm_generation.sync_weights()  # what TRL calls: sync, then the shim repacks
    synced = vllm_cpu_shim.engine_weight_diff(trainer)
    changed = [n for n, p in trainer.model.named_parameters() if not torch.equal(before[n], p.detach())]
    verdict = {
        "shim_applied": vllm_cpu_shim.is_applied(),
        "params": len(before),
        "changed": len(changed),
        "diff_at_start": start["max_abs_diff"],
        "diff_before_sync": stale["max_abs_diff"],
        "diff_synced_not_repacked": not_repacked["max_abs_diff"],
        "diff_after_sync": synced["max_abs_diff"],
        "compared": synced["compared"],
        "missing": synced["missing"],
        "steps": trainer.state.global_step,
        "bf16": trainer.args.bf16,
        "weight_dtypes": sorted({str(p.dtype) for p in trainer.model.parameters()}),
        "kv_cache_bytes": vllm_cpu_shim.engine_kv_cache_bytes(trainer),
        "kv_cache_planned": vllm_cpu_shim.kv_cache_bytes_for(
            str(models.model_path(profile)), profile.generation_batch_size, profile.vllm_max_model_length
        ),
        # what one step needs at once: every completion of the batch at its longest
        "kv_cache_needed": profile.generation_batch_size * profile.vllm_max_model_length
        * vllm_cpu_shim.kv_bytes_per_token(str(models.model_path(profile))),
    }
    return verdict


if __name__ == "__main__":
    main(sys.argv[1])
