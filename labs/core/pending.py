"""Which exercises a notebook cell needs are still unwritten, said in Spanish instead of a library's traceback.

A student notebook starts with every exercise as otter's stub (a body of ``...`` that returns ``None``). A cell
that uses one starts with ``if ejercicios_hechos(f, g, ...):``: each function is called on a tiny input from the
notebook's ``table`` (function name -> the exercise, as the notebook titles it, and a callable giving that input);
one that returns ``None`` (the stub) or raises is named with the exercise to finish, and the cell's body is
skipped. The check is behaviour (a call), never a reading of the student's code. Each notebook keeps its own
table beside its lab (``labs.l6.pending``, ``labs.l71.pending``, ``labs.exercises.student``, ``labs.l72.answers``).
"""

from __future__ import annotations


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


def ejercicios_hechos(*functions, table: dict) -> bool:
    """True when every function answers; otherwise print which exercises to finish first and return False."""
    lines = pending(*functions, table=table)
    if lines:
        print("Esta celda usa funciones tuyas que aún no funcionan, así que no hace nada todavía:")
        print("\n".join("  - " + line for line in lines))
        print("Termina esos ejercicios (su grader.check debe pasar) y vuelve a ejecutar esta celda.")
    return not lines
