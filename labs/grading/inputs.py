"""Read one run folder as submitted, without trusting it.

Students submit whatever they have: files may be missing, cut short, hand-edited, huge, symbolic links,
or from another experiment. This module turns a folder into a ``RunData`` and a list of ``Problem``s,
each a Spanish sentence "no se puede evaluar X porque Y", and never raises on bad content.

Safety rules: only JSON and JSON-lines files are parsed (``json`` from the standard library: nothing is
executed or unpickled), PNG files are only checked for their signature and copied; every file is read
with a size limit; symbolic links are never followed. The layout and file names are those of
``labs.core.runfolder``; its own readers are not used here because they trust the file (no size limit, and
``read_jsonl`` raises on a malformed middle line, where the grader must report the line and go on).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from labs.core import runfolder as rf

MAX_JSON_BYTES = 8 * 1024 * 1024  # run.json, status.json, eval/summary.json, notebooks
MAX_JSONL_BYTES = 64 * 1024 * 1024  # metrics.jsonl, eval/*.jsonl (a 1,319-problem eval is ~5 MB)
MAX_PNG_BYTES = 8 * 1024 * 1024
MAX_CURVES = 12
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Problem:
    """Something that could not be read; ``area`` says which criterion it affects."""

    area: str  # "run", "status", "metrics", "eval", "curves", "submission"
    text: str  # Spanish, for the report


class InputError(Exception):
    """A file that cannot be used; the message is the Spanish reason (the "porque ..." part)."""


@dataclass
class RunData:
    root: Path
    run: dict | None = None
    status: dict | None = None
    metrics: list[dict] = field(default_factory=list)
    base: list[dict] | None = None
    trained: list[dict] | None = None
    summary: dict | None = None
    curves: list[Path] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def problems_for(self, area: str) -> list[str]:
        return [p.text for p in self.problems if p.area == area]


def read_limited(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; InputError (Spanish reason) otherwise."""
    if path.is_symlink():
        raise InputError("es un enlace simbólico y el evaluador no sigue enlaces")
    if not path.exists():
        raise InputError("no existe")
    if not path.is_file():
        raise InputError("no es un archivo normal")
    size = path.stat().st_size
    if size > limit:
        raise InputError(f"ocupa {size / 2**20:.1f} MB y el límite es {limit / 2**20:.0f} MB")
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"supera el límite de {limit / 2**20:.0f} MB")
    return data


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"no es texto UTF-8 (byte no válido en la posición {exc.start})") from None


def parse_json_object(data: bytes) -> dict:
    """A JSON object from bytes; InputError with the reason for anything else."""
    text = _decode(data)
    if not text.strip():
        raise InputError("está vacío")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"no es JSON válido (línea {exc.lineno}, columna {exc.colno}: {exc.msg}); quizá quedó cortado") from None
    except RecursionError:
        raise InputError("tiene un JSON anidado a demasiada profundidad") from None
    if not isinstance(value, dict):
        raise InputError(f"debería contener un objeto JSON y contiene {type(value).__name__}")
    return value


def parse_jsonl(data: bytes) -> tuple[list[dict], list[int], bool]:
    """Rows of a JSON-lines file, the 1-based numbers of bad lines, and whether the last line was cut.

    A malformed last line is what a crash mid-write leaves (``labs.core.runfolder.append_jsonl``): it is
    reported separately from malformed lines in the middle.
    """
    lines = _decode(data).splitlines()
    rows, bad = [], []
    last_cut = False
    last_index = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            if i == last_index:
                last_cut = True
            else:
                bad.append(i + 1)
            continue
        if isinstance(value, dict):
            rows.append(value)
        else:
            bad.append(i + 1)
    return rows, bad, last_cut


def _as_int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


def _read_object(data: RunData, relative: str, area: str, required: bool, what: str) -> dict | None:
    path = data.root / relative
    if not required and not path.exists() and not path.is_symlink():
        return None
    try:
        return parse_json_object(read_limited(path, MAX_JSON_BYTES))
    except InputError as exc:
        data.problems.append(Problem(area, f"No se puede evaluar {what} porque {relative} {exc}."))
        return None


def _read_rows(data: RunData, relative: str, area: str, what: str) -> list[dict] | None:
    path = data.root / relative
    try:
        rows, bad, last_cut = parse_jsonl(read_limited(path, MAX_JSONL_BYTES))
    except InputError as exc:
        data.problems.append(Problem(area, f"No se puede evaluar {what} porque {relative} {exc}."))
        return None
    if bad:
        shown = ", ".join(str(n) for n in bad[:5]) + (" ..." if len(bad) > 5 else "")
        data.problems.append(
            Problem(area, f"{relative} tiene {len(bad)} líneas que no son JSON válido (líneas {shown}); se ignoran.")
        )
    if last_cut:
        data.problems.append(
            Problem(area, f"La última línea de {relative} está cortada (lo normal si el proceso murió escribiendo); se ignora.")
        )
    return rows


def _check_status(data: RunData) -> None:
    status = data.status
    if status is None:
        return
    state = status.get("state")
    step = _as_int(status.get("step"))
    max_steps = _as_int(status.get("max_steps"))
    if state not in (rf.STATE_RUNNING, rf.STATE_FINISHED, rf.STATE_FAILED) or step is None or max_steps is None:
        data.problems.append(
            Problem(
                "status",
                f"No se puede evaluar el estado porque {rf.STATUS_JSON} no tiene 'state' (running, finished o "
                "failed), 'step' y 'max_steps' enteros.",
            )
        )
        data.status = None
        return
    data.status = dict(status, step=step, max_steps=max_steps)


def _find_curves(data: RunData) -> None:
    folder = data.root / rf.CURVES_DIR
    if folder.is_symlink() or not folder.is_dir():
        return
    for path in sorted(folder.iterdir())[:200]:
        if len(data.curves) >= MAX_CURVES:
            break
        if path.suffix.lower() != ".png":
            continue
        try:
            head = read_limited(path, MAX_PNG_BYTES)[: len(PNG_SIGNATURE)]
        except InputError as exc:
            data.problems.append(Problem("curves", f"No se copia la figura {path.name} porque {exc}."))
            continue
        if head != PNG_SIGNATURE:
            data.problems.append(Problem("curves", f"No se copia la figura {path.name} porque no es un PNG válido."))
            continue
        data.curves.append(path)


def load_run(root: str | Path) -> RunData:
    """Everything the grader reads from one run folder, with the problems found on the way."""
    data = RunData(root=Path(root))
    if data.root.is_symlink() or not data.root.is_dir():
        data.problems.append(Problem("run", f"No se puede evaluar la ejecución porque {data.root.name} no es una carpeta."))
        return data
    data.run = _read_object(data, rf.RUN_JSON, "run", True, "la configuración de la ejecución")
    data.status = _read_object(data, rf.STATUS_JSON, "status", True, "si el entrenamiento terminó")
    _check_status(data)
    data.metrics = _read_rows(data, rf.METRICS_JSONL, "metrics", "las curvas de entrenamiento") or []
    eval_dir = data.root / rf.EVAL_DIR
    if eval_dir.is_dir() and not eval_dir.is_symlink():
        data.base = _read_rows(data, rf.EVAL_BASE, "eval", "la evaluación del modelo base")
        data.trained = _read_rows(data, rf.EVAL_TRAINED, "eval", "la evaluación del modelo entrenado")
        data.summary = _read_object(data, rf.EVAL_SUMMARY, "eval", False, "el resumen de la evaluación")
    else:
        data.problems.append(
            Problem(
                "eval",
                f"No se puede evaluar la mejora en el holdout porque falta la carpeta {rf.EVAL_DIR}/ "
                "(la evaluación base contra entrenado no se ejecutó o no se entregó).",
            )
        )
    _find_curves(data)
    return data


def find_value(obj, *names: str, depth: int = 2):
    """The first value stored under any of ``names`` in ``obj`` or its nested dicts (breadth first)."""
    level = [obj] if isinstance(obj, dict) else []
    for _ in range(depth + 1):
        for d in level:
            for name in names:
                if name in d:
                    return d[name]
        level = [v for d in level for v in d.values() if isinstance(v, dict)]
    return None


def reward_functions(run: dict | None) -> list[tuple[str, float | None]]:
    """(name, weight) of the reward functions recorded in run.json, whatever shape was used.

    Accepted: a list of names, a list of ``{"name", "weight"}`` dicts, or a ``{name: weight}`` dict,
    under ``reward_functions``, ``reward_funcs`` or ``rewards``; weights may also come from a separate
    ``reward_weights`` list.
    """
    raw = find_value(run, "reward_functions", "reward_funcs", "rewards")
    weights = find_value(run, "reward_weights")
    out: list[tuple[str, float | None]] = []
    if isinstance(raw, dict):
        items = list(raw.items())
        raw = [{"name": k, "weight": v} for k, v in items]
    if isinstance(raw, list):
        for i, item in enumerate(raw[:50]):
            name, weight = None, None
            if isinstance(item, str):
                name = item
            elif isinstance(item, dict):
                name = item.get("name")
                weight = item.get("weight")
            if isinstance(weights, list) and i < len(weights) and weight is None:
                weight = weights[i]
            if isinstance(name, str) and name.strip():
                w = weight if isinstance(weight, (int, float)) and not isinstance(weight, bool) else None
                out.append((name.strip()[:100], float(w) if w is not None and math.isfinite(w) else None))
    return out
