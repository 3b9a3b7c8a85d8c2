"""The recipe's pure parts: GRPOConfig from a profile, failure messages, metrics trimming on resume."""

import pytest

from labs.training import failures, metrics_resume, recipe
from labs.core.cpu_bf16 import has_bf16_units
from labs.core.profiles import get_profile
from labs.core.runfolder import RunFolder, append_jsonl


@pytest.mark.parametrize("name", ["cpu", "ci"])
def test_cpu_profiles_build_a_real_grpo_config(name, tmp_path):
    profile = get_profile(name)
    config = recipe.build_grpo_config(profile, str(tmp_path))
    assert config.beta == profile.beta == 0.04  # explicit, not TRL's 0.0
    assert config.num_generations == profile.num_generations
    assert config.use_vllm and config.vllm_mode == "colocate"
    assert config.vllm_max_model_length == profile.max_prompt_tokens + profile.max_completion_length
    # float32 weights on every CPU; ci computes its products in bf16 (autocast) where the CPU has bf16 units
    assert config.use_cpu and config.bf16 == profile.bf16 == (name == "ci" and has_bf16_units())
    assert not (config.model_init_kwargs or {}).get("dtype")
    assert config.remove_unused_columns is False  # keeps the `answer` column
    assert config.generation_batch_size % config.num_generations == 0
    # float32 on both sides (on cpu): the correction's extra forward pass would change nothing (profile_table)
    assert config.vllm_importance_sampling_correction is False


def test_gpu_profiles_keep_trls_importance_sampling_correction():
    for name in ("rtx5090", "rtx5090-base"):
        kwargs = recipe.grpo_config_kwargs(get_profile(name), "/tmp/x")
        assert kwargs["vllm_importance_sampling_correction"] is True, name
    assert "vllm_importance_sampling_correction" not in recipe.grpo_config_kwargs(
        get_profile("cpu").replace(use_vllm=False), "/tmp/x")


def test_gpu_profile_loads_bf16_and_trains_lora():
    profile = get_profile("rtx5090")
    kwargs = recipe.grpo_config_kwargs(profile, "/tmp/x")
    assert kwargs["model_init_kwargs"] == {"dtype": "bfloat16"} and kwargs["bf16"]
    assert "max_prompt_length" not in kwargs
    lora = recipe.lora_config(profile)
    assert lora.r == profile.lora_r and set(lora.target_modules) == set(profile.lora_targets)


@pytest.mark.parametrize(
    "exc, kind, phrase",
    [
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom", "per_device_train_batch_size"),
        (MemoryError(), "oom", "max_completion_length"),
        (KeyboardInterrupt(), "interrupted", "continuará desde el último checkpoint"),
        (recipe.NonFiniteLoss("loss=nan en el paso 7"), "nan", "learning rate"),
        (OSError(28, "No space left on device"), "disk", "save_total_limit"),
        # what torch.save raised in CI when the disk filled up while it wrote the optimizer state
        (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 435375680 vs 435375568"),
         "disk", "df -h"),
        (ValueError("something else"), "error", "ValueError"),
    ],
)
def test_failures_are_classified_with_a_spanish_fix(exc, kind, phrase):
    failure = recipe.classify_failure(exc, get_profile("rtx5090"))
    assert failure.kind == kind
    assert phrase in failure.message_es


def test_a_full_disk_is_found_behind_a_wrapping_exception():
    try:
        try:
            raise OSError(28, "No space left on device")
        except OSError as inner:
            raise RuntimeError("BackendCompilerFailed: backend='inductor' raised") from inner
    except RuntimeError as outer:
        assert recipe.classify_failure(outer, get_profile("cpu")).kind == "disk"
    assert not failures.disk_full(OSError(13, "Permission denied"))


def test_resume_trims_metrics_logged_after_the_checkpoint(tmp_path):
    run = RunFolder(tmp_path)
    for step in (1, 2, 3, 4, 5):
        append_jsonl(run.metrics_path, {"step": step, "reward": step / 10})
    assert metrics_resume.trim_after(run, 3) == 2
    assert [m["step"] for m in run.metrics()] == [1, 2, 3]


def test_last_checkpoint_ignores_incomplete_ones(tmp_path):
    run = RunFolder(tmp_path)
    for step, complete in ((2, True), (4, True), (6, False)):
        folder = run.checkpoints / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        if complete:
            (folder / "trainer_state.json").write_text("{}")
    assert run.last_checkpoint().name == "checkpoint-4"
    assert recipe.checkpoint_step(run.last_checkpoint()) == 4


def test_remove_checkpoints_keeps_the_completion_logs(tmp_path):
    run = RunFolder(tmp_path)
    for step in (1, 2):
        folder = run.checkpoints / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "optimizer.pt").write_bytes(b"x" * 1000)
        (folder / "trainer_state.json").write_text("{}")
    logs = run.checkpoints / "completions"
    logs.mkdir()
    (logs / "completions_00001.parquet").write_bytes(b"p")
    assert run.remove_checkpoints() == 2 * (1000 + 2)
    assert run.last_checkpoint() is None
    assert sorted(p.name for p in run.checkpoints.iterdir()) == ["completions"]
    assert run.remove_checkpoints() == 0


def test_every_knob_explained_is_a_real_config_keyword():
    keys = set(recipe.grpo_config_kwargs(get_profile("rtx5090"), "x")) | set(
        recipe.grpo_config_kwargs(get_profile("cpu"), "x"))
    assert set(recipe.KNOBS_ES) <= keys


def test_stop_signals_raise_keyboard_interrupt_and_are_restored():
    import os
    import signal

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        with recipe.stop_signals_raise_keyboard_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)  # Python runs the handler right after this call
    assert signal.getsignal(signal.SIGTERM) is before
