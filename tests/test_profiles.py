"""Profiles: selection, overrides and the rules every profile must satisfy."""

import dataclasses

import pytest

from labs.core import profiles
from labs.core.profiles import PROFILE_ENV, PROFILES, ProfileError, get_profile, parse_override


def test_required_profiles_exist_and_cpu_profiles_use_the_bundled_model():
    assert {"cpu", "ci", "rtx5090"} <= set(PROFILES)
    assert PROFILES["cpu"].model == profiles.BUNDLED_MODEL
    assert PROFILES["ci"].model == profiles.BUNDLED_MODEL
    assert PROFILES["cpu"].use_cpu and not PROFILES["cpu"].bf16


def test_rtx5090_holds_the_lesson_settings():
    p = PROFILES["rtx5090"]
    assert p.model == "Qwen/Qwen3-4B-Instruct-2507"
    assert (p.num_generations, p.max_completion_length) == (8, 1024)
    assert (p.per_device_train_batch_size, p.gradient_accumulation_steps) == (8, 4)
    # LoRA at ten times the lesson's full fine-tune rate, vLLM at 0.4 (the reasons sit beside the values)
    assert p.use_lora and (p.learning_rate, p.beta, p.max_steps) == (1e-5, 0.04, 500)
    assert p.use_vllm and p.vllm_mode == "colocate" and p.vllm_gpu_memory_utilization == 0.4
    assert p.bf16 and not p.use_cpu


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_keeps_whole_groups(name):
    p = PROFILES[name]
    assert p.num_generations >= 2
    assert p.generation_batch_size % p.num_generations == 0
    assert p.prompts_per_step >= 1


def test_ci_is_the_smallest():
    ci, cpu = PROFILES["ci"], PROFILES["cpu"]
    assert ci.max_steps < cpu.max_steps and ci.eval_size < cpu.eval_size
    assert ci.max_steps >= 2  # one step after a checkpoint, so resume has something to continue


def test_profiles_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROFILES["cpu"].max_steps = 1


def test_environment_variable_chooses_the_profile(monkeypatch):
    monkeypatch.setenv(PROFILE_ENV, "ci")
    assert get_profile().name == "ci"
    monkeypatch.setenv(PROFILE_ENV, "rtx5090")
    assert get_profile().name == "rtx5090"


def test_default_without_gpu_is_cpu(monkeypatch):
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    monkeypatch.setattr(profiles, "cuda_available", lambda: False)
    assert get_profile().name == "cpu"
    name, reason = profiles.default_profile_name()
    assert name == "cpu" and "GPU" in reason


def test_unknown_profile_lists_the_valid_ones(monkeypatch):
    with pytest.raises(ProfileError) as err:
        get_profile("rtx4090")
    for name in PROFILES:
        assert name in str(err.value)
    monkeypatch.setenv(PROFILE_ENV, "gpu")
    with pytest.raises(ProfileError, match="rtx5090"):
        get_profile()


def test_replace_rejects_unknown_settings():
    with pytest.raises(ProfileError, match="max_prompt_length"):
        PROFILES["cpu"].replace(max_prompt_length=512)
    assert PROFILES["cpu"].replace(max_steps=7).max_steps == 7


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("max_steps=50", "max_steps", 50),
        ("learning_rate=2e-6", "learning_rate", 2e-6),
        ("use_vllm=false", "use_vllm", False),
        ("lora_targets=q_proj,v_proj", "lora_targets", ("q_proj", "v_proj")),
        ("model=/tmp/x", "model", "/tmp/x"),
    ],
)
def test_parse_override_uses_the_field_type(text, key, value):
    assert parse_override(text) == (key, value)


@pytest.mark.parametrize("text", ["max_steps", "max_steps=many", "use_vllm=maybe", "nope=1"])
def test_parse_override_rejects_bad_input(text):
    with pytest.raises(ProfileError):
        parse_override(text)
