"""Read the pinned versions out of the course's two requirements files.

Only the lines the doctor needs: ``name==version`` (or ``name==5.19.*``). Comments, blank lines and
pip options (``--extra-index-url ...``) are not pins; the index URLs are kept apart because the
doctor's fix for a wrong torch build quotes them.
"""

from __future__ import annotations

import re
from pathlib import Path

from labs.core.paths import REPO_ROOT

CPU_REQUIREMENTS = "requirements.txt"
GPU_REQUIREMENTS = "requirements-gpu.txt"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")
_INDEX = re.compile(r"^--(?:extra-)?index-url(?:\s+|=)(\S+)")


def normalize(name: str) -> str:
    """PEP 503 name: ``Unsloth_Zoo`` and ``unsloth-zoo`` are the same distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirements(text: str) -> dict:
    """``{"pins": {name: version}, "index_urls": [...]}`` from a requirements file's text."""
    pins: dict[str, str] = {}
    index_urls: list[str] = []
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            match = _INDEX.match(line)
            if match:
                index_urls.append(match.group(1))
            continue
        match = _PIN.match(line)
        if match:
            pins[normalize(match.group(1))] = match.group(2)
    return {"pins": pins, "index_urls": index_urls}


def read_requirements(filename: str, root: Path = REPO_ROOT) -> dict:
    """Parse ``root/filename``; a missing file gives empty pins and ``found: False``."""
    path = Path(root) / filename
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {"file": filename, "found": False, "pins": {}, "index_urls": []}
    return {"file": filename, "found": True, **parse_requirements(text)}


def read_both(root: Path = REPO_ROOT) -> dict:
    """The CPU and the GPU stack, keyed ``"cpu"`` and ``"gpu"``."""
    return {"cpu": read_requirements(CPU_REQUIREMENTS, root), "gpu": read_requirements(GPU_REQUIREMENTS, root)}
