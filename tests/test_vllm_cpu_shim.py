"""The CPU shim's KV-cache size: one batch of full-length sequences, read from the model's config."""

import json

from labs.training import vllm_cpu_shim as shim

SMOLLM2 = {"num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576, "num_hidden_layers": 30}


def test_bytes_per_token_is_k_and_v_of_every_layer_in_float32(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2))
    assert shim.kv_bytes_per_token(str(tmp_path)) == 2 * 30 * 3 * 64 * 4


def test_cache_holds_one_more_sequence_than_the_batch_in_whole_blocks(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**SMOLLM2, "head_dim": 64}))
    # 352 tokens round up to 3 blocks of 128; 8 + 1 sequences
    assert shim.kv_cache_bytes_for(str(tmp_path), 8, 352) == 9 * 3 * 128 * 46080
    assert shim.kv_cache_bytes_for(str(tmp_path), 8, 352) >= 8 * 352 * 46080


def test_falls_back_to_the_old_fixed_size_and_never_exceeds_it(tmp_path):
    assert shim.kv_cache_bytes_for(str(tmp_path / "missing"), 8, 352) == shim.CPU_KV_CACHE_BYTES
    (tmp_path / "config.json").write_text(json.dumps(SMOLLM2))
    assert shim.kv_cache_bytes_for(str(tmp_path), None, 352) == shim.CPU_KV_CACHE_BYTES
    assert shim.kv_cache_bytes_for(str(tmp_path), 4096, 8192) == shim.CPU_KV_CACHE_BYTES
