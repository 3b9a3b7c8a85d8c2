"""Write what the grader found: a Spanish Markdown report per run (with its figures) and the class CSV.

Everything is written under the output folder given by the caller. Text that comes from a submission
(names, messages, answers) is escaped so it cannot inject HTML into the rendered report, and CSV cells
that a spreadsheet would read as a formula are neutralised.
"""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

from . import criteria as cr
from .figures import plot_curves, plot_holdout
from .grade import RunGrade, level4_lines
from .submissions import slug
from .written import MISSING, TEMPLATE

REPORT_NAME = "informe.md"
CSV_NAME = "resumen.csv"
CLASS_REPORT_NAME = "informe_clase.md"
FIGURES_DIR = "figuras"

ICONS = {cr.CUMPLE: "✅", cr.NO_CUMPLE: "❌", cr.NO_SE_PUEDE: "❔", cr.MANUAL: "📝"}

CSV_COLUMNS = (
    "alumno", "carpeta", "ejecucion", "criterio_1_estable", "criterio_2_curvas", "criterio_3_holdout",
    "criterio_4_explicaciones", "nivel_sugerido", "pasos", "max_pasos", "estado", "kl_max_suavizada",
    "reward_tau", "reward_p", "longitud_tau", "longitud_p", "n_problemas", "precision_base",
    "precision_entrenado", "diferencia", "ic95_inf", "ic95_sup", "mcnemar_p", "hacking_formato",
    "funciones_recompensa", "funciones_propias", "respuestas_escritas", "motivos", "informe",
)


def esc(text) -> str:
    """Submission-derived text made safe for Markdown: no HTML, one line."""
    text = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return " ".join(text.split())


def _cell(text) -> str:
    return esc(text).replace("|", "\\|")


def _bullets(title: str, items: list[str]) -> list[str]:
    if not items:
        return []
    return [f"**{title}**", ""] + [f"- {esc(i)}" for i in items] + [""]


def _finding_icon(finding) -> str:
    if finding.holds is None:
        return "❔"
    return "⚠️" if finding.warning else "✅"


def _figures(grade: RunGrade, out_dir: Path) -> list[tuple[str, str]]:
    """Draw this run's figures and copy the student's PNG curves; (caption, relative path) pairs."""
    fig_dir = out_dir / FIGURES_DIR
    made: list[tuple[str, str]] = []
    path = plot_curves(grade.data.metrics, fig_dir / "curvas.png", title=f"Curvas de {grade.name}")
    if path:
        made.append(("Curvas de entrenamiento (crudas, EMA y la recta de Theil-Sen del test de tendencia)", f"{FIGURES_DIR}/curvas.png"))
    if grade.holdout:
        plot_holdout(grade.holdout, fig_dir / "holdout.png")
        made.append(("Holdout: precisión y problemas que cambian", f"{FIGURES_DIR}/holdout.png"))
    taken: set[str] = set()
    for other in grade.comparisons:
        name = f"comparacion_{slug(other.name, taken)}.png"
        if plot_curves(other.data.metrics, fig_dir / name, title=f"Comparación: {other.name}"):
            made.append((f"Curvas de la ejecución de comparación '{other.name}'", f"{FIGURES_DIR}/{name}"))
    for png in grade.data.curves:
        target = fig_dir / "alumno" / f"{slug(png.stem, taken)}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, target)
        made.append((f"Figura entregada: {png.name}", f"{FIGURES_DIR}/alumno/{target.name}"))
    return made


def render_markdown(grade: RunGrade, figures: list[tuple[str, str]]) -> str:
    run = grade.data.run or {}
    profile = run.get("profile")
    profile = profile if isinstance(profile, dict) else {}
    lines = [
        f"# Informe C2b: {esc(grade.name)}",
        "",
        f"Ejecución evaluada: `{esc(grade.run_dir.name)}`"
        + (f" · laboratorio {esc(run.get('lab'))}" if run.get("lab") else "")
        + (f" · perfil {esc(profile.get('name'))}" if profile.get("name") else ""),
        "",
        *([esc(grade.main_why), ""] if grade.main_why else []),
        f"**Nivel sugerido: {esc(grade.level)}.** {esc(grade.level_reason)}",
        "",
        f"**Evidencia del nivel 4** (se busca en todas las ejecuciones terminadas): {esc(' '.join(level4_lines(grade.level4)))}",
        "",
        "_Sugerencia automática calculada con los archivos de la ejecución; el criterio 4 (explicaciones) y el "
        "nivel final los decide el instructor. Los umbrales se justifican en `labs/grading/RUBRIC.md`._",
        "",
        "| # | Criterio | Veredicto |",
        "|---|---|---|",
    ]
    lines += [f"| {c.number} | {_cell(c.title)} | {ICONS.get(c.verdict, '')} {c.verdict} |" for c in grade.criteria]
    lines.append("")
    if grade.problems:
        lines += ["## Problemas con la entrega", ""] + [f"- {esc(p)}" for p in grade.problems] + [""]
    lines += _recipe_changes(run)
    for c in grade.criteria:
        lines += [f"## Criterio {c.number}: {esc(c.title)} ({c.verdict})", ""]
        if c.threshold:
            lines += [f"**Umbral:** {esc(c.threshold)}", ""]
        lines += _bullets("Evidencia", c.evidence)
        lines += _bullets("Motivos", c.reasons)
        if c.number == 4:
            lines += _explanations(c)
        else:
            lines += _bullets("Notas", c.notes)
    lines += _predictions(grade)
    if figures:
        lines += ["## Figuras", ""]
        for caption, rel in figures:
            lines += [f"**{esc(caption)}**", "", f"![{esc(caption)}]({rel})", ""]
    if grade.findings:
        lines += ["## Qué observar (lección 7.5), con los números de esta ejecución", ""]
        lines += [f"- {_finding_icon(f)} {esc(f.message)}" for f in grade.findings] + [""]
    if grade.comparisons:
        lines += ["## Ejecuciones de comparación", ""]
        for other in grade.comparisons:
            hack = other.hacking.message if other.hacking else "sin métricas"
            lines.append(f"- `{esc(other.run_dir.name)}`: {esc(hack)}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _recipe_changes(run: dict) -> list[str]:
    """The changes a resume accepted (``run.json``'s ``changes``, labs.training.runrecord): the run did not
    train with one recipe from its first step to its last, and the grader must read which part used which."""
    changes = run.get("changes")
    changes = changes if isinstance(changes, list) else []
    changes = [c for c in changes if isinstance(c, dict)]
    if not changes:
        return []
    lines = ["## Cambios de receta durante la ejecución", "",
             "Esta ejecución se reanudó con ajustes o funciones de recompensa distintos de los del principio "
             "(aceptados con --accept-changes). `run.json` conserva la receta inicial; desde cada paso indicado "
             "rige el cambio:", ""]
    for change in changes:
        texts = change.get("lines_es")
        texts = texts if isinstance(texts, list) else []
        lines.append(f"- Desde el paso {esc(change.get('step', '?'))} ({esc(change.get('at', ''))}): "
                     + "; ".join(esc(t) for t in texts))
    return lines + [""]


WHY_NOT_WRITTEN = {  # a written answer's status (``written.Written``) when it holds nothing of the student's
    TEMPLATE: "la celda sigue con el texto de la plantilla (ESCRIBE AQUÍ ...): no hay nada escrito por el alumno",
    MISSING: "no está la celda de la respuesta en el notebook",
}


def _not_written(answer) -> str:
    status = getattr(answer, "status", MISSING)
    return WHY_NOT_WRITTEN.get(status, WHY_NOT_WRITTEN[MISSING])


def _explanations(c: cr.Criterion) -> list[str]:
    lines = ["**Preguntas que el alumno debe contestar por escrito (el instructor las valora):**", ""]
    answers = c.values.get("answers", {})
    for tag, question in cr.ANSWER_TAGS.items():
        lines.append(f"- {esc(question)}")
        answer = answers.get(tag)
        if answer:
            lines += ["", *[f"  > {esc(line)}" if line.strip() else "  >" for line in answer.text.splitlines()[:60]], ""]
        else:
            lines.append(f"  - _(sin respuesta: {_not_written(answer)})_")
    lines.append("")
    return lines


def _predictions(grade: RunGrade) -> list[str]:
    """The predictions the student recorded in E1-E3 before running the sweeps (not graded automatically)."""
    if not grade.predictions:
        return []
    lines = ["## Predicciones de los ejercicios (escritas antes de ver los resultados; no puntúan)", ""]
    for exercise, answer in sorted(grade.predictions.items()):
        lines.append(f"- {exercise}: " + (f"«{esc(answer.text)}»" if answer else f"_(sin predicción: {_not_written(answer)})_"))
    return lines + [""]


def write_report(grade: RunGrade, out_dir: str | Path) -> Path:
    """Write ``informe.md`` and its figures into ``out_dir``; returns the report's path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        figures = _figures(grade, out_dir)
    except Exception as exc:  # a figure must never cost the report
        figures = []
        grade.problems.append(f"No se pudieron dibujar las figuras ({type(exc).__name__}).")
    path = out_dir / REPORT_NAME
    path.write_text(render_markdown(grade, figures), encoding="utf-8")
    return path


def _num(value, digits: int = 4):
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return round(value, digits)
    return ""


def csv_row(grade: RunGrade, student: str, report: Path | None, out_dir: Path) -> dict:
    c1, c2, c3, c4 = grade.criteria
    answers = c4.values.get("answers", {})
    reasons = [r for c in grade.criteria[:3] if c.verdict != cr.CUMPLE for r in c.reasons]
    return {
        "alumno": student,
        "carpeta": str(grade.run_dir),
        "ejecucion": grade.name,
        "criterio_1_estable": c1.verdict,
        "criterio_2_curvas": c2.verdict,
        "criterio_3_holdout": c3.verdict,
        "criterio_4_explicaciones": c4.verdict,
        "nivel_sugerido": grade.level,
        "pasos": _num(c1.values.get("step")),
        "max_pasos": _num(c1.values.get("max_steps")),
        "estado": c1.values.get("state") or "",
        "kl_max_suavizada": _num(c1.values.get("kl_max_smoothed")),
        "reward_tau": _num(c2.values.get("reward_tau")),
        "reward_p": _num(c2.values.get("reward_p"), 6),
        "longitud_tau": _num(c2.values.get("length_tau")),
        "longitud_p": _num(c2.values.get("length_p"), 6),
        "n_problemas": _num(c3.values.get("n")),
        "precision_base": _num(c3.values.get("base_accuracy")),
        "precision_entrenado": _num(c3.values.get("trained_accuracy")),
        "diferencia": _num(c3.values.get("difference")),
        "ic95_inf": _num(c3.values.get("ci_low")),
        "ic95_sup": _num(c3.values.get("ci_high")),
        "mcnemar_p": _num(c3.values.get("mcnemar_p"), 6),
        "hacking_formato": {True: "sí", False: "no", None: "no se sabe"}[grade.hacking.holds] if grade.hacking else "no se sabe",
        "funciones_recompensa": ";".join(c4.values.get("reward_functions", [])),
        "funciones_propias": ";".join(grade.level4.own_rewards if grade.level4 else grade.own_rewards),
        "respuestas_escritas": sum(1 for a in answers.values() if a),
        "motivos": " | ".join(" ".join(r.split()) for r in (reasons + grade.problems))[:2000],
        "informe": str(report.relative_to(out_dir)) if report else "",
    }


def _safe_csv(value):
    """Text a spreadsheet would run as a formula gets a leading apostrophe; numbers pass unchanged."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def write_csv(rows: list[dict], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _safe_csv(row.get(k, "")) for k in CSV_COLUMNS})
    return path


def write_class_report(rows: list[dict], ignored: list[str], path: Path) -> Path:
    lines = [
        "# C2b: resumen de la clase",
        "",
        f"{len(rows)} entregas evaluadas. Detalle por alumno en su informe; la tabla completa en `{CSV_NAME}`.",
        "",
        "| Alumno | C1 estable | C2 curvas | C3 holdout | Nivel sugerido | Informe |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        link = f"[informe]({r['informe']})" if r["informe"] else ""
        lines.append(
            f"| {_cell(r['alumno'])} | {r['criterio_1_estable']} | {r['criterio_2_curvas']} | {r['criterio_3_holdout']} | "
            f"{_cell(r['nivel_sugerido'])} | {link} |"
        )
    if ignored:
        lines += ["", "Se ignoran (ni carpeta ni .zip): " + ", ".join(f"`{esc(n)}`" for n in ignored)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
