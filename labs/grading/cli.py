"""Front doors: grade a run, a submission or a class into an output folder; ``main`` for the terminal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .grade import RunGrade, grade_run, grade_submission
from .report import CLASS_REPORT_NAME, CSV_NAME, csv_row, write_class_report, write_csv, write_report
from .submissions import class_submissions, is_run_folder, slug, unpack_zip


def _write(grade: RunGrade, student: str, out_dir: Path, root: Path) -> dict:
    try:
        report = write_report(grade, out_dir)
    except Exception as exc:  # the CSV row still records the student
        grade.problems.append(f"No se pudo escribir el informe ({type(exc).__name__}).")
        report = None
    return csv_row(grade, student, report, root)


def grade_one(path: str | Path, out_dir: str | Path, submission: bool = False) -> RunGrade:
    """Grade one run folder (or, with ``submission``, one student's folder or .zip); write its report."""
    path, out_dir = Path(path), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".zip" and path.is_file():
        dest = out_dir / "_entregas" / slug(path.stem)
        grade = grade_submission(dest, name=path.stem, problems=unpack_zip(path, dest))
    elif submission or not is_run_folder(path):
        grade = grade_submission(path, skip=out_dir)
    else:
        grade = grade_run(path)
    write_csv([_write(grade, grade.name, out_dir, out_dir)], out_dir / CSV_NAME)
    return grade


def grade_class(class_dir: str | Path, out_dir: str | Path) -> list[RunGrade]:
    """Grade every folder and .zip inside ``class_dir``; one report each, one CSV, one class summary."""
    class_dir, out_dir = Path(class_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    submissions, ignored = class_submissions(class_dir, out_dir)
    taken = {"_entregas", "figuras"}
    grades, rows = [], []
    for sub in submissions:
        root = sub.root if sub.root is not None else class_dir / ".no-existe"
        grade = grade_submission(root, name=sub.name, problems=sub.problems, skip=out_dir)
        grades.append(grade)
        rows.append(_write(grade, sub.name, out_dir / slug(sub.name, taken), out_dir))
    write_csv(rows, out_dir / CSV_NAME)
    write_class_report(rows, ignored, out_dir / CLASS_REPORT_NAME)
    return grades


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labs.grading",
        description=(
            "Evalúa el checkpoint C2b a partir de carpetas de ejecución. RUTA puede ser una carpeta de ejecución, "
            "la entrega de un alumno (carpeta o .zip) o una carpeta con una entrega por alumno."
        ),
    )
    parser.add_argument("path", metavar="RUTA")
    parser.add_argument("--out", required=True, metavar="CARPETA", help="carpeta donde se escriben informes, figuras y CSV")
    parser.add_argument("--submission", action="store_true", help="tratar RUTA como la entrega de un solo alumno")
    args = parser.parse_args(argv)
    path, out_dir = Path(args.path), Path(args.out)
    if not path.exists():
        print(f"No existe {path}: indica una carpeta de ejecución, una entrega o una carpeta de clase.", file=sys.stderr)
        return 2
    single = args.submission or path.is_file() or is_run_folder(path)
    if single:
        grade = grade_one(path, out_dir, submission=args.submission)
        print(f"{grade.name}: {', '.join(grade.verdicts)} -> {grade.level}")
        print(f"Informe: {out_dir / 'informe.md'}")
    else:
        grades = grade_class(path, out_dir)
        for g in grades:
            print(f"{g.name}: {', '.join(g.verdicts)} -> {g.level}")
        print(f"{len(grades)} entregas. Resumen: {out_dir / CSV_NAME} y {out_dir / CLASS_REPORT_NAME}")
    return 0
