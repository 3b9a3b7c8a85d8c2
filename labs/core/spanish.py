"""Small helpers for generated Spanish sentences: grammatical number and durations."""

from __future__ import annotations


def plural(n: int, singular: str, plural_form: str | None = None) -> str:
    """``n`` and the noun in the right number: ``plural(1, "problema")`` -> "1 problema", 2 -> "2 problemas".

    ``plural_form`` for nouns that do not just add "s" (``plural(2, "variante reutilizada", "variantes
    reutilizadas")``, ``plural(3, "error", "errores")``).
    """
    word = singular if n == 1 else (plural_form or f"{singular}s")
    return f"{n} {word}"


def duration_es(seconds: float) -> str:
    """A duration a student reads: "45 s", "12 min", "3 h 05 min"."""
    seconds = max(float(seconds), 0.0)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
