"""One process trains the float32 format pass, then GRPO under bf16 autocast (issue 34).

On a CPU the format pass trains float32 whatever the profile says, and the ``ci`` profile's GRPO asks for bf16
autocast where the CPU has bf16 units. accelerate keeps one mixed precision per process, so a notebook kernel
that built its ``GRPOConfig``, ran the pass and then built its ``GRPOTrainer`` failed with "AcceleratorState
has already been initialized and cannot be changed" on such a CPU, and passed on every other. This test
forces bf16 whatever the CPU has, in the notebook's order, so it fails on any machine if the pass stops
scoping its precision (``labs.training.format_pass.own_mixed_precision``).
"""

from __future__ import annotations

import pytest

from labs.core.profiles import get_profile
from labs.training import data as course_data


@pytest.mark.trains
def test_grpo_under_bf16_autocast_after_a_float32_format_pass(tmp_path, monkeypatch):
    from trl import GRPOTrainer

    from labs.training import format_pass, recipe
    from labs.training.models import convert_bundled_model

    base = str(convert_bundled_model())  # the session's course cache (tests/conftest.py)
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path / "cache"))  # an empty cache: the pass must train here
    profile = get_profile("ci").replace(
        bf16=True, use_vllm=False, format_pass_examples=2, format_pass_epochs=1,
        max_steps=1, max_completion_length=8, save_steps=10,
    )
    assert not profile.bf16_weights, "on a CPU, bf16 must mean autocast over float32 weights"
    splits = course_data.course_splits(profile)
    config = recipe.build_grpo_config(profile, str(tmp_path / "grpo"))  # before the pass, as the notebook does

    primed = format_pass.prime(base, profile, splits["format"])
    record = (primed / format_pass.COMPLETE_MARKER)
    assert record.exists()

    trainer = GRPOTrainer(
        model=str(primed),
        reward_funcs=[lambda completions, **kw: [float(len(str(c))) for c in completions]],
        args=config,
        train_dataset=course_data.to_dataset(splits["train"][:4]),
    )
    assert trainer.accelerator.mixed_precision == "bf16"
    trainer.train()
    assert trainer.state.global_step == 1
