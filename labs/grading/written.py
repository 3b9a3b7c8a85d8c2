"""What the student wrote in a notebook's written-answer cells, told apart from the template they started from.

A written answer (C2b's three criterion-4 explanations, E1-E3's predictions) is a markdown cell with a tag
(``c2b-respuesta-funciones``, ``prediccion-e1``, ...). The student notebook gives it holding only a template,
``ESCRIBE AQUÍ tu respuesta.``; the question itself is in the cell above. The student's own text is what is left
once the template is taken out: the template sentence wherever it still stands (capitals and accents aside), the
marker ``ESCRIBE AQUÍ`` alone, and every line made only of the template's words (what is left of a template
partly deleted). So "ESCRIBE AQUÍ" deleted with "tu respuesta." left is still the template, and the marker left
beside a real answer does not hide the answer. Nothing here counts words: one word of the student's own is an
answer, which the instructor reads and judges, and no amount of the template is.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

PLACEHOLDER = "ESCRIBE AQUÍ"
ANSWER_TEMPLATE = f"{PLACEHOLDER} tu respuesta."
PREDICTION_TEMPLATE = f"{PLACEHOLDER} tu predicción, en una frase, antes de ejecutar el barrido."
WRITTEN, TEMPLATE, MISSING = "escrita", "plantilla", "falta"
MAX_CHARS = 4000

_ACCENTS = {"a": "aáà", "e": "eéè", "i": "iíì", "o": "oóò", "u": "uúüù", "n": "nñ"}


@dataclass(frozen=True)
class Written:
    """One written answer: the student's own text (None unless ``status`` is ``WRITTEN``) and its status:
    ``WRITTEN``, ``TEMPLATE`` (the cell is there, with nothing of the student's in it) or ``MISSING`` (no such cell)."""

    text: str | None
    status: str

    def __bool__(self) -> bool:
        return self.status == WRITTEN


def _fold(text: str) -> str:
    """Lower case, accents removed: how two texts are compared here."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).casefold()


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", _fold(text)))


def _loose(phrase: str) -> re.Pattern:
    """``phrase`` as a pattern that ignores capitals, accents and the spacing or punctuation between its words."""
    words = re.findall(r"\w+", _fold(phrase))
    parts = ["".join(f"[{_ACCENTS[c]}]" if c in _ACCENTS else re.escape(c) for c in w) for w in words]
    return re.compile(r"\W*".join(parts) + r"\W*", re.IGNORECASE)


def own_text(text: str, template: str) -> str | None:
    """The student's own lines of ``text`` (the template taken out), or None when nothing of theirs is left."""
    allowed = _words(template) | _words(PLACEHOLDER)
    sentence, marker = _loose(template), _loose(PLACEHOLDER)
    kept = []
    for line in text.splitlines():
        rest = marker.sub("", sentence.sub("", line)).strip()
        if not rest:
            kept.append("")
        elif _words(rest) - allowed:
            kept.append(rest)
    own = "\n".join(kept).strip()
    return re.sub(r"\n{3,}", "\n\n", own)[:MAX_CHARS] if own else None


def cell_text(cell) -> str | None:
    source = cell.get("source") if isinstance(cell, dict) else None
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else None


def tagged_markdown(notebook: dict | None, tag: str) -> list[str]:
    """The text of every markdown cell of ``notebook`` (a plain dict, never executed) that carries ``tag``."""
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    found = []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "markdown":
            continue
        meta = cell.get("metadata")
        tags = meta.get("tags") if isinstance(meta, dict) else None
        text = cell_text(cell)
        if isinstance(tags, list) and tag in tags and isinstance(text, str):
            found.append(text)
    return found


def written_answer(notebook: dict | None, tag: str, template: str) -> Written:
    """The answer in the cell tagged ``tag``; with several such cells, their own texts together."""
    cells = tagged_markdown(notebook, tag)
    if not cells:
        return Written(None, MISSING)
    own = [t for t in (own_text(c, template) for c in cells) if t]
    return Written("\n\n".join(own)[:MAX_CHARS], WRITTEN) if own else Written(None, TEMPLATE)
