"""Does a model id exist? The lesson's ``unsloth/Qwen3-4B-Instruct`` does not (errata 2); this looks it up.

Two sources, the better one first:

* **the model hub** (``huggingface_hub.model_info``; a missing repo raises ``RepositoryNotFoundError``), only on a
  GPU profile with the network allowed: the CPU profiles never touch the hub (``HF_HUB_OFFLINE=1`` in CI);
* **Unsloth's table of models** (``__INT_TO_FLOAT_MAPPER`` in ``unsloth/models/mapper.py``: every model Unsloth
  knows, one entry per model with the names of its copies). Read from the installed Unsloth without importing it
  (``labs.doctor.gpu_stack``), or, where Unsloth is not installed (the CPU stack), from the course's snapshot of
  the pinned release's Qwen3 entries, ``data/unsloth/qwen3_models.txt`` (written by :func:`snapshot_text` from the
  wheel; ``tests/test_l72_checks.py`` compares it with the wheel when the wheel is at hand).

The table settles it for the Qwen3 family (Unsloth lists every Qwen3 it can load); elsewhere "not in the table"
only means unknown.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from labs.core.paths import REPO_ROOT

SNAPSHOT = REPO_ROOT / "data" / "unsloth" / "qwen3_models.txt"
SNAPSHOT_FAMILY = "qwen3"  # entries with a name containing this (any case) go into the snapshot


def mapper_entries(source: str) -> list[tuple[str, ...]]:
    """The entries of ``__INT_TO_FLOAT_MAPPER`` in a mapper.py text: each model's names, its key first."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__INT_TO_FLOAT_MAPPER" for t in node.targets):
            table = ast.literal_eval(node.value)
            break
    else:
        raise ValueError("mapper.py no tiene __INT_TO_FLOAT_MAPPER")

    def names(value):
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [n for v in value.values() for n in names(v)]
        return [n for v in value for n in names(v)]

    return [tuple(dict.fromkeys([key, *names(value)])) for key, value in table.items()]


def snapshot_text(source: str, release: str) -> str:
    entries = [e for e in mapper_entries(source) if any(SNAPSHOT_FAMILY in n.lower() for n in e)]
    head = (f"# unsloth {release}, unsloth/models/mapper.py, __INT_TO_FLOAT_MAPPER: the entries naming a Qwen3 model,\n"
            "# one line per model (its names, the key first). Written by labs.l72.model_ids.snapshot_text.\n")
    return head + "".join(" ".join(e) + "\n" for e in entries)


@dataclass(frozen=True)
class Table:
    entries: tuple[tuple[str, ...], ...]
    source_es: str
    family: str | None = None  # the table covers only names containing this (None: all of Unsloth's)

    def entry(self, name: str) -> tuple[str, ...] | None:
        lower = name.lower()
        return next((e for e in self.entries if lower in (n.lower() for n in e)), None)

    def knows(self, name: str) -> bool | None:
        """True if listed; False if not, where the table covers the name's family; None if it cannot say."""
        if self.entry(name) is not None:
            return True
        return False if self.family is None or self.family in name.lower() else None

    def relatives(self, name: str) -> list[str]:
        """Listed names that start with this name's repository name (what the table has instead)."""
        stem = name.split("/")[-1].lower()
        return sorted({n for e in self.entries for n in e if n.split("/")[-1].lower().startswith(stem)
                       and n.split("/")[0].lower() == name.split("/")[0].lower()})


@lru_cache(maxsize=1)
def unsloth_table() -> Table:
    """Unsloth's table: the installed package's mapper.py if there is one, else the pinned release's snapshot."""
    spec = importlib.util.find_spec("unsloth")
    if spec is not None and spec.submodule_search_locations:
        mapper = Path(list(spec.submodule_search_locations)[0]) / "models" / "mapper.py"
        if mapper.exists():
            version = importlib.metadata.version("unsloth")
            return Table(tuple(mapper_entries(mapper.read_text(encoding="utf-8"))),
                         f"la tabla de modelos de Unsloth {version} instalado (unsloth/models/mapper.py)")
    lines = [line.split() for line in SNAPSHOT.read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
    release = SNAPSHOT.read_text(encoding="utf-8").split()[2].rstrip(",")
    return Table(tuple(tuple(line) for line in lines if line),
                 f"la tabla de modelos de Unsloth {release} (los Qwen3 de su mapper.py, copiados en "
                 f"{SNAPSHOT.relative_to(REPO_ROOT)}; aquí Unsloth no está instalado)", family=SNAPSHOT_FAMILY)


def same_model(a: str, b: str) -> bool:
    """Whether two ids name the same model (equal, or two copies in one entry of Unsloth's table)."""
    if a.lower() == b.lower():
        return True
    entry = unsloth_table().entry(a)
    return entry is not None and b.lower() in (n.lower() for n in entry)


def hub_allowed(use_cpu: bool) -> bool:
    """The hub is asked only on a GPU profile, and never with ``HF_HUB_OFFLINE`` set."""
    return not use_cpu and os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("", "0", "false", "no")


@dataclass(frozen=True)
class Lookup:
    name: str
    exists: bool | None  # None: the source cannot tell
    source_es: str
    detail_es: str = ""

    def describe_es(self) -> str:
        verdict = {True: "existe", False: "NO existe", None: "no se puede saber"}[self.exists]
        return f"{self.name}: {verdict}, según {self.source_es}.{' ' + self.detail_es + '.' if self.detail_es else ''}"


def _ask_hub(name: str) -> Lookup | None:
    """The hub's answer, or None when it did not give one (no network, no package)."""
    try:
        from huggingface_hub import model_info
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError
    except ImportError:
        return None
    try:
        info = model_info(name, timeout=20)
    except GatedRepoError:
        return Lookup(name, True, "el hub de modelos", "existe, con acceso restringido")
    except RepositoryNotFoundError as error:
        return Lookup(name, False, "el hub de modelos", f"{type(error).__name__}: el repositorio no existe")
    except Exception:  # noqa: BLE001 - no network, a timeout: the table answers instead
        return None
    return Lookup(name, True, "el hub de modelos", f"repositorio {info.id}")


def look_up(name: str, use_cpu: bool = True) -> Lookup:
    """Whether ``name`` exists: the hub where allowed (:func:`hub_allowed`), else Unsloth's table."""
    if hub_allowed(use_cpu):
        found = _ask_hub(name)
        if found is not None:
            return found
    table = unsloth_table()
    knows = table.knows(name)
    if knows:
        return Lookup(name, True, table.source_es, "Copias del mismo modelo: " + ", ".join(table.entry(name) or ()))
    relatives = table.relatives(name)
    detail = f"Lo que sí tiene con ese nombre: {', '.join(relatives)}" if relatives else ""
    return Lookup(name, knows, table.source_es, detail)
