"""The profile the student chose once (``python -m labs profile --choose <name>``), remembered in the run area.

The choice lives in ``runs_dir() / CHOICE_FILE`` next to the runs it selects, so every lab, notebook and sweep
that asks ``get_profile()`` without a name finds the same folders (``l71-<profile>``, ``ref-<profile>``, ...).
``COURSE_PROFILE`` and ``--profile`` still override it (``labs.core.profiles.default_profile_name``).

Why a saved GPU profile needs a visible GPU: the run area travels with the repository (a copy on a laptop, a
CPU test run). A saved ``rtx5090-base`` there would make a CPU lab load a 4B model it cannot train, so
``saved_default`` applies a GPU profile only where a CUDA GPU is visible and otherwise falls back to ``cpu``,
saying why. A saved CPU profile (``cpu``, ``ci``) applies everywhere.

A missing file means "no choice yet"; an unreadable one is reported in the reason and ignored (nothing the
student saved elsewhere is touched, and the fix is to choose again).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from labs.core.paths import runs_dir

CHOICE_FILE = "perfil_elegido.json"
CHOOSE_COMMAND = "python -m labs profile --choose <perfil>"


def choice_path(root: Path | str | None = None) -> Path:
    return Path(root if root is not None else runs_dir()) / CHOICE_FILE


def save_choice(name: str, *, why: str = "", source: str = "manual", root: Path | str | None = None) -> Path:
    """Remember ``name`` as the student's profile; ``source`` says who chose it ("manual", "ensayo")."""
    from labs.core.profile_table import PROFILES, ProfileError

    key = (name or "").strip().lower()
    if key not in PROFILES:
        raise ProfileError(
            f"No existe el perfil '{name}'. Perfiles válidos: {', '.join(sorted(PROFILES))}. "
            f"Elige uno con {CHOOSE_COMMAND}."
        )
    path = choice_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"profile": key, "source": source, "why": why,
              "saved": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)  # never a half-written choice
    return path


def read_choice(root: Path | str | None = None) -> dict | None:
    """The saved record, None when nothing was saved; ``{"error": ...}`` when the file cannot be used."""
    from labs.core.profile_table import PROFILES

    path = choice_path(root)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        name = str(record["profile"]).strip().lower()
    except (OSError, ValueError, TypeError, KeyError):
        return {"error": f"{path} no se puede leer (no es el JSON que escribe {CHOOSE_COMMAND})", "path": str(path)}
    if name not in PROFILES:
        return {"error": f"{path} guarda el perfil '{name}', que no existe (válidos: {', '.join(sorted(PROFILES))})",
                "path": str(path)}
    return {**record, "profile": name, "path": str(path)}


def forget_choice(root: Path | str | None = None) -> bool:
    path = choice_path(root)
    if path.exists():
        path.unlink()
        return True
    return False


def saved_default(cuda_visible, root: Path | str | None = None) -> tuple[str, str] | None:
    """``(profile, reason)`` from the saved choice, or None when there is none (or it cannot be used).

    ``cuda_visible`` is a callable (``labs.core.profiles.cuda_available``), called only for a saved GPU
    profile. The reasons are Spanish: the labs print them next to the profile's name.
    """
    from labs.core.profile_table import PROFILES

    record = read_choice(root)
    if record is None:
        return None
    if "error" in record:
        return None
    name = record["profile"]
    where = f"guardado en {record['path']}"
    if PROFILES[name].use_cpu:
        return name, f"lo elegiste con python -m labs profile ({where})"
    if cuda_visible():
        return name, f"lo elegiste con python -m labs profile ({where}) y se ve una GPU CUDA"
    return "cpu", (
        f"elegiste {name} en {record['path']}, pero aquí no se ve ninguna GPU CUDA: uso cpu para no cargar un "
        f"modelo de 4B que esta máquina no puede entrenar"
    )


def unusable_note(root: Path | str | None = None) -> str:
    """A Spanish sentence when the saved choice exists but cannot be used; empty otherwise."""
    record = read_choice(root)
    if record and "error" in record:
        return f"; la elección guardada no vale ({record['error']}): vuelve a elegir con {CHOOSE_COMMAND}"
    return ""
