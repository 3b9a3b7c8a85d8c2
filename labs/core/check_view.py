"""``grader.check``'s result as a student reads it: in Spanish, each message once, no test source, tags visible.

otter shows a check in English ("results:", "Test case failed", "Error at line 30 in test ...") with the line of
the test's source that raised, repeats the hint under every failed case, and puts the assertion's message into
HTML unescaped, so a completion such as ``'<think></think><answer>72</answer>'`` shows as ``'72'``.
:func:`checks_in_spanish` wraps the notebook's ``grader`` (otter's ``Notebook``); its ``check`` runs otter's check
unchanged and returns a :class:`SpanishResult`, which shows the question, "correcto" or what failed (each
assertion's message once, then each hint once), escaped. Everything else is otter's.
"""

from __future__ import annotations

import html
import re
import sys

PASSED = "correcto"
FAILED = "aún no es correcto"


def case_message(message: str) -> str:
    """What one failed case says, without otter's frame: ``"❌ Test case failed\\nError at line N in test T:\\n
    <source line>\\nAssertionError: <message>"`` -> ``<message>`` (another exception keeps its type)."""
    lines = (message or "").split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith("Error at line ")), None)
    said = "\n".join(lines[start + 2:] if start is not None else lines).strip()
    return said.removeprefix("AssertionError:").strip() or "la comprobación falló sin mensaje."


def raw_exception(message: str) -> bool:
    """The case ended in an exception of the answer's own (``"AttributeError: ..."``), not in a check's sentence."""
    return re.match(r"[A-Z]\w*(Error|Exception|Interrupt)\b: ", message) is not None


def _cause(message: str) -> str:
    """The part of a check's sentence after its context (``"Con un lote de 12 respuestas: <cause>"``)."""
    return message.split(": ", 1)[-1]


def said_once(messages: list[str]) -> list[str]:
    """Each thing once (issue 52): an unwritten stub made E4's check repeat one error three times, once with its
    context, once as a raw ``ValueError``, once wrapped by another check; and E1-E3's an ``AttributeError`` (quotes
    cut by otter) after "devuelve None". A message is dropped when it repeats the cause of one already said; a raw
    exception of the answer's own is dropped when a check already said what is wrong, and otherwise said in
    Spanish."""
    kept: list[str] = []
    for message in messages:
        if any(len(_cause(k)) >= 20 and _cause(k) in message for k in kept) or message in kept:
            continue
        kept.append(message)
    sentences = [m for m in kept if not raw_exception(m)]
    if sentences:
        return sentences
    return [f"al comprobarla, tu respuesta lanzó {m}" for m in kept]


class SpanishResult:
    """One question's check result (otter's ``TestFile``), shown in Spanish; attributes are otter's."""

    def __init__(self, result):
        self._result = result

    def __getattr__(self, name):
        return getattr(self._result, name)

    def lines(self) -> tuple[list[str], list[str]]:
        """The failed cases' messages and their hints, each once, in the order they came."""
        said, hints = [], []
        for case in self._result.test_case_results:
            if case.passed:
                continue
            said.append(case_message(case.message))
            hint = case.test_case.failure_message
            if hint and hint not in hints:
                hints.append(hint)
        return said_once(said), hints

    def __repr__(self) -> str:
        name = self._result.name
        if self._result.passed_all:
            return f"{name}: ✅ {PASSED}."
        said, hints = self.lines()
        out = [f"{name}: ❌ {FAILED}."] + [f"  - {m}" for m in said] + [f"  Pista: {h}" for h in hints]
        return "\n".join(out)

    def _repr_html_(self) -> str:
        name = html.escape(self._result.name)
        if self._result.passed_all:
            return f"<p><strong>{name}</strong>: ✅ {PASSED}.</p>"
        said, hints = self.lines()
        items = "".join(f"<li><pre style='display:inline; white-space:pre-wrap'>{html.escape(m)}</pre></li>"
                        for m in said)
        hint = "".join(f"<p><em>Pista:</em> {html.escape(h)}</p>" for h in hints)
        return f"<p><strong>{name}</strong>: ❌ {FAILED}.</p><ul>{items}</ul>{hint}"


class SpanishGrader:
    """The notebook's ``grader`` with ``check`` shown in Spanish; every other attribute is otter's."""

    def __init__(self, grader):
        self._grader = grader

    def __getattr__(self, name):
        return getattr(self._grader, name)

    def check(self, question: str, global_env: dict | None = None) -> SpanishResult:
        if global_env is None:  # otter runs the tests in the caller's globals: the notebook's
            global_env = sys._getframe(1).f_globals
        return SpanishResult(self._grader.check(question, global_env))


def checks_in_spanish(grader):
    """``grader`` (otter's ``Notebook``, made by the student notebook's first cell) with Spanish checks; ``None``
    stays ``None`` (the source notebook, with the solutions, has no grader)."""
    if grader is None or isinstance(grader, SpanishGrader):
        return grader
    return SpanishGrader(grader)
