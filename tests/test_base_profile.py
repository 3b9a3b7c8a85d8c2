"""The rtx5090-base profile (Unsloth's Qwen3-4B-Base recipe) and the format pass it relies on for a hub model on a GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from labs.core.profiles import PROFILES, RTX5090, get_profile
from labs.doctor.downloads import COURSE_CACHE, HF_CACHE, QWEN3_4B_BF16_BYTES, downloads_for
from labs.training import data as course_data
from labs.training import format_pass
from labs.training import pinned_api as pa
from labs.vram import plan

REPO = Path(__file__).resolve().parent.parent
BASE = "rtx5090-base"


def test_base_profile_follows_unsloths_recipe_and_is_listed_last():
    p = PROFILES[BASE]
    assert list(PROFILES)[-1] == BASE
    assert p.model == p.unsloth_model == "unsloth/Qwen3-4B-Base"
    assert p.format_pass and p.use_lora and (p.lora_r, p.lora_alpha) == (32, 64)
    assert p.learning_rate == 5e-6 and not p.use_cpu and p.bf16
    # Everything that shapes a step is the lesson's, so the two profiles' runs compare step for step.
    for key in ("num_generations", "max_completion_length", "per_device_train_batch_size",
                "gradient_accumulation_steps", "max_steps", "beta", "eval_size", "vllm_gpu_memory_utilization"):
        assert getattr(p, key) == getattr(RTX5090, key), key


def test_base_profile_splits_fit_in_gsm8k_and_stay_disjoint(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the bundled copy: the same rows as the hub's
    splits = course_data.course_splits(get_profile(BASE))
    assert len(splits["format"]) == 64 and len(splits["eval"]) == 500
    assert not {r["id"] for r in splits["format"]} & {r["id"] for r in splits["train"]}
    # The pass teaches the course's tags, the ones the rewards read.
    target = format_pass.sft_rows(splits["format"][:1])[0]["completion"][0]["content"]
    assert target.startswith("<think>\n") and "</think>\n<answer>" in target and target.endswith("</answer>")


def test_base_profile_vram_plan_fits_a_5090():
    trl = plan(get_profile(BASE), "trl", 32.0)
    assert trl.fits and trl.model == "unsloth/Qwen3-4B-Base"
    out = subprocess.run([sys.executable, "-m", "labs", "vram", "--profile", BASE, "--path", "trl", "--card-gib", "32"],
                         capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0 and "r=32" in out.stdout and "Cabe" in out.stdout


def test_doctor_lists_the_base_model_and_the_primed_checkpoint():
    downloads = {d.name: d for d in downloads_for(get_profile(BASE), ("trl",))}
    hub = downloads["unsloth/Qwen3-4B-Base"]
    assert hub.where == HF_CACHE and hub.from_hub and hub.bytes == QWEN3_4B_BF16_BYTES
    primed = downloads["unsloth/Qwen3-4B-Base + pase de formato"]
    assert primed.where == COURSE_CACHE and not primed.from_hub and primed.bytes == QWEN3_4B_BF16_BYTES
    assert [d.name for d in downloads_for(get_profile("ci"), ("trl",))] == ["bundled:SmolLM2-135M-Instruct"]


def test_l71_help_lists_the_base_profile():
    out = subprocess.run([sys.executable, "-m", "labs", "l71", "--profile", BASE, "--help"],
                         capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0 and BASE in out.stdout


@pytest.mark.parametrize("profile_name", sorted(PROFILES))
@pytest.mark.parametrize("stack", ("gpu", "cpu"))
def test_format_pass_sft_kwargs_exist_in_both_trl_releases(profile_name, stack, tmp_path):
    trl, transformers = pa.pinned_version("trl", stack), pa.pinned_version("transformers", stack)
    try:
        fields = pa.sft_config_fields(trl, transformers)
    except pa.WheelUnavailable as exc:
        pytest.skip(f"pinned wheel not in the cache ({pa.wheel_dir()}) and pip could not download it: {exc}")
    kwargs = format_pass.sft_config_kwargs(PROFILES[profile_name], str(tmp_path), eos_token="<|im_end|>")
    unknown = pa.unknown_keywords(kwargs, fields)
    assert not unknown, pa.drift_message("SFTConfig (format pass)", f"TRL {trl} + transformers {transformers}", unknown, fields)


def test_bf16_profiles_load_the_pass_in_bf16_and_a_cpu_trains_it_in_float32():
    assert format_pass.sft_config_kwargs(get_profile(BASE), "x")["model_init_kwargs"] == {"dtype": "bfloat16"}
    # on a CPU, float32 even where ci's bf16 is on: the cached primed model is the same on every CPU
    for bf16 in (False, True):
        kwargs = format_pass.sft_config_kwargs(get_profile("ci", bf16=bf16), "x")
        assert kwargs["model_init_kwargs"] is None and kwargs["bf16"] is False


def test_cache_key_of_cpu_profiles_ignores_lora_and_of_the_base_profile_does_not():
    rows = [{"id": "gsm8k-train-00001"}]
    ci = get_profile("ci")
    assert format_pass.cache_key("m", ci, rows) == format_pass.cache_key("m", ci.replace(lora_r=64), rows)
    base = get_profile(BASE)
    assert format_pass.cache_key("m", base, rows) != format_pass.cache_key("m", base.replace(lora_r=16), rows)


def _base_like_copy(tmp_path: Path) -> Path:
    """The bundled SmolLM2 with a base model's end-of-sequence token (<|endoftext|>), like Qwen3-4B-Base's tokenizer."""
    from transformers import AutoTokenizer

    from labs.training.models import convert_bundled_model

    folder = tmp_path / "base-like"
    shutil.copytree(convert_bundled_model(), folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.eos_token = "<|endoftext|>"
    tokenizer.save_pretrained(folder)
    for name in ("config.json", "generation_config.json"):
        config = json.loads((folder / name).read_text())
        config["eos_token_id"] = tokenizer.eos_token_id
        (folder / name).write_text(json.dumps(config))
    return folder


def test_turn_end_token_is_the_chat_templates(tmp_path):
    from transformers import AutoTokenizer

    from labs.training.models import convert_bundled_model

    assert format_pass.turn_end_token(AutoTokenizer.from_pretrained(convert_bundled_model())) == "<|im_end|>"
    base_like = AutoTokenizer.from_pretrained(_base_like_copy(tmp_path))
    assert base_like.eos_token == "<|endoftext|>" and format_pass.turn_end_token(base_like) == "<|im_end|>"


@pytest.mark.trains
@pytest.mark.parametrize("use_lora", [True, False])
def test_format_pass_saves_a_plain_checkpoint_that_stops_at_the_turn_end(tmp_path, monkeypatch, use_lora):
    """The GPU path of the pass (LoRA, merge, end-of-turn token) run on CPU with a base-like tokenizer, and the
    full fine-tune of the CPU profiles. The only test of the format pass on a base model's tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    base = _base_like_copy(tmp_path)  # from the course cache's converted model (its conversion: test_models.py)
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))  # an empty cache: the pass must train
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    profile = get_profile("ci").replace(use_lora=use_lora, lora_r=4, lora_alpha=8, format_pass_examples=4, format_pass_epochs=1)
    rows = course_data.course_splits(profile)["format"]
    primed = format_pass.prime(str(base), profile, rows)
    assert not (primed / "adapter_config.json").exists()  # merged: GRPO and vLLM load it as a plain model
    record = json.loads((primed / format_pass.COMPLETE_MARKER).read_text())
    assert record["lora_merged"] is use_lora and record["eos_token"] == "<|im_end|>"
    tokenizer = AutoTokenizer.from_pretrained(primed)
    assert tokenizer.eos_token == "<|im_end|>"
    eos = GenerationConfig.from_pretrained(primed).eos_token_id
    assert tokenizer.eos_token_id in (eos if isinstance(eos, list) else [eos])
    before = AutoModelForCausalLM.from_pretrained(base).model.layers[0].self_attn.q_proj.weight
    after = AutoModelForCausalLM.from_pretrained(primed).model.layers[0].self_attn.q_proj.weight
    assert torch.max(torch.abs(after - before)).item() > 0  # the pass's update (the merged adapter's) is in the weights


def test_doctor_judges_a_good_5090_for_the_base_profile():
    from labs.doctor import OK, evaluate
    from labs.doctor import checks as C

    doctor_data = Path(__file__).parent / "data" / "doctor"
    record = json.loads((doctor_data / "rtx5090_good.json").read_text(encoding="utf-8"))
    checks = {c.name: c for c in evaluate(record, BASE)}
    assert "unsloth/Qwen3-4B-Base" in checks[C.MODEL].detail and "8.0 GB" in checks[C.MODEL].detail
    assert "pase de formato" in checks[C.DISK].detail
    assert all(c.level == OK or c.fix_es.strip() for c in checks.values())
