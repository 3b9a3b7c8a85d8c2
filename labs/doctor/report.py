"""Turn checks into the text a student reads: an aligned table, the fixes, one verdict line."""

from __future__ import annotations

import textwrap

from labs.doctor.checks import LEVEL_LABELS, OK, Check, verdict

HEADERS = ("ESTADO", "COMPROBACIÓN", "DETALLE")
WIDTH = 110  # fits a notebook cell and a wide terminal; long details wrap under their column


def format_table(checks: list[Check], width: int = WIDTH) -> str:
    status_w = max(len(HEADERS[0]), *(len(LEVEL_LABELS[c.level]) for c in checks))
    name_w = max(len(HEADERS[1]), *(len(c.name) for c in checks))
    indent = status_w + name_w + 4
    detail_w = max(30, width - indent)
    lines = [f"{HEADERS[0]:<{status_w}}  {HEADERS[1]:<{name_w}}  {HEADERS[2]}",
             f"{'-' * status_w}  {'-' * name_w}  {'-' * min(detail_w, 40)}"]
    for c in checks:
        wrapped = textwrap.wrap(c.detail, detail_w, break_on_hyphens=False, break_long_words=False) or [""]
        lines.append(f"{LEVEL_LABELS[c.level]:<{status_w}}  {c.name:<{name_w}}  {wrapped[0]}")
        lines += [" " * indent + more for more in wrapped[1:]]
    return "\n".join(lines)


def format_fixes(checks: list[Check], width: int = WIDTH) -> str:
    """Numbered fixes for every line that is not OK; empty when there is nothing to fix."""
    todo = [c for c in checks if c.level != OK]
    if not todo:
        return ""
    lines = ["Cómo arreglarlo:"]
    for i, c in enumerate(todo, 1):
        head = f"{i}. [{LEVEL_LABELS[c.level]}] {c.name}: "
        lines += textwrap.wrap(c.fix_es, width, initial_indent=head, subsequent_indent=" " * 4,
                               break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


def format_report(checks: list[Check], profile_name: str | None = None, width: int = WIDTH) -> str:
    parts = [format_table(checks, width), format_fixes(checks, width), verdict(checks, profile_name)]
    return "\n\n".join(p for p in parts if p)
