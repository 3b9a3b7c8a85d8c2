"""Reading numbers out of completions and gold answers: the one normaliser every check uses.

Three readers share one normaliser, ``parse_number``, so that a training reward, an evaluation and a
grader can never disagree about what a completion answered:

- ``parse_number(text)``: the single number written in a short text, as an exact ``Decimal``;
- ``extract_answer(completion)``: the number inside the final ``<answer>...</answer>`` block;
- ``parse_gold(answer_field)``: the integer after ``####`` in a GSM8K answer;
- ``last_number(completion)``: the last number written anywhere in a completion, tags or not (the
  evaluation's format-independent reading: "did the model get the arithmetic right?").

``completion_text(completion)`` turns either completion format that TRL produces (a string, or a list
of chat messages) into text.

Rules of ``parse_number`` (each one is a test case in ``tests/test_rewards.py``):

- Exactly one number, or ``None``. Words around it are allowed ("18 dollars", "x = -7"), a second
  number is not ("41 or 42", "84/2", "1e3", "2^3", "3:30", "1 000").
- Normalised first: NFKC (full-width digits), U+2212 and every dash read as "-", ``$`` and ``\\$``
  removed, ``{,}`` read as ",". Markup around the number is ignored as text: ``\\boxed{}``,
  ``\\text{}``, ``**bold**``, ``%``, a final period.
- Thousands commas must be well formed (``1,000`` and ``192,000,000``; not ``1,00``, ``2,5`` or
  ``1000,000``). A decimal equal to an integer is that integer (``18.00`` == 18).
- Rejected as ambiguous (``None``): ``N.000`` with one to three digits before the point (English 1,
  Spanish 1000), several points (``1.000.000``), any character that NFKC turns into digits without
  being a digit (superscripts, circled digits, vulgar fractions: ``4²`` would otherwise read 42),
  digits of other scripts (``٤٢``), a number glued to a letter before it
  (``x2``, ``CO2``), a dash that is not a clean sign (``- 7``, ``a-7``, ``--7``), a factorial or
  exclamation mark right after the number (``5!``), scale suffixes and words (``5k``, ``2M``,
  ``3 million``, ``3 mil``), the symbols ``√ ∛ ∜ π ∞ ± ∓``, LaTeX commands other than
  formatting ones (``\\frac12``, ``\\sqrt{16}``), numbers longer than 40 characters, texts longer
  than 1,000.

Everything here is pure Python (``re``, ``unicodedata``, ``decimal``), runs in microseconds, scans
linearly (no nested quantifier can backtrack catastrophically) and is thread-safe.
"""

from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation
from functools import lru_cache

__all__ = [
    "MAX_NUMBER_TEXT_CHARS",
    "completion_text",
    "extract_answer",
    "last_number",
    "parse_gold",
    "parse_number",
]

# A text longer than this is not "a number" (an answer block is a few characters): parse_number
# returns None without looking at it. Also bounds what the caches below hold.
MAX_NUMBER_TEXT_CHARS = 1_000
# A number token longer than this is not a GSM8K answer (the largest gold has 11 characters).
_MAX_NUMBER_CHARS = 40

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_OPEN, ANSWER_CLOSE = "<answer>", "</answer>"
GOLD_MARKER = "####"

# Every dash-like character NFKC leaves alone, read as an ASCII hyphen-minus (a minus sign when it
# touches the digits). NFKC already maps U+FE63 and U+FF0D to "-" and U+FE58 to U+2014.
_DASHES = str.maketrans({c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043"})
# Characters that change the value of a lone number: a reader must not guess.
_REJECT_CHARS = frozenset("√∛∜π∞±∓")
# LaTeX commands that only format; any other command (\frac, \sqrt, \times, ...) makes the text
# ambiguous. Spacing commands (\, \! \;) are not letters and are treated as punctuation.
_FORMAT_COMMANDS = frozenset(
    "boxed fbox text textbf textit textrm textnormal mathrm mathbf mathit mbox displaystyle "
    "left right quad qquad circ".split()
)
_COMMAND = re.compile(r"\\([A-Za-z]+)")
# A number: digit groups joined by single "," or "." (validated afterwards), or ".5". Each
# repetition must consume a separator, so matching is linear.
_NUMBER = re.compile(r"[0-9]+(?:[.,][0-9]+)*|\.[0-9]+")
_WELL_FORMED_COMMAS = re.compile(r"[1-9][0-9]{0,2}(?:,[0-9]{3})+(?:\.[0-9]+)?")
_AMBIGUOUS_THOUSANDS = re.compile(r"[0-9]{1,3}\.000")
# Right after a number: a scale suffix ("5k", "2M", "3B") or a scale word ("3 million", "3 mil").
_SCALE_AFTER = re.compile(
    r"(?:(?-i:[kKMB])(?![A-Za-z])|\s*(?:thousand|million|billion|trillion|mil|mill[oó]n|millones|"
    r"billones|bn)(?![A-Za-z]))",
    re.IGNORECASE,
)


def parse_number(text) -> Decimal | None:
    """Return the one number written in ``text`` as an exact ``Decimal``, or ``None``.

    ``None`` unless ``text`` is a string holding exactly one unambiguous number (see the module
    docstring for every rule). An integral value comes back as ``Decimal(int)`` (``"18.00"`` ->
    ``Decimal(18)``); other values are normalised (``"0.50"`` -> ``Decimal("0.5")``). Never raises.

    >>> parse_number("$1,000.00"), parse_number("\\\\boxed{\\u22127}"), parse_number("41 or 42")
    (Decimal('1000'), Decimal('-7'), None)
    """
    if not isinstance(text, str) or len(text) > MAX_NUMBER_TEXT_CHARS:
        return None
    try:
        return _parse_number(str(text))
    except Exception:  # defensive: a reader that raises would crash a training step
        return None


@lru_cache(maxsize=8192)
def _parse_number(text: str) -> Decimal | None:
    if not text.isascii():
        for ch in text:
            if not ch.isascii() and _hidden_digits(ch):
                return None
        text = unicodedata.normalize("NFKC", text).translate(_DASHES)
        for ch in text:
            if ch in _REJECT_CHARS or (ch.isdecimal() and not ch.isascii()):
                return None  # a value-changing symbol, or digits of another script
    if "\\" in text:
        for command in _COMMAND.findall(text):
            if command not in _FORMAT_COMMANDS:
                return None
    text = text.replace("{,}", ",").replace("\\$", "").replace("$", "")

    found = None
    for match in _NUMBER.finditer(text):
        if found is not None:
            return None  # a second number
        found = match
    if found is None:
        return None
    token, start, end = found.group(), found.start(), found.end()
    if len(token) > _MAX_NUMBER_CHARS:
        return None

    if "," in token:
        if not _WELL_FORMED_COMMAS.fullmatch(token):
            return None  # "1,00", "2,5", "1000,000", "1.000,5"
        token = token.replace(",", "")
    elif token.count(".") > 1 or _AMBIGUOUS_THOUSANDS.fullmatch(token):
        return None  # "1.000.000", "1.000" (one in English, a thousand in Spanish)

    before = text[start - 1] if start else ""
    if before.isalpha():
        return None  # "x2", "CO2"
    negative = False
    if before == "-":
        prev = text[start - 2] if start >= 2 else " "
        if prev.isalnum() or prev in "-.":
            return None  # "a-7", "--7"
        negative = True
    elif text[:start].rstrip().endswith("-"):
        return None  # "- 7": a detached dash may or may not be a sign

    after = text[end] if end < len(text) else ""
    if after == "!" or _SCALE_AFTER.match(text, end):
        return None  # "5!", "5k", "3 million"

    try:
        value = Decimal(token)
    except InvalidOperation:  # pragma: no cover - the regex only lets digits and one point through
        return None
    if negative:
        value = -value
    if value == value.to_integral_value():
        return Decimal(int(value))
    return value.normalize()


@lru_cache(maxsize=4096)
def _hidden_digits(ch: str) -> bool:
    """True for a character that NFKC turns into digits without being a digit itself.

    Superscripts and subscripts ("4²" would read 42), circled digits, vulgar fractions ("½" becomes
    "1⁄2") and compatibility symbols such as U+33E0 ("㏠" becomes "1日"). Decimal digits in other
    widths or styles (full-width "４", mathematical bold "𝟒") are digits and pass.
    """
    if unicodedata.category(ch) == "Nd":
        return False
    return any("0" <= c <= "9" for c in unicodedata.normalize("NFKC", ch))


def completion_text(completion) -> str:
    """Return the text of one completion in either format TRL produces, or ``""`` if malformed.

    - a string is returned as it is;
    - conversational format, a list of messages such as ``[{"role": "assistant", "content": "..."}]``
      (a single message dict is accepted too): the contents of the assistant messages (a message
      without ``"role"`` counts as the assistant's), joined with newlines; other roles are skipped;
      a content may also be a list of ``{"type": "text", "text": "..."}`` parts;
    - anything else (``None``, numbers, bytes, a message that is not a dict or has no string content,
      a part that is not a text part) is malformed and gives ``""``. Never raises.
    """
    if isinstance(completion, str):
        return completion
    try:
        if type(completion) is list and len(completion) == 1:  # fast path: TRL's usual shape
            message = completion[0]
            if type(message) is dict and message.get("role", "assistant") == "assistant":
                content = message.get("content")
                if type(content) is str:
                    return content
        if isinstance(completion, dict):
            messages = (completion,)
        elif isinstance(completion, (list, tuple)):
            messages = completion
        else:
            return ""
        parts = []
        for message in messages:
            if not isinstance(message, dict):
                return ""
            role = message.get("role", "assistant")
            if not isinstance(role, str):
                return ""
            if role != "assistant":
                continue
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, (list, tuple)):
                for part in content:
                    if not (isinstance(part, dict) and part.get("type") == "text"):
                        return ""
                    piece = part.get("text")
                    if not isinstance(piece, str):
                        return ""
                    parts.append(piece)
            else:
                return ""
        return "\n".join(parts)
    except Exception:  # a dict subclass with a hostile get(), for instance
        return ""


def final_segment(text: str) -> str:
    """The text after the last ``</think>`` (all of it when there is none): where answers count."""
    return text[_final_segment_start(text):]


def _final_segment_start(text: str) -> int:
    close = text.rfind(THINK_CLOSE)
    return 0 if close < 0 else close + len(THINK_CLOSE)


def extract_answer(completion) -> Decimal | None:
    """Return the number a completion answered, or ``None``.

    Reads only the text after the last ``</think>`` (the whole completion if there is none), which
    must hold exactly one ``<answer>`` and exactly one ``</answer>``, in that order; the text between
    them must be one number for ``parse_number``. Tags are exact and lowercase. Text outside the
    block is ignored here (``format_reward`` judges the structure). ``completion`` is a string or a
    list of chat messages (see ``completion_text``). Never raises.

    >>> extract_answer("<think>6*7</think><answer>**42**</answer>")
    Decimal('42')
    """
    try:
        text = completion_text(completion)
        tail = _final_segment_start(text)
        # count/find with a start index: no copy of a long completion
        if text.count(ANSWER_OPEN, tail) != 1 or text.count(ANSWER_CLOSE, tail) != 1:
            return None
        start = text.find(ANSWER_OPEN, tail) + len(ANSWER_OPEN)
        end = text.find(ANSWER_CLOSE, tail)
        if end < start or end - start > MAX_NUMBER_TEXT_CHARS:
            return None
        return parse_number(text[start:end])
    except Exception:  # pragma: no cover - defensive
        return None


def last_number(completion) -> Decimal | None:
    """Return the last number written in a completion, wherever it is, or ``None``.

    The format-independent reading of an answer, for evaluation only (never a reward: it pays for
    "41 or 42" and for a number dropped anywhere). The completion is split on whitespace; the last
    piece holding a digit goes through ``parse_number``, so the rules are the strict reader's: markup
    and tags around it are ignored (``<answer>72</answer>``, ``**72**``, ``$1,000.``), and a piece that
    is not one clean number (``3:30``, ``5k``, ``x2``, ``4²``) gives ``None`` rather than a guess from an
    earlier number. ``completion`` is a string or a list of chat messages. Never raises.

    >>> last_number("<think>48/2 = 24; 48 + 24 = 72</think>Son 72 clips.")
    Decimal('72')
    """
    try:
        text = completion_text(completion)
        end = len(text)
        # Scan backwards piece by piece: no split of a long completion, linear in what is read.
        while end > 0:
            while end > 0 and text[end - 1].isspace():
                end -= 1
            start = end
            while start > 0 and not text[start - 1].isspace():
                start -= 1
            piece = text[start:end]
            if any(ch.isdigit() for ch in piece):
                return parse_number(piece)
            end = start
        return None
    except Exception:  # pragma: no cover - defensive
        return None


def parse_gold(answer_field) -> int:
    """Return the gold integer of a GSM8K answer field.

    ``answer_field`` is the data set's ``answer`` (worked solution, then ``#### 72``) or an already
    extracted gold string (``"72"``, ``"-7"``, ``"1,000"``); the text after ``####`` goes through
    ``parse_number``, so gold and completions share one normaliser. An ``int`` is returned as is.

    Raises ``ValueError`` (Spanish message: a student may see it) when there is no single number
    after ``####``, when ``####`` appears more than once, or when the value is not an integer;
    ``TypeError`` when ``answer_field`` is neither a string nor an int.
    """
    if isinstance(answer_field, bool) or not isinstance(answer_field, (str, int)):
        raise TypeError(
            "La respuesta de referencia debe ser un texto o un entero, "
            f"no {type(answer_field).__name__}."
        )
    if isinstance(answer_field, int):
        return answer_field
    markers = answer_field.count(GOLD_MARKER)
    if markers > 1:
        raise ValueError(
            f"La respuesta de referencia tiene {markers} marcas '####'; se esperaba una: "
            f"{_preview(answer_field)}"
        )
    final = answer_field.split(GOLD_MARKER, 1)[1] if markers else answer_field
    value = parse_number(final)
    if value is None:
        where = "tras '####'" if markers else "(no hay '####')"
        raise ValueError(
            f"No se encuentra un único número {where} en la respuesta de referencia: "
            f"{_preview(answer_field)}"
        )
    if value != value.to_integral_value():
        raise ValueError(
            f"La respuesta de referencia no es un entero ({value}): {_preview(answer_field)}"
        )
    return int(value)


def _preview(text: str, limit: int = 80) -> str:
    text = text if len(text) <= limit else "..." + text[-limit:]
    return repr(text)
