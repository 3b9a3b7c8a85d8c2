"""Notes down every Python process of the test session that steps a torch optimizer, that is, trains.

tests/conftest.py puts this folder first on ``PYTHONPATH``, so Python imports this file at start-up in every
process a test starts (``python -m labs l71 ...``, ``accelerate launch``, a helper script), and loads it
into the pytest process itself. When ``torch.optim.optimizer`` is imported, a global step pre-hook is
registered; the first step of an optimizer over a model (at least ``MIN_PARAMETERS`` parameters: the L6
toy bandit's few logits are not a model, the smallest the suite trains has 135 million) appends one line to
the file named by ``COURSE_TRAINING_GUARD``. The conftest fails a test not marked ``trains`` that made the
file grow.

Nothing else changes: no import of torch here (a process that never imports it pays nothing), no output,
and the hook returns None, so the step runs as it would have.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

GUARD_ENV = "COURSE_TRAINING_GUARD"
_OPTIMIZER_MODULE = "torch.optim.optimizer"
MIN_PARAMETERS = 100_000
_noted = False


def _note_step(optimizer, args, kwargs):
    global _noted
    path = os.environ.get(GUARD_ENV)
    if _noted or not path:
        return None
    if sum(p.numel() for group in optimizer.param_groups for p in group["params"]) < MIN_PARAMETERS:
        return None
    _noted = True  # one line per process is enough to tell that it trained
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"pid {os.getpid()} {type(optimizer).__name__}: {' '.join(sys.argv)[:300]}\n")
    return None


class _AfterOptimizerImport(importlib.abc.MetaPathFinder):
    """Registers the hook right after torch's optimizer module is executed, wherever it is imported from."""

    def find_spec(self, name, path=None, target=None):
        if name != _OPTIMIZER_MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            module.register_optimizer_step_pre_hook(_note_step)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    if _OPTIMIZER_MODULE in sys.modules:
        sys.modules[_OPTIMIZER_MODULE].register_optimizer_step_pre_hook(_note_step)
    elif not any(isinstance(f, _AfterOptimizerImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterOptimizerImport())


def _chain_to_the_real_sitecustomize(guard_dirs: list[str]) -> None:
    """This file shadows any other ``sitecustomize`` on the path; run that one too (skipping other copies of
    this guard, which a test of the guard puts on the path beside this one)."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) not in guard_dirs]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if __name__ == "sitecustomize":  # imported by Python at start-up, not loaded by the conftest
    _dirs = sys.__dict__.setdefault("_course_training_guard_dirs", [])
    if not _dirs and os.environ.get(GUARD_ENV):
        install()
    _dirs.append(os.path.dirname(os.path.abspath(__file__)))
    _chain_to_the_real_sitecustomize(_dirs)
