"""The GPU path on a faked RTX 5090 (tests/fake_card.py): the course's own code runs, only the card is faked.

Under the GPU stack (``make test-gpu-stack``) the stand-ins bind every Unsloth call to the installed Unsloth's
signatures; under the CPU stack (no Unsloth) these skip.
"""

from __future__ import annotations

import pytest

from labs.core.profiles import get_profile
import fake_card

pytestmark = pytest.mark.skipif(fake_card.unsloth_source("models/loader.py") is None,
                                reason="Unsloth is not installed (the CPU stack): make test-gpu-stack runs these")


@pytest.fixture
def card(monkeypatch):
    return fake_card.install(monkeypatch)


def test_the_faked_card_answers_as_an_rtx_5090(card):
    import torch

    assert torch.cuda.is_available() and torch.cuda.device_count() == 1
    assert torch.cuda.get_device_capability(0) == (12, 0)
    props = torch.cuda.get_device_properties(0)
    assert props.name == "NVIDIA GeForce RTX 5090" and 31 < props.total_memory / 2**30 < 32
    card.cuda.allocate(2 * 2**30)
    free, total = torch.cuda.mem_get_info()
    assert total - free == 2 * 2**30 and torch.cuda.max_memory_allocated() == 2 * 2**30
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.cuda.mem_get_info(1)


def test_the_stand_in_refuses_a_keyword_unsloth_does_not_name(card):
    with pytest.raises(TypeError, match="load_in_4bits"):
        card.unsloth.FastLanguageModel.from_pretrained(model_name="m", load_in_4bits=True)
    model, _ = card.unsloth.FastLanguageModel.from_pretrained(model_name="m", load_in_4bit=True)
    with pytest.raises(TypeError, match="lora_rank"):
        card.unsloth.FastLanguageModel.get_peft_model(model, lora_rank=16)


def test_l72_loads_its_model_through_unsloth_on_a_faked_5090(card, monkeypatch):
    """``labs.l72.gpu.load_unsloth_model``, L7.2's and the rehearsal's load: the fraction Unsloth will hand vLLM
    under Standby (it read the installed vLLM's version through ``package_version``, whose import was missing:
    NameError here), the load with vLLM inside, the fraction read back from the engine, then the LoRA."""
    from labs.l72 import gpu
    from labs.l72.standby import enable_standby_and_import_unsloth

    monkeypatch.delenv("UNSLOTH_VLLM_STANDBY", raising=False)
    monkeypatch.delenv("UNSLOTH_VLLM_STANDBY_UTIL_OVERRIDE", raising=False)
    enable_standby_and_import_unsloth()
    assert card.finder.imported_with == {"UNSLOTH_VLLM_STANDBY": "1"}
    profile = get_profile("rtx5090").replace(backend="unsloth")
    lines = []
    model, _tokenizer, fraction = gpu.load_unsloth_model(profile, show=lines.append)
    (loaded,), (peft,) = card.calls.named("from_pretrained"), card.calls.named("get_peft_model")
    assert loaded == gpu.from_pretrained_kwargs(profile) and loaded["fast_inference"] is True
    assert peft == gpu.get_peft_model_kwargs(profile)
    assert fraction.rule == "standby" and fraction.engine_value == model.vllm_engine.llm_engine.vllm_config.\
        cache_config.gpu_memory_utilization
    assert fraction.in_force != profile.vllm_gpu_memory_utilization
    assert len(lines) == 2 and "Leído del motor vLLM en marcha" in lines[1]
