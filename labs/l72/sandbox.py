"""A sandbox where the student's ``importar_unsloth()`` runs against stand-in unsloth, trl, transformers and peft.

L7.2's second question asks for a function that switches Standby on and imports unsloth the only way that works.
Its check must not import the real packages (``import unsloth`` patches trl and transformers for the life of the
process, and the CPU stack has no Unsloth at all), and must not read the student's code as text: any style that
does the right thing passes (``import unsloth as u``, ``return unsloth.FastLanguageModel``,
``importlib.import_module``). So :class:`ImportSandbox` puts an import hook first on ``sys.meta_path`` that answers
``unsloth``, ``trl``, ``transformers`` and ``peft`` (and their submodules) with empty stand-ins, each recording
when it was imported, and what ``UNSLOTH_VLLM_STANDBY`` held at the moment unsloth was. The real modules, if the
process had any, are set aside and put back afterwards, and so is the environment variable.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import traceback
import types
from dataclasses import dataclass, field
from pathlib import Path

from labs.l72.standby import ORDER_SENSITIVE_MODULES, STANDBY_ENV

FAKE_ROOTS = ("unsloth", *ORDER_SENSITIVE_MODULES)
LABS_DIR = Path(__file__).resolve().parent.parent  # a call that imports unsloth from here is the course's guard
# What each stand-in exports (the names a student's code may import from it); nothing else exists.
EXPORTS = {
    "unsloth": ("FastLanguageModel", "FastModel", "is_bfloat16_supported"),
    "trl": ("GRPOConfig", "GRPOTrainer"),
    "transformers": ("AutoModelForCausalLM", "AutoTokenizer"),
    "peft": ("LoraConfig", "get_peft_model"),
}


@dataclass
class ImportRecord:
    """What happened inside the sandbox: the packages in the order they were first imported, and more."""

    order: list[str] = field(default_factory=list)
    standby_at_unsloth: str | None = None  # the variable's value when unsloth was imported (None: unset)
    unsloth_importer: str | None = None  # the file whose code imported unsloth
    exports: dict[str, dict[str, object]] = field(default_factory=dict)  # root -> its stand-in names

    def before_unsloth(self) -> list[str]:
        """The patched packages imported before unsloth (all of them imported, when unsloth never was)."""
        stop = self.order.index("unsloth") if "unsloth" in self.order else len(self.order)
        return [m for m in self.order[:stop] if m != "unsloth"]


def _importer_file() -> str | None:
    """The first frame outside importlib and this module: the code that asked for the import."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        name = frame.filename
        if "importlib" in name or name == __file__ or name.startswith("<frozen"):
            continue
        return name
    return None


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, record: ImportRecord):
        self.record = record

    def find_spec(self, fullname, path=None, target=None):
        parts = fullname.split(".")
        if parts[0] not in FAKE_ROOTS or (len(parts) > 1 and parts[-1][:1].isupper()):
            return None  # ``from trl import FastLanguageModel`` must not find a submodule of that name
        return importlib.util.spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec):
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []
        root = module.__name__.split(".")[0]
        if module.__name__ != root:
            return
        self.record.order.append(root)
        names = {name: type(name, (), {"__module__": root, "__doc__": f"Stand-in for {root}.{name}."})
                 for name in EXPORTS[root]}
        self.record.exports[root] = names
        module.__dict__.update(names)
        if root == "unsloth":
            self.record.standby_at_unsloth = os.environ.get(STANDBY_ENV)
            self.record.unsloth_importer = _importer_file()


class ImportSandbox:
    """``with ImportSandbox(environ) as record:`` stand-ins for the four packages, and ``environ``'s variable."""

    def __init__(self, standby: str | None = None):
        self.standby = standby  # UNSLOTH_VLLM_STANDBY inside the sandbox (None: unset)
        self.record = ImportRecord()

    def __enter__(self) -> ImportRecord:
        self._saved = {k: m for k, m in sys.modules.items() if k.split(".")[0] in FAKE_ROOTS}
        for key in self._saved:
            del sys.modules[key]
        self._env = os.environ.get(STANDBY_ENV)
        if self.standby is None:
            os.environ.pop(STANDBY_ENV, None)
        else:
            os.environ[STANDBY_ENV] = self.standby
        self._finder = _StandIns(self.record)
        sys.meta_path.insert(0, self._finder)
        importlib.invalidate_caches()
        return self.record

    def __exit__(self, *exc) -> None:
        sys.meta_path.remove(self._finder)
        for key in [k for k in sys.modules if k.split(".")[0] in FAKE_ROOTS]:
            del sys.modules[key]
        sys.modules.update(self._saved)
        if self._env is None:
            os.environ.pop(STANDBY_ENV, None)
        else:
            os.environ[STANDBY_ENV] = self._env


def run_in_sandbox(fn, standby: str | None = None):
    """Call ``fn()`` among the stand-ins: ``(record, result, error)``; ``error`` is the exception it raised."""
    with ImportSandbox(standby) as record:
        try:
            return record, fn(), None
        except Exception as error:  # noqa: BLE001 - the student's code: the check reports it
            return record, None, error


def in_labs(filename: str | None) -> bool:
    return bool(filename) and Path(filename).resolve().is_relative_to(LABS_DIR)


def course_module(filename: str) -> str:
    """``.../labs/l72/standby.py`` -> ``l72.standby``: how a check names the course code that did the import."""
    return ".".join(Path(filename).resolve().relative_to(LABS_DIR).with_suffix("").parts)
