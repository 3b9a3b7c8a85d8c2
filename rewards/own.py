"""A student's own reward function, named ``"module:function"`` or ``"path/to/file.py:function"``.

``reward_functions`` (``rewards.functions``) and the labs' ``--rewards`` accept such a name beside the
course's three. ``load_reward_function`` imports it and refuses, in Spanish, what TRL could not use or
the grader could not tell apart from the course's functions (a name that is not callable, a lambda, a
function called like one of the course's). ``describe_reward_functions`` is what a run folder records in
``run.json``: each function's name, where it came from, and a SHA-256 of its source, so a report can
say which version of the student's function trained the run.

A module name is imported from ``sys.path`` (the current folder is on it for ``python -m labs`` and in a
notebook kernel); a file path (ending in ``.py`` or containing a slash) is loaded from that file,
relative to the current folder. Loading a student's file runs it: it is the student's own code, on the
student's own machine. The grader never loads it (it reads ``run.json``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
from pathlib import Path

__all__ = ["OwnRewardError", "describe_reward_functions", "is_spec", "load_reward_function"]

# run.json keeps the function's source for the instructor to read; longer sources are cut here.
MAX_SOURCE_CHARS = 20_000
COURSE_MODULE = "rewards.functions"  # where the course's own functions live
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class OwnRewardError(ValueError):
    """A student's reward function cannot be loaded; the message (Spanish) says what to change."""


def is_spec(name: str) -> bool:
    """True for ``"module:function"`` or ``"file.py:function"`` (a course name has no colon)."""
    return isinstance(name, str) and ":" in name


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or os.sep in target


def _load_module(target: str, spec_text: str):
    if _is_path(target):
        path = Path(target).expanduser()
        if not path.is_file():
            raise OwnRewardError(
                f"'{spec_text}': no existe el archivo {path} (se busca desde {Path.cwd()}). "
                "Escribe la ruta al .py que contiene tu función, por ejemplo mi_recompensa.py:mi_funcion."
            )
        module_name = f"_recompensa_propia_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and pickling look the module up by name
        try:
            # Compiled from the file as it is now, not through the loader: a .pyc that Python wrote for an
            # earlier version is trusted when the size and the mtime's second match, so an edit made within
            # the same second (a notebook cell that rewrites the file, then trains) would run the old code.
            exec(compile(path.read_bytes(), str(path), "exec", dont_inherit=True), module.__dict__)
        except BaseException as exc:
            sys.modules.pop(module_name, None)
            raise OwnRewardError(_import_failed(spec_text, exc)) from exc
        return module
    if not all(_IDENTIFIER.fullmatch(part) for part in target.split(".")):
        raise OwnRewardError(
            f"'{spec_text}': '{target}' no es un nombre de módulo de Python ni una ruta a un .py. "
            "Usa modulo:funcion (el archivo modulo.py en la carpeta desde la que lanzas) o ruta/archivo.py:funcion."
        )
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name and target.split(".")[0] == exc.name.split(".")[0]:
            raise OwnRewardError(
                f"'{spec_text}': no se encuentra el módulo '{target}' (se busca en la carpeta actual, {Path.cwd()}, "
                "y en los paquetes instalados). Lanza desde la carpeta que contiene el archivo o usa la ruta: "
                f"ruta/a/{target.split('.')[-1]}.py:funcion."
            ) from exc
        raise OwnRewardError(_import_failed(spec_text, exc)) from exc
    except BaseException as exc:
        raise OwnRewardError(_import_failed(spec_text, exc)) from exc


def _import_failed(spec_text: str, exc: BaseException) -> str:
    where = ""
    if isinstance(exc, SyntaxError) and exc.lineno:
        where = f" (línea {exc.lineno})"
    return (
        f"'{spec_text}': al importar el archivo de tu recompensa saltó {type(exc).__name__}{where}: {exc}. "
        "Corrige el archivo y vuelve a lanzar."
    )


def load_reward_function(spec_text: str, reserved=()):
    """The function named by ``spec_text`` (``"module:function"`` or ``"file.py:function"``).

    ``reserved``: names the function may not have (the course's: TRL logs every function under its
    ``__name__``, and the grader must tell the student's functions from the course's).
    """
    target, _, attribute = spec_text.strip().rpartition(":")
    if not target or not attribute:
        raise OwnRewardError(
            f"'{spec_text}': una recompensa propia se escribe modulo:funcion o archivo.py:funcion "
            "(por ejemplo mi_recompensa.py:respuesta_unica)."
        )
    module = _load_module(target, spec_text)
    func = getattr(module, attribute, None)
    if func is None:
        found = sorted(
            n for n, v in vars(module).items()
            if inspect.isfunction(v) and not n.startswith("_") and v.__module__ == module.__name__
        )
        raise OwnRewardError(
            f"'{spec_text}': el módulo no tiene ninguna función llamada '{attribute}'"
            + (f" (funciones que sí tiene: {', '.join(found)})." if found else ".")
        )
    if not callable(func):
        raise OwnRewardError(f"'{spec_text}': '{attribute}' existe pero no es una función ({type(func).__name__}).")
    name = getattr(func, "__name__", "")
    if not _IDENTIFIER.fullmatch(name or ""):
        raise OwnRewardError(
            f"'{spec_text}': la función no tiene un nombre propio ({name!r}); TRL registra cada recompensa "
            "como rewards/<nombre>/mean. Defínela con def y un nombre."
        )
    if name in reserved:
        raise OwnRewardError(
            f"'{spec_text}': tu función se llama '{name}', igual que una de las del curso "
            f"({', '.join(reserved)}). Ponle otro nombre: las métricas y el evaluador las distinguen por el nombre."
        )
    return func


def _source(func) -> str | None:
    try:
        return inspect.getsource(func)
    except (OSError, TypeError):
        return None


def describe_reward_functions(funcs, course=()) -> list[dict]:
    """What ``run.json`` records about each reward function (``course``: the course's own names).

    Course functions: ``{"name", "module", "own": False}``. The student's (a name outside ``course``, or a course
    name defined outside ``rewards.functions``: L7.1's saved rewrites of the lesson's three): also the file it came from,
    the SHA-256 of the function's source (``source_sha256``) and the source itself (cut at
    ``MAX_SOURCE_CHARS``), so the instructor reads what trained the run.
    """
    out = []
    for func in funcs:
        name = getattr(func, "__name__", repr(func))
        module = getattr(func, "__module__", None)
        record = {"name": name, "module": module, "own": name not in course or module != COURSE_MODULE}
        if record["own"]:
            source = _source(func)
            try:
                record["file"] = inspect.getsourcefile(func)
            except TypeError:
                record["file"] = None
            record["source_sha256"] = hashlib.sha256(source.encode()).hexdigest() if source is not None else None
            record["source"] = source[:MAX_SOURCE_CHARS] if source is not None else None
        out.append(record)
    return out
