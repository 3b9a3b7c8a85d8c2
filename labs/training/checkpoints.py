"""Checkpoints a run can trust: validate before resuming, set torn ones aside, save atomically.

A crash, a ``kill -9`` or a full disk during a save leaves a ``checkpoint-<step>/`` folder whose files
are cut short; transformers would pick it as the newest and fail on it at every relaunch
(``SafetensorError``). ``problem`` reads every file the trainer will load without unpickling anything:
the safetensors headers (with the safetensors library) and their sizes, ``trainer_state.json``, and the
``torch.save`` zip archives (optimizer, scheduler, RNG) up to their central directory.

A torn checkpoint is moved into ``checkpoints/_rotos/`` (kept for inspection, never deleted here). That
folder, and the staging folder ``.guardando/`` used by ``save_atomically``, do not match the trainer's
``checkpoint-*`` glob (``transformers.trainer_utils.sort_checkpoints``/``rotate_checkpoints``) nor
``get_last_checkpoint``'s ``^checkpoint-(\\d+)$``: rotation never deletes them and resume never picks them.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zipfile
from pathlib import Path

TORN_DIR = "_rotos"
STAGING_DIR = ".guardando"
TORCH_ARCHIVES = ("optimizer.pt", "scheduler.pt")  # written by Trainer._save_optimizer_and_scheduler


def step_of(folder: Path) -> int | None:
    name = Path(folder).name
    if not name.startswith("checkpoint-"):
        return None
    try:
        return int(name.split("-", 1)[1])
    except ValueError:
        return None


def _safetensors_problem(path: Path) -> str | None:
    """The header must parse (safetensors library) and the file must hold every tensor it lists."""
    from safetensors import SafetensorError, safe_open

    size = path.stat().st_size
    header_len = 0
    try:
        with open(path, "rb") as fh:
            (header_len,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(header_len)) if 8 + header_len <= size else None
    except (struct.error, ValueError, UnicodeDecodeError):
        header = None
    if header is None:
        return f"{path.name} tiene la cabecera cortada ({size} bytes)"
    end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
    expected = 8 + header_len + end
    if size < expected:
        return f"{path.name} está cortado: tiene {size} bytes y su cabecera pide {expected}"
    try:
        with safe_open(str(path), "pt") as f:
            f.keys()
    except (SafetensorError, OSError) as exc:
        return f"{path.name} no se puede leer ({exc})"
    return None


def _archive_problem(path: Path) -> str | None:
    """A torch.save file is a zip archive: its central directory sits at the end, so a cut one has none."""
    size = path.stat().st_size
    if size == 0:
        return f"{path.name} está vacío"
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.header_offset + info.compress_size > size:
                    return f"{path.name} está cortado"
    except (zipfile.BadZipFile, OSError):
        return f"{path.name} está cortado o no es un archivo de torch.save ({size} bytes)"
    return None


def problem(folder: Path) -> str | None:
    """Why the trainer could not resume from ``folder`` (Spanish), or None if every file it loads is whole."""
    folder = Path(folder)
    state = folder / "trainer_state.json"
    if not state.exists():
        return "falta trainer_state.json (el guardado no terminó)"
    try:
        json.loads(state.read_text(encoding="utf-8"))["global_step"]
    except (ValueError, KeyError, TypeError):
        return "trainer_state.json está incompleto o no es JSON"
    weights = sorted(folder.glob("*.safetensors"))
    index = folder / "model.safetensors.index.json"
    if index.exists():
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (ValueError, KeyError):
            return "model.safetensors.index.json está incompleto"
        missing = sorted(s for s in shards if not (folder / s).exists())
        if missing:
            return f"faltan trozos del modelo: {', '.join(missing)}"
    if not weights:
        return "no hay pesos del modelo (*.safetensors)"
    for path in weights:
        text = _safetensors_problem(path)
        if text:
            return text
    deepspeed = any(folder.glob("global_step*"))  # ZeRO keeps its optimizer state in its own folder
    archives = [] if deepspeed else [folder / n for n in TORCH_ARCHIVES]
    archives += sorted(folder.glob("rng_state*.pth"))
    for path in archives:
        if not path.exists():
            return f"falta {path.name}"
        text = _archive_problem(path)
        if text:
            return text
    return None


def set_aside(folder: Path) -> Path:
    """Move a torn checkpoint into ``checkpoints/_rotos/`` (a free name there); return where it went."""
    folder = Path(folder)
    target_dir = folder.parent / TORN_DIR
    target_dir.mkdir(exist_ok=True)
    target, n = target_dir / folder.name, 1
    while target.exists():
        target, n = target_dir / f"{folder.name}.{n}", n + 1
    os.replace(folder, target)
    return target


def newest_usable(checkpoints_dir: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """The newest checkpoint that passes ``problem``, and the newer ones that did not, with why."""
    folders = []
    if Path(checkpoints_dir).is_dir():
        folders = [c for c in Path(checkpoints_dir).iterdir() if c.is_dir() and step_of(c) is not None]
    torn = []
    for folder in sorted(folders, key=lambda c: step_of(c) or 0, reverse=True):
        text = problem(folder)
        if text is None:
            return folder, torn
        torn.append((folder, text))
    return None, torn


def remove_staging(checkpoints_dir: Path) -> bool:
    """Drop what a save killed half-way left in the staging folder (it never became a checkpoint)."""
    staging = Path(checkpoints_dir) / STAGING_DIR
    if staging.exists():
        shutil.rmtree(staging, ignore_errors=True)
        return True
    return False


def skip_archive_checksums() -> None:
    """Let ``torch.save`` write its zip records without CRC-32 checksums (the optimizer's, above all).

    Nothing reads them: ``torch.load`` does not check them, and ``problem`` checks a cut archive by its
    central directory, not by checksum. Computing them was half of writing a checkpoint on a CPU: a
    SmolLM2 optimizer state (1.1 GB) took 3.2 s with them and 1.6 s without (torch 2.13, 1 thread).
    """
    import torch

    if hasattr(torch.serialization, "set_crc32_options"):  # torch >= 2.5
        torch.serialization.set_crc32_options(False)


def save_atomically(trainer) -> bool:
    """Make ``trainer`` write each checkpoint beside the others and rename it into place when complete.

    ``Trainer._save_checkpoint`` writes into ``<output_dir>/checkpoint-<step>`` file by file, then rotates
    old checkpoints. Here it writes into ``<output_dir>/.guardando/`` (through ``_get_output_dir``, the one
    place it asks where), and only a finished folder is renamed to ``checkpoint-<step>`` (one
    ``os.replace``), after which the trainer's own rotation runs on the real folder. A kill during the
    save leaves the previous checkpoint as the newest. Single-process runs only: under ``accelerate
    launch`` every rank writes its own files and the rename would need a barrier; there the checks of
    ``problem`` at resume still apply. True if installed now.
    """
    from labs.core import distributed

    original = trainer._save_checkpoint
    if getattr(original, "_course_atomic", False) or distributed.is_distributed():
        return False
    try:  # transformers 5.x; on an older one the trainer's own (non-atomic) save stays
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints
    except ImportError:
        return False
    if not hasattr(trainer, "_get_output_dir"):
        return False

    def _save_checkpoint(model, trial):
        real = Path(trainer._get_output_dir(trial=trial))
        staging = real / STAGING_DIR
        name = f"{PREFIX_CHECKPOINT_DIR}-{trainer.state.global_step}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        trainer._get_output_dir = lambda trial=None: str(staging)
        try:
            original(model, trial)
        finally:
            del trainer._get_output_dir  # back to the class's method
        final = real / name
        if final.exists():  # the same step saved again after a resume from an older one
            shutil.rmtree(final)
        os.replace(staging / name, final)
        _fsync_dir(real)
        shutil.rmtree(staging, ignore_errors=True)
        if trainer.args.should_save:
            rotate_checkpoints(output_dir=str(real), save_total_limit=trainer.args.save_total_limit,
                               best_model_checkpoint=trainer.state.best_model_checkpoint, use_mtime=True)

    _save_checkpoint._course_atomic = True
    trainer._save_checkpoint = _save_checkpoint
    return True


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
