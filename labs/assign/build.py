"""Run ``otter assign`` on each source notebook and keep its student version in ``notebooks/``."""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import re
import tempfile
from pathlib import Path

import nbformat

from labs.core.paths import REPO_ROOT

SOURCES_DIR = REPO_ROOT / "sources"
STUDENT_DIR = REPO_ROOT / "notebooks"


def generate(source: Path, out_dir: Path) -> dict[str, Path]:
    """Run otter assign on ``source`` into ``out_dir``: ``{"student": ..., "autograder": ...}``.

    The autograder version keeps the solutions and has the same ``grader.check`` cells as the student one;
    the tests use it to prove that every check passes on the solution.
    """
    from otter.assign import main as otter_assign  # imported here: only this command and its tests need it

    source, out_dir = Path(source).resolve(), Path(out_dir).resolve()
    # otter logs every step at INFO and prints its progress; keep the command's output to what changed.
    logging.getLogger("otter").setLevel(logging.WARNING)
    with contextlib.redirect_stdout(io.StringIO()):
        otter_assign(str(source), str(out_dir), no_pdfs=True, no_run_tests=True)
    return {view: out_dir / view / source.name for view in ("student", "autograder")}


def render(source: Path) -> str:
    """The student notebook of ``source`` as the text ``notebooks/`` should hold."""
    with tempfile.TemporaryDirectory(prefix="otter-assign-") as tmp:
        student = generate(source, Path(tmp))["student"]
        nb = nbformat.read(student, as_version=4)
    stable_cell_ids(nb)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)  # nbclient's timestamps from the source's last run: noise here
    return nbformat.writes(nb) + "\n"


def stable_cell_ids(nb) -> None:
    """Give the cells otter adds a fixed id (it draws a random one), so a rebuild changes nothing."""
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        text = cell.source if isinstance(cell.source, str) else "".join(cell.source)
        check = re.fullmatch(r'grader\.check\("([\w-]+)"\)\s*', text)
        if text.startswith("# Initialize Otter"):
            cell.id = "otter-init"
        elif check:
            cell.id = f"check-{check.group(1)}"
        elif not cell.get("id") or cell.id in seen:
            cell.id = f"cell-{index}"
        seen.add(cell.id)


def sources() -> list[Path]:
    return sorted(SOURCES_DIR.glob("*.ipynb"))


def stale_notebooks() -> list[str]:
    """Names of the student notebooks that differ from what their sources generate (or are missing or extra)."""
    stale = [src.name for src in sources()
             if not (STUDENT_DIR / src.name).exists() or (STUDENT_DIR / src.name).read_text() != render(src)]
    extra = sorted({p.name for p in STUDENT_DIR.glob("*.ipynb")} - {s.name for s in sources()})
    return stale + extra


def write_student_notebooks() -> list[str]:
    """Regenerate every student notebook; return the names whose text changed."""
    STUDENT_DIR.mkdir(exist_ok=True)
    changed = []
    for src in sources():
        target, text = STUDENT_DIR / src.name, render(src)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
            changed.append(src.name)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labs notebooks",
        description="Genera notebooks/ (la versión del alumno) desde sources/ con otter assign.")
    parser.add_argument("--check", action="store_true",
                        help="no escribe nada: dice qué cuadernos de notebooks/ no coinciden con sus fuentes")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_notebooks()
        if stale:
            print("Desactualizados respecto a sources/: " + ", ".join(stale)
                  + ". Regenera con: python -m labs notebooks")
            return 1
        print("notebooks/ coincide con sources/.")
        return 0
    changed = write_student_notebooks()
    print("Regenerados: " + (", ".join(changed) if changed else "ninguno (ya coincidían)"))
    return 0
