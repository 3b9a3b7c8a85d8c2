"""The GPU stack's pip resolution report, kept in the course cache under the hash of what it came from.

Resolving requirements-gpu.txt against PyPI takes one to three minutes (test_gpu_resolution.py). Its
answer depends on the requirements file, on the resolution's options (target Python, platforms) and on
what PyPI serves; the first two are hashed into the report's name, the third is bounded by an age limit:
a report older than ``MAX_AGE_S`` is resolved again, so a newly published wheel that breaks the stack
is seen within a week. ``GPU_RESOLUTION_FRESH=1`` resolves again whatever the cache holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

MAX_AGE_S = 7 * 24 * 3600
FRESH_ENV = "GPU_RESOLUTION_FRESH"


def resolution_key(requirements_text: str, options: list[str]) -> str:
    """Hash of the requirements file's text and of the resolver's options (without paths)."""
    digest = hashlib.sha256(requirements_text.encode("utf-8"))
    digest.update(b"\0" + "\0".join(options).encode("utf-8"))
    return digest.hexdigest()[:32]


class ReportCache:
    def __init__(self, folder: Path, key: str):
        self.path = Path(folder) / f"report-{key}.json"

    def load(self, max_age_s: float = MAX_AGE_S, now: float | None = None) -> dict | None:
        """The stored report if it is younger than ``max_age_s`` and readable; None otherwise."""
        if os.environ.get(FRESH_ENV) == "1" or not self.path.is_file():
            return None
        age = (time.time() if now is None else now) - self.path.stat().st_mtime
        if age > max_age_s:
            return None
        try:
            report = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # a damaged file is resolved again, then overwritten
        return report if isinstance(report, dict) and isinstance(report.get("install"), list) else None

    def store(self, report: dict) -> Path:
        """Written to a temporary file and renamed, so a reader never sees half a report."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".report-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(report, fh)
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the report from another account sharing the cache
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return self.path

    def age_s(self) -> float:
        return time.time() - self.path.stat().st_mtime
