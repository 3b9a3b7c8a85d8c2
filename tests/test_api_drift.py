"""Version-drift guard: the course only passes keywords that the pinned releases accept.

Two stacks, two TRLs: CI runs TRL 1.16.0 with transformers 5.19.0 (``requirements.txt``); a student's
RTX 5090 runs TRL 1.15.0 with transformers 5.17.0, Unsloth 2026.10.9 and PEFT 0.21.2
(``requirements-gpu.txt``), because Unsloth caps them. Only one stack is installed at a time, so the
signatures are read from each pinned wheel's *source* (``labs.training.pinned_api``: ``pip download --no-deps``
into the course cache, then ``zipfile`` + ``ast``), whatever is installed. The versions come from the
requirements files; change a pin there and the guard follows.

What is checked:

* ``GRPOConfig``: every keyword the course builds (``labs.training.recipe.grpo_config_kwargs`` for each profile,
  ``labs.l6.trainer_check.grpo_config_kwargs``) is a field of GRPOConfig in *both* TRL releases, including
  the fields inherited from the ``transformers.TrainingArguments`` of the transformers release pinned
  beside it (read from that wheel too: 5.17.0 and 5.19.0, not the installed one). Also: the
  generation batch is a multiple of ``num_generations``.
* ``FastLanguageModel.from_pretrained`` (``labs.l72.from_pretrained_kwargs``): every keyword is a
  *named* parameter. The function also takes ``**kwargs``, which Unsloth forwards to transformers'
  ``from_pretrained``; transformers hands keys it does not know to the model config, where a misspelt
  keyword is silently ignored. So "accepted by **kwargs" is not good enough and is not counted.
* ``FastLanguageModel.get_peft_model`` (``labs.l72.get_peft_model_kwargs``): in Unsloth
  2026.10.9 it is a ``(model, *args, **kwargs)`` wrapper that forwards to
  ``FastLlamaModel.get_peft_model``; that function's named parameters are read, and its own
  ``**kwargs`` go into ``peft.LoraConfig(**arguments)``, which raises on an unknown key. So a keyword
  passes if it is a named parameter or a ``LoraConfig`` field of the pinned PEFT.
* The reader itself: on the installed releases, the fields it parses equal ``dataclasses.fields`` at
  runtime, and it flags keywords that are known to be gone (``max_prompt_length``, removed in TRL 0.28).

Offline (pip cannot download a wheel that is not cached yet) every test here SKIPS, saying which wheel
and why; it never passes silently.
"""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from labs.training import pinned_api as pa
from labs.core.profiles import PROFILES

STACKS = ("gpu", "cpu")


def _or_skip(fn, *args):
    try:
        return fn(*args)
    except pa.WheelUnavailable as exc:
        pytest.skip(f"pinned wheel not in the cache ({pa.wheel_dir()}) and pip could not download it: {exc}")


def _pin(dist: str, stack: str) -> str:
    return pa.pinned_version(dist, stack)


@pytest.fixture(scope="module")
def grpo_fields() -> dict[str, frozenset[str]]:
    return {stack: _or_skip(pa.grpo_config_fields, _pin("trl", stack), _pin("transformers", stack))
            for stack in STACKS}


@pytest.fixture(scope="module")
def unsloth_api():
    version = _pin("unsloth", "gpu")
    return {
        "from_pretrained": _or_skip(pa.unsloth_from_pretrained, version),
        "get_peft_model": _or_skip(pa.unsloth_get_peft_model, version),
        "lora_config": _or_skip(pa.lora_config_fields, _pin("peft", "gpu")),
    }


def _release(stack: str) -> str:
    trl, transformers = _pin("trl", stack), _pin("transformers", stack)
    return f"TRL {trl} + transformers {transformers} ({pa.REQUIREMENTS[stack].name})"


def _assert_grpo_kwargs(kwargs: dict, fields: dict[str, frozenset[str]], source: str) -> None:
    problems = []
    for stack in STACKS:
        unknown = pa.unknown_keywords(kwargs, fields[stack])
        if unknown:
            message = pa.drift_message(f"GRPOConfig ({source})", _release(stack), unknown, fields[stack])
            problems.append(message)
    assert not problems, "\n".join(problems)


def _generation_batch(kwargs: dict) -> int:
    """TRL's rule on one process: generation_batch_size, else batch x steps_per_generation (default: GA)."""
    if kwargs.get("generation_batch_size"):
        return kwargs["generation_batch_size"]
    steps = kwargs.get("steps_per_generation") or kwargs.get("gradient_accumulation_steps", 1)
    return kwargs.get("per_device_train_batch_size", 8) * steps


# --------------------------------------------------------------------------------------------------
# GRPOConfig
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
def test_recipe_grpo_kwargs_exist_in_both_trl_releases(profile_name, grpo_fields, tmp_path):
    from labs.training.recipe import grpo_config_kwargs  # an import error is a failure: the guard needs it

    kwargs = grpo_config_kwargs(PROFILES[profile_name], str(tmp_path))
    assert kwargs, "grpo_config_kwargs returned nothing to check"
    _assert_grpo_kwargs(kwargs, grpo_fields, f"labs.training.recipe, profile {profile_name}")


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
def test_recipe_generation_batch_is_a_multiple_of_num_generations(profile_name, tmp_path):
    from labs.training.recipe import grpo_config_kwargs

    profile = PROFILES[profile_name]
    kwargs = grpo_config_kwargs(profile, str(tmp_path))
    g = kwargs.get("num_generations", 8)
    batch = _generation_batch(kwargs)
    assert g >= 2, f"profile {profile_name}: GRPO needs num_generations >= 2, got {g}"
    assert batch % g == 0, (
        f"profile {profile_name}: generation_batch_size ({batch}) must be divisible by num_generations ({g})"
    )
    assert batch == profile.generation_batch_size, "profile and recipe disagree on the generation batch"


def test_server_mode_grpo_kwargs_exist_in_both_trl_releases(grpo_fields, tmp_path):
    """The multi-GPU layout with `trl vllm-serve` (labs.training.launch) passes its own keywords."""
    from labs.training.recipe import grpo_config_kwargs

    kwargs = grpo_config_kwargs(PROFILES["rtx5090"].replace(vllm_mode="server"), str(tmp_path))
    assert {"vllm_server_host", "vllm_server_port"} <= set(kwargs)
    _assert_grpo_kwargs(kwargs, grpo_fields, "labs.training.recipe, vllm_mode=server")


def test_trainer_check_grpo_kwargs_exist_in_both_trl_releases(grpo_fields, tmp_path):
    from labs.l6.trainer_check import grpo_config_kwargs

    kwargs = grpo_config_kwargs(str(tmp_path), num_generations=4, num_prompts=2, scale_rewards="group")
    _assert_grpo_kwargs(kwargs, grpo_fields, "labs.l6.trainer_check")
    assert _generation_batch(kwargs) % kwargs["num_generations"] == 0


def _notebook_grpo_keywords(name: str) -> set[str]:
    """The keywords written by name in every ``GRPOConfig(...)`` call of a source notebook's code cells."""
    import ast
    import json
    from pathlib import Path

    cells = json.loads((Path(__file__).resolve().parent.parent / "sources" / name).read_text())["cells"]
    keywords = set()
    for c in cells:
        if c["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("".join(c["source"]))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "GRPOConfig":
                keywords |= {kw.arg for kw in node.keywords if kw.arg}
    return keywords


def test_the_l71_notebooks_own_grpo_keywords_exist_in_both_trl_releases(grpo_fields):
    """The student's GRPOConfig and the lesson's calls the notebook runs: only max_prompt_length, on purpose, is gone."""
    keywords = _notebook_grpo_keywords("L7_1_grpo_trl_vllm.ipynb")
    assert {"num_generations", "beta", "max_steps", "logging_steps", "max_prompt_length"} <= keywords
    for stack in STACKS:
        assert pa.unknown_keywords(dict.fromkeys(keywords), grpo_fields[stack]) == ["max_prompt_length"], stack


def test_guard_flags_a_removed_keyword_and_suggests_a_fix(grpo_fields):
    # Negative control: max_prompt_length left GRPOConfig in TRL 0.28; num_generation is a typo.
    for stack in STACKS:
        kwargs = {"max_prompt_length": 512, "num_generation": 8, "beta": 0.04}
        unknown = pa.unknown_keywords(kwargs, grpo_fields[stack])
        assert unknown == ["max_prompt_length", "num_generation"]
        message = pa.drift_message("GRPOConfig", _release(stack), unknown, grpo_fields[stack])
        assert "'max_prompt_length'" in message and "did you mean num_generations" in message
    with pytest.raises(AssertionError, match="max_prompt_length"):
        _assert_grpo_kwargs({"max_prompt_length": 512}, grpo_fields, "negative control")


def test_reader_matches_the_installed_trl_at_runtime():
    # The reader must agree with Python on the release that is installed (whichever stack this is).
    import transformers
    import trl
    from trl import GRPOConfig

    parsed = _or_skip(pa.grpo_config_fields, trl.__version__, transformers.__version__)
    runtime = {f.name for f in dataclasses.fields(GRPOConfig) if f.init}
    only_parsed, only_runtime = sorted(parsed - runtime), sorted(runtime - parsed)
    assert parsed == runtime, f"parsed only: {only_parsed}; runtime only: {only_runtime}"
    assert {"num_generations", "vllm_gpu_memory_utilization", "per_device_train_batch_size"} <= parsed


def test_reader_matches_the_installed_peft_at_runtime():
    import peft
    from peft import LoraConfig

    parsed = _or_skip(pa.lora_config_fields, peft.__version__)
    assert parsed == {f.name for f in dataclasses.fields(LoraConfig) if f.init}


def test_reader_follows_bases_into_training_arguments(grpo_fields):
    # Fields that only TrainingArguments defines prove the base chain was followed into transformers.
    for stack in STACKS:
        assert {"seed", "report_to", "save_strategy", "use_cpu"} <= grpo_fields[stack], stack


# --------------------------------------------------------------------------------------------------
# Unsloth and PEFT (GPU stack)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
def test_unsloth_from_pretrained_kwargs_are_named_parameters(profile_name, unsloth_api):
    from labs.l72 import from_pretrained_kwargs

    params = unsloth_api["from_pretrained"]
    unknown = params.unknown(from_pretrained_kwargs(PROFILES[profile_name]))
    release = f"unsloth {_pin('unsloth', 'gpu')} ({params.where}; **kwargs would pass them on unchecked)"
    assert not unknown, pa.drift_message("FastLanguageModel.from_pretrained", release, unknown, params)


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
def test_unsloth_get_peft_model_kwargs_are_parameters_or_lora_fields(profile_name, unsloth_api):
    from labs.l72 import get_peft_model_kwargs

    params, lora = unsloth_api["get_peft_model"], unsloth_api["lora_config"]
    accepted = params.named | lora
    unknown = pa.unknown_keywords(get_peft_model_kwargs(PROFILES[profile_name]), accepted)
    release = f"unsloth {_pin('unsloth', 'gpu')} + peft {_pin('peft', 'gpu')} (LoraConfig)"
    assert not unknown, pa.drift_message("FastLanguageModel.get_peft_model", release, unknown, accepted)


def test_unsloth_signatures_are_what_the_guard_assumes(unsloth_api):
    fp, gp = unsloth_api["from_pretrained"], unsloth_api["get_peft_model"]
    assert {"model_name", "max_seq_length", "load_in_4bit", "fast_inference", "max_lora_rank",
            "gpu_memory_utilization"} <= fp.named  # fmt: skip
    assert {"r", "lora_alpha", "target_modules", "use_gradient_checkpointing", "random_state"} <= gp.named
    assert fp.var_keyword and gp.var_keyword  # hence the stricter rules above
    # FastLanguageModel.get_peft_model itself names nothing but the model: it forwards to FastLlamaModel's.
    wrapper = _or_skip(pa.function_params, "unsloth", _pin("unsloth", "gpu"), "unsloth/models/loader.py",
                       "FastLanguageModel.get_peft_model")  # fmt: skip
    assert wrapper.named == {"model"} and wrapper.var_keyword
    assert {"lora_dropout", "use_dora", "task_type"} <= unsloth_api["lora_config"]


def test_unsloth_guard_rejects_a_keyword_only_kwargs_would_take(unsloth_api):
    # Negative control: 'load_in_4bits' (typo) would vanish into **kwargs; the guard must catch it.
    kwargs = {"model_name": "x", "load_in_4bits": True}
    assert unsloth_api["from_pretrained"].unknown(kwargs) == ["load_in_4bits"]


# --------------------------------------------------------------------------------------------------
# Offline behaviour
# --------------------------------------------------------------------------------------------------


def test_failed_download_raises_and_the_guard_skips(monkeypatch, tmp_path):
    monkeypatch.setattr(pa, "wheel_dir", lambda: tmp_path)

    def offline(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="ERROR: network is unreachable")

    monkeypatch.setattr(pa.subprocess, "run", offline)
    with pytest.raises(pa.WheelUnavailable, match="trl==9.9.9 failed .*unreachable"):
        pa.wheel_path("trl", "9.9.9")
    with pytest.raises(pytest.skip.Exception, match="pip could not download it"):
        _or_skip(pa.wheel_path, "trl", "9.9.9")


def test_cached_wheel_is_used_without_pip(monkeypatch, tmp_path):
    (tmp_path / "unsloth_zoo-1.2.3-py3-none-any.whl").write_bytes(b"")
    monkeypatch.setattr(pa, "wheel_dir", lambda: tmp_path)
    monkeypatch.setattr(pa.subprocess, "run", lambda *a, **k: pytest.fail("pip ran for a cached wheel"))
    assert pa.wheel_path("unsloth-zoo", "1.2.3").name == "unsloth_zoo-1.2.3-py3-none-any.whl"
    offline = lambda cmd, **k: subprocess.CompletedProcess(cmd, 1, "", "offline")  # noqa: E731
    monkeypatch.setattr(pa.subprocess, "run", offline)
    with pytest.raises(pa.WheelUnavailable):
        pa.wheel_path("unsloth-zoo", "1.2.30")  # a prefix of another version is not a match
