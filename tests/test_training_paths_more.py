"""The format pass's and E3's fluency measures' paths that no training run takes: a chat template without a turn
token, a format pass whose process dies, a LoRA run's saved adapter, nothing to score. Real tokenizers and models
(the bundled SmolLM2); nothing trains."""

from __future__ import annotations

import pytest

from labs.core.profiles import get_profile


@pytest.fixture(scope="module")
def bundled():
    from labs.training import models

    return models.convert_bundled_model()


def test_a_chat_template_without_a_turn_token_has_no_turn_end(bundled):
    """SmolLM2 closes each message with <|im_end|>; a template that writes plain text has none, and the format
    pass then trains with the tokenizer's own end-of-sequence token."""
    from transformers import AutoTokenizer

    from labs.training.format_pass import turn_end_token

    tokenizer = AutoTokenizer.from_pretrained(bundled)
    assert turn_end_token(tokenizer) == "<|im_end|>"
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    assert turn_end_token(tokenizer) is None


def test_a_format_pass_whose_process_dies_raises_with_its_exit_code(tmp_path):
    """The pass runs in its own process (labs.training.format_pass._train_alone); a model that cannot load kills
    it, and the launch gets an error with the exit code instead of waiting or going on without the pass."""
    from labs.training.format_pass import _train_alone

    with pytest.raises(RuntimeError, match=r"El pase de formato falló en su proceso \(código de salida 1\)"):
        _train_alone(str(tmp_path / "no-hay-modelo"), get_profile("ci"), [], tmp_path / "primed")
    assert not (tmp_path / "primed").exists()


def test_e3_scores_a_lora_runs_saved_adapter_on_its_base_model(bundled, tmp_path):
    """A LoRA run's model/ holds only the adapter: the scorer loads it on its base model. A fresh adapter (lora_B at
    zero) scores exactly as the base model does."""
    import numpy as np
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from labs.exercises.fluency_measures import LogProbScorer, kl_estimate

    base = AutoModelForCausalLM.from_pretrained(bundled)
    get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj"])).save_pretrained(str(tmp_path / "model"))
    AutoTokenizer.from_pretrained(bundled).save_pretrained(str(tmp_path / "model"))
    adapter = LogProbScorer(str(tmp_path / "model"), device="cpu")
    reference = LogProbScorer(bundled, device="cpu")
    assert type(adapter.model).__name__.startswith("Peft")
    prompt = [{"role": "user", "content": "¿Cuánto es 2 + 3?"}]
    got, want = adapter.token_logprobs(prompt, " 5"), reference.token_logprobs(prompt, " 5")
    assert len(got) == len(want) > 0 and np.allclose(got, want, atol=1e-5)
    assert kl_estimate(adapter, reference, [(prompt, " 5")]) == pytest.approx(0.0, abs=1e-5)
    assert kl_estimate(adapter, reference, [(prompt, "")]) is None  # no completion token: nothing to estimate
