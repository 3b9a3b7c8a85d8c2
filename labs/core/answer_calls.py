"""How a check calls a student's function: the answer, or a Spanish ``AssertionError`` that a student can read.

otter's ``grader.check`` counts any exception as a failed check and shows it as it comes; a check that calls the
student's function through :func:`call_answer` turns two things into one Spanish sentence each:

- the function raises (a ``TypeError`` from a list read as a dict, a ``RuntimeError`` from torch): the sentence
  names the input the check gave it (``where``) and the error, in one line;
- the function calls the course's own implementation of what the question asks (``references``, dotted paths
  such as ``"labs.l6.toy_rl.k3"``): :func:`course_call_message`, the same words in every notebook. Only a call made
  from outside the course's packages (``labs/``, ``rewards/``) counts: a course helper the lesson hands the student
  (``settings.rest_of_recipe``) may use a reference inside.

The watch is behaviour (which functions run, by their code objects), never a reading of the student's code.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path

LABS_DIR = Path(__file__).resolve().parent.parent
COURSE_DIRS = (LABS_DIR, LABS_DIR.parent / "rewards")


def course_call_message(name: str) -> str:
    """The one sentence every check says when an answer calls the course's own solution ``name``."""
    return f"Tu función llama a `{name}`, el código del curso que resuelve este ejercicio: escríbelo tú."


def _resolve(path: str):
    """``"labs.l6.toy_rl.k3"`` -> the function; the name a student wrote is the last two parts (``toy_rl.k3``)."""
    module, _, attribute = path.rpartition(".")
    target = importlib.import_module(module)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def short_name(path: str) -> str:
    return ".".join(path.split(".")[-2:])


def _in_course(filename: str) -> bool:
    try:
        path = Path(filename).resolve()
        return any(path.is_relative_to(d) for d in COURSE_DIRS)
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def watching(references=()):
    """``with watching(paths) as called:`` the short names of the ``references`` called from outside the course."""
    codes = {}
    for path in references:
        function = _resolve(path)
        code = getattr(getattr(function, "__func__", function), "__code__", None)
        if code is not None:
            codes[code] = short_name(path)
    called: list[str] = []

    def watch(frame, event, _arg):
        if event == "call" and frame.f_code in codes and frame.f_back is not None and not _in_course(
                frame.f_back.f_code.co_filename) and codes[frame.f_code] not in called:
            called.append(codes[frame.f_code])

    previous = sys.getprofile()
    if codes:
        sys.setprofile(watch)
    try:
        yield called
    finally:
        if codes:
            sys.setprofile(previous)


def describe_error(error: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def call_answer(function, *args, where: str = "", references=(), **kwargs):
    """``function(*args, **kwargs)`` for a check: what it returns, or a Spanish ``AssertionError``.

    ``where``: the input, in Spanish, as the sentence's start ("Con A=-1 y ε=0.2"). ``references``: dotted paths of
    the course's implementations of what the question asks; calling one fails the check with
    :func:`course_call_message`.
    """
    name = getattr(function, "__name__", "tu función")
    if not callable(function):
        raise AssertionError(f"`{name}` no es una función: define la función que pide el ejercicio.")
    result = None
    with watching(references) as called:
        try:
            result = function(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - the student's code: said in Spanish, with the input
            raised = error
        else:
            raised = None
    if called:
        raise AssertionError(course_call_message(called[0]))
    if raised is not None:
        start = f"{where}, " if where else ""
        message = f"{start}`{name}` lanzó {describe_error(raised)}."
        raise AssertionError(message[0].upper() + message[1:]) from None
    return result
