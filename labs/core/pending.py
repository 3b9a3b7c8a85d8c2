"""Which exercises a notebook cell needs are still unwritten, said in Spanish instead of a library's traceback.

A student notebook starts with every exercise as otter's stub (a body of ``...`` that returns ``None``). A cell
that uses one starts with ``if ejercicios_hechos(f, g, ...):``: each function is called on a tiny input from the
notebook's ``table`` (function name -> the exercise, as the notebook titles it, and a callable giving that input);
one that returns ``None`` (the stub) or raises is named with the exercise to finish, and the cell's body is
skipped. The check is behaviour (a call), never a reading of the student's code. A function that answers but
still fails its question's check (otter's tests in the student notebook) is let through with a Spanish notice. Each notebook keeps its own
table beside its lab (``labs.l6.pending``, ``labs.l71.pending``, ``labs.exercises.student``, ``labs.l72.answers``).
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path


def pending(*functions, table: dict) -> list[str]:
    """One Spanish line per function that is not written yet (returns ``None``) or fails on a tiny input."""
    lines = []
    for function in functions:
        name = getattr(function, "__name__", repr(function))
        if name not in table:
            raise KeyError(f"{name} no es una función de los ejercicios de este cuaderno.")
        title, probe = table[name]
        try:
            out = function(*probe())
        except Exception as error:  # a written but failing function: say which, and the error in one line
            lines.append(f"`{name}` falla ({type(error).__name__}: {error}): revisa el ejercicio {title}.")
            continue
        if out is None:
            lines.append(f"`{name}` aún no está escrita (devuelve None): termina el ejercicio {title}.")
    return lines


def _notebook_tests(env: dict) -> dict[str, str]:
    """The tests otter keeps in the student notebook's metadata (question -> test file), found through the
    ``grader`` (otter's ``Notebook``) of the notebook's globals; {} outside a student notebook."""
    path = getattr(env.get("grader"), "_notebook", None)
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))["metadata"]["otter"]["tests"]
    except (TypeError, OSError, ValueError, KeyError):
        return {}


def _check_fails(code: str, env: dict, name: str) -> bool | None:
    """Whether a question's tests fail in ``env``, as grader.check runs them; None when they do not use ``name``."""
    namespace: dict = {}
    exec(code, namespace)  # noqa: S102 - otter's own test file, from the notebook's metadata
    cases = [c.test_func for c in namespace.values() if hasattr(c, "test_func")]
    if not any(name in inspect.signature(f).parameters for f in cases):
        return None
    try:
        for case in cases:
            case(**{p: env.get(p) for p in inspect.signature(case).parameters})
    except Exception:  # noqa: BLE001 - otter counts any exception as a failed check
        return True
    return False


def failing_checks(*functions) -> list[str]:
    """One Spanish line per function that answers but whose question's check (in the student notebook) still
    fails: a guard lets it through, and what the cell computes with it is not right yet."""
    lines = []
    for function in functions:
        function = getattr(function, "__wrapped__", function)  # labs.l72.answers wraps each in a probe
        env, name = getattr(function, "__globals__", {}), getattr(function, "__name__", "")
        for question, code in _notebook_tests(env).items():
            if _check_fails(code, env, name):
                lines.append(f"`{name}` ya responde, pero su comprobación, grader.check(\"{question}\"), aún falla: "
                             "lo que esta celda calcule con ella no vale todavía.")
    return lines


def ejercicios_hechos(*functions, table: dict) -> bool:
    """True when every function answers; otherwise print which exercises to finish first and return False.

    A function that answers but fails its check is let through, said in Spanish (:func:`failing_checks`).
    """
    lines = pending(*functions, table=table)
    if lines:
        print("Esta celda usa funciones tuyas que aún no funcionan, así que no hace nada todavía:")
        print("\n".join("  - " + line for line in lines))
        print("Termina esos ejercicios (su grader.check debe pasar) y vuelve a ejecutar esta celda.")
        return False
    failing = failing_checks(*functions)
    if failing:
        print("Ojo: esta celda se ejecuta, pero con funciones tuyas que aún no pasan su comprobación:")
        print("\n".join("  - " + line for line in failing))
    return True
