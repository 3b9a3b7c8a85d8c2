"""Where things live: the repository, the bundled data, the cache and the runs."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # labs/core/paths.py -> the repository
DATA_DIR = REPO_ROOT / "data"
GSM8K_DIR = DATA_DIR / "gsm8k"


def cache_dir() -> Path:
    """Converted and primed models are cached here (``COURSE_CACHE`` overrides the default)."""
    root = os.environ.get("COURSE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "grpo-course"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir() -> Path:
    """Run folders go here (``COURSE_RUNS`` overrides ``<repo>/runs``)."""
    return Path(os.environ.get("COURSE_RUNS") or REPO_ROOT / "runs")


@contextmanager
def staged_folder(target: Path):
    """Build a folder beside ``target``; it replaces ``target`` only if the block finishes.

    An interrupted build (crash, Ctrl+C, full disk) leaves ``target`` as it was and removes the
    half-written staging folder, so a later run never trusts a partial model or checkpoint.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        yield staging
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
