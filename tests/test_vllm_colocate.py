"""GRPO with vLLM colocate on CPU really trains, and the engine generates from the trained weights.

Trains (marked ``trains``), in float32 as the cpu profile does on every CPU. What only this module checks:
the engine's weights (what its kernels compute with) against the trainer's at every point of a step (stale
before TRL's sync, still stale in the kernels' packed copies after TRL's sync alone, equal after the shim's
repack: the negative controls), every parameter moved, the KV cache's size, and a float32 training on a machine
where the ci profile's other runs use bf16 autocast.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.trains
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def verdict(tmp_path_factory):
    out = tmp_path_factory.mktemp("colocate") / "verdict.json"
    result = subprocess.run(
        [sys.executable, str(HERE / "colocate_check.py"), str(out)],
        capture_output=True, text=True, timeout=1500,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(out.read_text())


def test_the_cpu_shim_was_applied(verdict):
    assert verdict["shim_applied"] is True


def test_every_trained_parameter_changed(verdict):
    assert verdict["steps"] == 2 and verdict["bf16"] is False and verdict["weight_dtypes"] == ["torch.float32"]
    assert verdict["changed"] == verdict["params"] > 0


def test_engine_starts_from_the_trainer_weights(verdict):
    assert verdict["diff_at_start"] == 0.0


def test_engine_is_stale_until_synced_then_equal(verdict):
    # Negative control: right after the last optimizer step vLLM still holds the previous weights,
    # so the comparison can see a difference; after TRL's sync it must see none.
    assert verdict["diff_before_sync"] > 0.0
    # The comparison reads what the kernels compute with: TRL's sync alone leaves their packed copies old
    # (the second negative control); the shim's repack after it makes them the trainer's.
    assert verdict["diff_synced_not_repacked"] > 0.0
    assert verdict["diff_after_sync"] == 0.0
    assert verdict["compared"] > 100 and verdict["missing"] == []


def test_kv_cache_is_sized_for_one_batch_not_for_the_machine(verdict):
    # The engine runs at most one generation batch of sequences at once (TRL's max_num_seqs):
    # its cache holds those at full length, and not the fixed GiB it used to take.
    assert verdict["kv_cache_needed"] <= verdict["kv_cache_bytes"] <= verdict["kv_cache_planned"]
    assert verdict["kv_cache_bytes"] < 2**30 / 4
