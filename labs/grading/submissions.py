"""Find the students' submissions in a class folder, and unpack zip files safely.

A class folder holds one entry per student: a folder, or a ``.zip`` file, containing one or more run
folders (a folder with ``run.json``, ``status.json``, ``metrics.jsonl`` or ``eval/``), possibly nested,
and optionally the student's ``C2b_rubrica.ipynb`` and exercise notebooks (``E1_*.ipynb`` to ``E3_*.ipynb``,
whose predictions, written in a markdown cell before the runs, the report quotes; ``exercise_predictions`` reads
them as text, never executing anything, and ``written`` tells them from the template).

Zip files are never extracted with ``extractall``. Each member is checked and only the kinds of file the
grader reads (JSON, JSON lines, PNG, CSV, notebooks) are copied, into a folder inside the output
folder: names with ``..``, absolute paths, drive letters or control characters are refused, symbolic
links and encrypted members are skipped, and every member is read with a size limit that does not trust
the size the zip header claims, so a zip bomb stops at the limit. Folders are walked without following
symbolic links.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from labs.core import runfolder as rf

from .inputs import MAX_JSON_BYTES, MAX_JSONL_BYTES, MAX_PNG_BYTES, InputError, parse_json_object, read_limited
from .written import PREDICTION_TEMPLATE, Written, written_answer

RUN_MARKERS = (rf.RUN_JSON, rf.STATUS_JSON, rf.METRICS_JSONL, rf.EVAL_DIR)
ZIP_SUFFIXES = {".json": MAX_JSON_BYTES, ".ipynb": MAX_JSON_BYTES, ".jsonl": MAX_JSONL_BYTES, ".csv": MAX_JSON_BYTES, ".png": MAX_PNG_BYTES}
MAX_ZIP_MEMBERS = 20_000
MAX_ZIP_TOTAL_BYTES = 512 * 1024 * 1024  # what one submission may unpack, all files together
MAX_WALK_DEPTH = 4
MAX_RUNS_PER_SUBMISSION = 20
NOTEBOOK_NAME = "C2b_rubrica.ipynb"
PREDICTION_EXERCISES = ("E1", "E2", "E3")  # notebook E1_*.ipynb records its prediction in a cell tagged prediccion-e1
MAX_PREDICTION_CHARS = 1000


@dataclass
class Submission:
    name: str  # as the instructor sees it (folder or zip name)
    source: Path
    root: Path | None = None  # folder to grade (the unpacked copy for a zip)
    problems: list[str] = field(default_factory=list)


def slug(name: str, taken: set[str] | None = None) -> str:
    """A safe folder name for ``name`` (letters, digits, ``-``, ``_``), unique within ``taken``."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    text = re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_.")[:60] or "entrega"
    if taken is not None:
        base, i = text, 2
        while text.lower() in taken:
            text = f"{base}_{i}"
            i += 1
        taken.add(text.lower())
    return text


def is_run_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink() and any((path / m).exists() for m in RUN_MARKERS)


def find_run_folders(root: Path, skip: Path | None = None) -> list[Path]:
    """Run folders under ``root`` (itself included), at most ``MAX_WALK_DEPTH`` levels down."""
    found: list[Path] = []
    skip_resolved = skip.resolve() if skip is not None else None

    def walk(folder: Path, depth: int) -> None:
        if len(found) >= MAX_RUNS_PER_SUBMISSION or folder.is_symlink():
            return
        if skip_resolved is not None and folder.resolve() == skip_resolved:
            return
        if is_run_folder(folder):
            found.append(folder)
            return
        if depth >= MAX_WALK_DEPTH:
            return
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
        except OSError:
            return
        for child in children[:500]:
            if not child.name.startswith(("__MACOSX", ".")):
                walk(child, depth + 1)

    walk(root, 0)
    return found


def find_notebooks(root: Path) -> list[Path]:
    """The student's rubric notebooks under ``root`` (exact name first, then any ``*.ipynb``)."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        depth = len(Path(dirpath).relative_to(root).parts)
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "__MACOSX")) and depth < MAX_WALK_DEPTH]
        for name in filenames:
            path = Path(dirpath) / name
            if name.endswith(".ipynb") and not path.is_symlink():
                found.append(path)
        if len(found) > 50:
            break
    return sorted(found, key=lambda p: (p.name != NOTEBOOK_NAME, len(p.parts), str(p)))


def exercise_of(path: Path) -> str | None:
    """``E1`` for ``E1_tamano_de_grupo.ipynb`` (and E2, E3); None for any other notebook."""
    head = path.name.split("_", 1)[0].upper()
    return head if head in PREDICTION_EXERCISES and path.suffix == ".ipynb" else None


def rubric_notebook(notebooks: list[Path]) -> Path | None:
    """The rubric notebook among ``find_notebooks``' list: the exact name, else the first that is not an exercise."""
    return next((p for p in notebooks if exercise_of(p) is None), None)


def prediction_in(notebook: dict | None, exercise: str) -> Written:
    """The prediction recorded in a notebook's markdown cell tagged ``prediccion-e1`` (``e2``, ``e3``), read as
    text (never executed): the student's own words, or why there are none (still the template, or no such cell)."""
    written = written_answer(notebook, f"prediccion-{exercise.lower()}", PREDICTION_TEMPLATE)
    if written.text is not None and len(written.text) > MAX_PREDICTION_CHARS:
        return Written(written.text[:MAX_PREDICTION_CHARS], written.status)
    return written


def exercise_predictions(notebooks: list[Path]) -> dict[str, Written]:
    """E1-E3's predictions from the student's exercise notebooks (the shallowest notebook of each exercise)."""
    out: dict[str, Written] = {}
    for path in notebooks:
        exercise = exercise_of(path)
        if exercise is not None and exercise not in out:
            out[exercise] = prediction_in(read_notebook(path), exercise)
    return out


def _safe_member_path(name: str) -> PurePosixPath | None:
    """The member's relative path if it is safe to recreate inside a folder, else None."""
    name = name.replace("\\", "/")
    if not name or name.startswith("/") or re.match(r"^[A-Za-z]:", name) or any(ord(c) < 32 for c in name):
        return None
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        return None
    if any(p.startswith("__MACOSX") or p.startswith("._") for p in parts):
        return None
    return PurePosixPath(*parts)


def unpack_zip(zip_path: Path, dest: Path) -> list[str]:
    """Copy the readable files of ``zip_path`` into ``dest``; returns the problems found (Spanish)."""
    problems: list[str] = []
    skipped_kinds: set[str] = set()
    if dest.exists() and not dest.is_symlink():
        shutil.rmtree(dest)  # a previous grading's copy: start clean
    dest.mkdir(parents=True, exist_ok=True)
    dest_resolved = dest.resolve()
    total = 0
    try:
        with zipfile.ZipFile(zip_path) as archive:
            members = archive.infolist()
            if len(members) > MAX_ZIP_MEMBERS:
                return [f"No se puede evaluar {zip_path.name} porque tiene {len(members)} archivos (el límite es {MAX_ZIP_MEMBERS})."]
            for info in members:
                if info.is_dir():
                    continue
                relative = _safe_member_path(info.filename)
                if relative is None:
                    problems.append(f"Se ignora {info.filename[:80]!r} del zip porque su ruta no es segura (absoluta o con '..').")
                    continue
                mode = info.external_attr >> 16
                if stat.S_ISLNK(mode):
                    problems.append(f"Se ignora {relative} del zip porque es un enlace simbólico.")
                    continue
                limit = ZIP_SUFFIXES.get(relative.suffix.lower())
                if limit is None:
                    skipped_kinds.add(relative.suffix.lower() or "(sin extensión)")
                    continue
                if info.flag_bits & 0x1:
                    problems.append(f"Se ignora {relative} del zip porque está cifrado.")
                    continue
                if info.file_size > limit or total + info.file_size > MAX_ZIP_TOTAL_BYTES:
                    problems.append(f"Se ignora {relative} del zip porque ocupa demasiado ({info.file_size / 2**20:.1f} MB).")
                    continue
                target = dest / Path(*relative.parts)
                if not target.resolve().is_relative_to(dest_resolved):
                    problems.append(f"Se ignora {relative} del zip porque saldría de la carpeta de salida.")
                    continue
                with archive.open(info) as member:
                    data = member.read(limit + 1)  # the header's size may lie: read at most the limit
                if len(data) > limit:
                    problems.append(f"Se ignora {relative} del zip porque al descomprimirlo supera el límite de {limit / 2**20:.0f} MB.")
                    continue
                total += len(data)
                if total > MAX_ZIP_TOTAL_BYTES:
                    problems.append(f"Se deja de leer {zip_path.name} porque lo descomprimido supera {MAX_ZIP_TOTAL_BYTES / 2**20:.0f} MB.")
                    break
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                except OSError:
                    problems.append(f"Se ignora {relative} del zip porque choca con otro archivo del mismo zip.")
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError) as exc:
        problems.append(f"No se puede leer {zip_path.name} porque el zip está dañado o usa un formato no admitido ({type(exc).__name__}).")
    if skipped_kinds:
        kinds = ", ".join(sorted(skipped_kinds)[:8])
        problems.append(f"Del zip solo se leen JSON, JSONL, PNG, CSV y notebooks; se ignoran los archivos {kinds}.")
    return problems


def class_submissions(class_dir: Path, out_dir: Path) -> tuple[list[Submission], list[str]]:
    """One Submission per folder or zip file directly inside ``class_dir`` (zips unpacked under
    ``out_dir/_entregas``), and the names of the other entries, which are ignored."""
    subs: list[Submission] = []
    ignored: list[str] = []
    taken: set[str] = set()
    out_resolved = out_dir.resolve()
    for entry in sorted(class_dir.iterdir()):
        if entry.name.startswith((".", "__MACOSX")) or entry.resolve() == out_resolved:
            continue
        if entry.is_symlink():
            subs.append(Submission(entry.name, entry, problems=[f"No se puede evaluar {entry.name} porque es un enlace simbólico."]))
            continue
        if entry.is_dir():
            subs.append(Submission(entry.name, entry, root=entry))
        elif entry.suffix.lower() == ".zip":
            dest = out_dir / "_entregas" / slug(entry.stem, taken)
            sub = Submission(entry.stem, entry, root=dest)
            sub.problems.extend(unpack_zip(entry, dest))
            subs.append(sub)
        else:
            ignored.append(entry.name)
    return subs, ignored


def read_notebook(path: Path) -> dict | None:
    """A notebook as a plain dict (JSON only, nothing executed), or None if it cannot be read."""
    try:
        return parse_json_object(read_limited(path, MAX_JSON_BYTES))
    except InputError:
        return None
