"""The shape of ``labs/``: no import cycle, no import from a lab above, no module too long to read.

The layers, from the bottom: ``core`` (no course lab, no ML framework at import time) is what every lab
shares; ``grading`` and ``vram`` read run folders and profiles; ``training`` is the training path every lab
shares; ``doctor`` checks the environment a lab needs; then the labs in course order. A module may import
from its own package and from packages of lower layers only: shared code moves down, never up.

Every ``import`` statement counts, also those inside functions, so a cycle cannot hide in a lazy import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

LABS = Path(__file__).resolve().parent.parent / "labs"
MAX_LINES = 400
# A module over MAX_LINES must say why it stays whole, in its docstring, with this phrase.
STAYS_WHOLE = "stays whole"

LAYERS = {
    "core": 0,
    "assign": 1,  # builds notebooks/ from sources/ with otter assign (imports only core)
    "grading": 1,
    "vram": 1,
    "training": 2,
    "doctor": 3,
    "l6": 4,
    "l71": 4,
    "l72": 5,
    "exercises": 6,
    "route": 7,  # the student's route through all of the above (notebook 00, README)
    "rehearsal": 7,  # runs L7.1 and L7.2 and estimates the exercises' runs
    "__main__": 8,  # the command line dispatcher (imports by name, at run time)
    "__init__": 8,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(LABS.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(LABS.rglob("*.py"))}


def imported_modules(path: Path, modules: dict[str, Path]) -> set[str]:
    """The ``labs`` modules that ``path`` imports anywhere in its body (resolved to the module file)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        for target in targets:
            while target and target not in modules:  # `import labs.core.stats.x` -> the module that exists
                target = target.rpartition(".")[0]
            if target.startswith("labs") and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: imported_modules(path, modules) for name, path in modules.items()}


def layer_of(module: str) -> tuple[str, int]:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    if top not in LAYERS:
        pytest.fail(f"{module}: package labs.{top} has no layer in tests/test_layout.py's LAYERS; add it.")
    return top, LAYERS[top]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_import_walker_resolves_relative_and_lazy_imports(tmp_path):
    graph = import_graph()
    assert "labs.grading.grade" in graph["labs.grading.report"]  # `from .grade import RunGrade`
    assert "labs.core.stats" in graph["labs.core.diagnostics"]


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_no_import_from_a_layer_above():
    wrong = []
    for module, targets in import_graph().items():
        top, rank = layer_of(module)
        for target in targets:
            other, other_rank = layer_of(target)
            if other != top and other_rank >= rank:
                wrong.append(f"{module} imports {target} (layer {other} is not below {top})")
    assert not wrong, "\n".join(wrong)


def test_modules_are_short_or_say_why():
    long = []
    for name, path in all_modules().items():
        text = path.read_text(encoding="utf-8")
        n = text.count("\n")
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if n > MAX_LINES and STAYS_WHOLE not in docstring:
            long.append(f"{name}: {n} lines")
    assert not long, f"over {MAX_LINES} lines without '{STAYS_WHOLE}' and a reason in the docstring: {long}"


def test_every_package_has_a_layer_and_the_map_names_it():
    readme = (LABS / "README.md").read_text(encoding="utf-8")
    for package in sorted(p.name for p in LABS.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        assert package in LAYERS, f"labs/{package} has no layer"
        assert f"{package}/" in readme, f"labs/README.md does not show labs/{package}/ on its map"
