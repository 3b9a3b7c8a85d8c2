"""One call at the top of every notebook: third-party progress bars and info lines off, errors kept.

A student's notebook showed, in English, "Loading weights" bars (stored frozen at 0 %), "Tokenizing train dataset",
"Writing model shards", and transformers' ``[INFO] Running in WANDB offline mode``. ``quiet_notebook()`` turns
those off in the kernel and in every process it starts (the settings are environment variables, which children
inherit):

- progress bars: huggingface_hub's, transformers' and datasets' (their own switches, also called on a library the
  kernel has already imported), and any other ``tqdm`` bar (``TQDM_DISABLE``: vLLM's "Processed prompts");
- wandb's banner and info lines (``WANDB_SILENT``, ``WANDB_QUIET``); its errors still print;
- transformers' ``[INFO] Running in WANDB offline mode``, a bare ``print`` when its wandb integration is first
  imported: that one line is dropped from the import's output, the rest passes through.

It silences no warning and no logger: deprecations (TRL's ``FutureWarning`` about an argument the course passes),
out-of-memory reports and errors stay visible. The course's own lines never go through tqdm (they are the Spanish
``[paso n/N]`` lines of ``labs.training.console``). Nothing is imported here: the call costs nothing in a notebook
that never loads a model.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import io
import os
import sys

QUIET_ENV = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "TQDM_DISABLE": "1",
    "WANDB_SILENT": "true",
    "WANDB_QUIET": "true",
}
# Libraries already imported keep the switch they read at import; these turn their bars off in place.
PROGRESS_SWITCHES = (
    ("huggingface_hub", "huggingface_hub.utils", "disable_progress_bars"),
    ("transformers", "transformers.utils.logging", "disable_progress_bar"),
    ("datasets", "datasets", "disable_progress_bars"),
)
WANDB_OFFLINE_MODULE = "transformers.integrations.integration_utils"
WANDB_OFFLINE_LINE = "[INFO] Running in WANDB offline mode"


class _DropLines(importlib.abc.Loader):
    """Runs another loader's ``exec_module`` with stdout captured, then writes back every line but ``line``."""

    def __init__(self, loader, line: str):
        self.loader, self.line = loader, line

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                self.loader.exec_module(module)
        finally:
            kept = [text for text in out.getvalue().splitlines(keepends=True) if text.strip() != self.line]
            sys.stdout.write("".join(kept))

    def __getattr__(self, name):  # get_source, is_package, ...: the real loader's
        return getattr(self.loader, name)


class _QuietImport(importlib.abc.MetaPathFinder):
    """Finds ``module`` with the other finders and wraps its loader in ``_DropLines``."""

    def __init__(self, module: str, line: str):
        self.module, self.line = module, line

    def find_spec(self, fullname, path, target=None):
        if fullname != self.module:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _DropLines(spec.loader, self.line)
                return spec
        return None


def quiet_notebook() -> None:
    """Turn third-party progress bars and info lines off for this process and the ones it starts (idempotent)."""
    os.environ.update(QUIET_ENV)
    for top, module, function in PROGRESS_SWITCHES:
        if top in sys.modules:
            with contextlib.suppress(ImportError, AttributeError):
                getattr(__import__(module, fromlist=[function]), function)()
    if WANDB_OFFLINE_MODULE not in sys.modules and not any(isinstance(f, _QuietImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport(WANDB_OFFLINE_MODULE, WANDB_OFFLINE_LINE))
