"""The reward functions a student writes in the L7.1 notebook, saved where ``python -m labs l71`` trains them.

Section 1 of the notebook has the student rewrite the lesson's three functions (``correctness_reward``,
``format_reward``, ``soft_format_reward``) for conversational completions. ``save`` writes their source, with the
helpers and imports they use, to ``<runs>/_ajustes/l71-recompensas.py`` (beside the saved settings of
``labs.l71.settings``; one file for every profile: the functions do not depend on it). ``load`` gives them back
for ``python -m labs l71`` and the notebook's own trainer, so the run trains what the student wrote.

They keep the course's names on purpose: TRL logs each function as ``rewards/<name>/mean`` and the grader reads
those keys. So a saved function replaces the course function of the same name, and ``run.json`` records it as
the student's (``own``, its file and the SHA-256 of its source: ``rewards.own.describe_reward_functions``). The
lesson's rules are lenient (cell 35 of the notebook shows the hacks they leave open); ``--recompensas-del-curso``
trains the hardened functions of ``rewards/`` instead.

A file that cannot be used stops the run before any model loads with a Spanish message that says what to do;
the file is left as it is.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from pathlib import Path

from labs.core.paths import runs_dir
from rewards import REWARD_NAMES
from rewards.own import OwnRewardError, load_reward_function

FILE_NAME = "l71-recompensas.py"
COURSE_FLAG = "--recompensas-del-curso"
HEADER = ('"""Tus recompensas del cuaderno L7.1 (sección 1). Las escribe la celda que sigue a sus comprobaciones, con el\n'
          'código de tus celdas: edítalas allí y vuelve a ejecutarla, no aquí. python -m labs l71 entrena estas."""\n')
_LITERALS = (bool, int, float, str, bytes, type(None))


def reward_file() -> Path:
    return runs_dir() / "_ajustes" / FILE_NAME


def _code_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names |= _code_names(const)
    return names


def _collect(func, imports: dict, constants: dict, helpers: dict, exclude: set) -> None:
    """The imports, constants and helper functions ``func`` reads from its module, for a file of its own."""
    space = getattr(func, "__globals__", {})
    if func.__code__.co_freevars:
        raise ValueError(f"Tu función {func.__name__} usa variables de la función que la contiene "
                         f"({', '.join(func.__code__.co_freevars)}): defínela en su propia celda, fuera de otra función.")
    for name in sorted(_code_names(func.__code__)):
        if name not in space or name in helpers or name in exclude or name in constants or name in imports:
            continue
        value = space[name]
        if inspect.ismodule(value):
            imports[name] = f"import {value.__name__}" + (f" as {name}" if value.__name__ != name else "")
        elif inspect.isfunction(value) and value.__module__ == func.__module__:
            helpers[name] = _source(value)
            _collect(value, imports, constants, helpers, exclude)
        elif (inspect.isfunction(value) or inspect.isclass(value)) and getattr(value, "__module__", "") not in ("", "__main__"):
            imports[name] = f"from {value.__module__} import {value.__name__}" + (
                f" as {name}" if value.__name__ != name else "")
        elif isinstance(value, re.Pattern):
            imports["re"] = "import re"
            constants[name] = f"{name} = re.compile({value.pattern!r}, {int(value.flags)})"
        elif isinstance(value, _LITERALS) or (isinstance(value, (tuple, frozenset)) and all(isinstance(x, _LITERALS) for x in value)):
            constants[name] = f"{name} = {value!r}"
        else:
            raise ValueError(f"Tu función {func.__name__} usa «{name}» ({type(value).__name__}), que no puedo copiar a "
                             "un archivo: defínelo dentro de la función (o como función aparte) y vuelve a ejecutar.")


def _source(func) -> str:
    try:
        return textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise ValueError(f"No puedo leer el código de {getattr(func, '__name__', func)} ({exc}): vuelve a ejecutar la "
                         "celda que la define.") from None


def file_text(funcs) -> str:
    """The saved file: the header, the imports and constants the functions use, their helpers, then the functions."""
    names = [getattr(f, "__name__", "") for f in funcs]
    wrong = [n for n in names if n not in REWARD_NAMES]
    if not funcs or wrong or len(set(names)) != len(names):
        raise ValueError(f"Guarda tus funciones de la sección 1 con los nombres de la lección ({', '.join(REWARD_NAMES)}), "
                         "cada una una vez: TRL registra cada una como rewards/<nombre>/mean y el evaluador lee esos nombres.")
    imports, constants, helpers = {}, {}, {}
    for func in funcs:
        _collect(func, imports, constants, helpers, set(names))
    parts = [HEADER, "\n".join(sorted(set(imports.values()))), "\n".join(constants.values()),
             *helpers.values(), *(_source(f) for f in funcs), f"FUNCIONES = {names!r}\n"]
    return "\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"


def _listed(path: Path) -> list[str]:
    """The names in the file's ``FUNCIONES = [...]`` (what ``save`` wrote)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["FUNCIONES"]:
                names = ast.literal_eval(node.value)
                if isinstance(names, list) and names and all(n in REWARD_NAMES for n in names):
                    return names
    except SyntaxError as exc:
        raise OwnRewardError(f"{path} no es Python válido (línea {exc.lineno}: {exc.msg}).") from None
    except (ValueError, UnicodeDecodeError):
        pass
    raise OwnRewardError(f"{path} no tiene una lista FUNCIONES con nombres de la lección ({', '.join(REWARD_NAMES)}).")


def load(echo=print, path: Path | None = None) -> tuple[list | None, Path | None]:
    """The saved functions, in the saved order, and their file; ``(None, None)`` when nothing is saved.

    A file that cannot be used raises ``ValueError`` (Spanish: what is wrong and what to do); it is left as it is.
    """
    path = Path(path) if path is not None else reward_file()
    if not path.exists():
        return None, None
    try:
        funcs = [load_reward_function(f"{path}:{name}") for name in _listed(path)]
    except OwnRewardError as exc:
        raise ValueError(
            f"Tus recompensas guardadas en {path} no se pueden usar: {exc} Vuelve a ejecutar la celda que las guarda "
            f"en el cuaderno L7.1 (sección 1), o entrena las del curso con python -m labs l71 {COURSE_FLAG} (el archivo "
            "no se toca).") from None
    echo(f"[recompensas] Entrenan tus funciones del cuaderno L7.1 ({path}): {', '.join(f.__name__ for f in funcs)}. "
         f"Las del curso (rewards/, más estrictas): {COURSE_FLAG}.")
    return funcs, path


def pick(saved, names=None) -> list:
    """The functions a run with ``--rewards names`` trains: the saved one of each name, else the course's
    (or a ``file.py:function`` of the student's). ``names`` None: every saved function, in the saved order.
    So E2's reward list is the student's own functions minus the ones it drops, never the course's stricter ones."""
    from rewards import reward_functions

    if names is None:
        return list(saved)
    by_name = {f.__name__: f for f in saved}
    return [by_name[n] if n in by_name else reward_functions([n])[0] for n in names]


def save(funcs, echo=print) -> Path:
    """Write ``funcs`` (the notebook's section-1 functions) where ``python -m labs l71`` trains them; check it loads."""
    path = reward_file()
    text = file_text(funcs)
    before = path.read_text(encoding="utf-8") if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    try:
        load(echo=lambda _: None, path=path)
    except ValueError:
        if before is None:
            path.unlink()
        else:
            path.write_text(before, encoding="utf-8")  # the previous version stays: nothing is lost
        raise
    echo(f"Recompensas guardadas en {path}: {', '.join(f.__name__ for f in funcs)}. Las entrena python -m labs l71 "
         "(y este cuaderno, si entrena aquí), con sus nombres de la lección; run.json las apunta como tuyas, con el "
         "SHA-256 de su código.")
    return path


def course_note(echo=print) -> None:
    """What a run without saved functions trains, said once at its start."""
    echo(f"[recompensas] No hay recompensas tuyas guardadas ({reward_file()}): entrenan las del curso (rewards/). "
         "Para entrenar las tuyas, escribe la sección 1 del cuaderno L7.1 y ejecuta la celda que las guarda.")
