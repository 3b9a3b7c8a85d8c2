"""The keyword arguments that pinned releases of TRL, transformers, PEFT and Unsloth accept.

The course runs on two stacks (see ``requirements.txt`` and ``requirements-gpu.txt``): CI has TRL 1.16,
a student's RTX 5090 has TRL 1.15 and transformers 5.17, because Unsloth caps them. Only one of the two
can be installed at a time, so this module reads the *source* of each pinned release instead of
importing it: it downloads the wheel once (``pip download --no-deps --only-binary :all:`` into
``<course cache>/wheels``; ``--only-binary`` so that pip never falls back to an sdist), opens it with
``zipfile`` and parses the class or function with ``ast``. Nothing is installed or imported.

What is read, and how:

* ``GRPOConfig`` is a dataclass; its keywords are its annotated fields plus those of every dataclass it
  inherits from (``trl.trainer.base_config._BaseConfig``, then ``transformers.TrainingArguments``).
  Bases are followed through the module's own imports; ``TrainingArguments`` lives in another wheel, so
  it is read from the transformers wheel that the same requirements file pins (5.17.0 beside TRL 1.15,
  5.19.0 beside TRL 1.16), not from whatever transformers happens to be installed.
* ``peft.LoraConfig`` is a dataclass read the same way.
* ``FastLanguageModel.from_pretrained`` and ``FastLanguageModel.get_peft_model`` are functions: their
  named parameters are read from the ``def``. Both also take ``**kwargs``, which is why
  :class:`Params` records ``var_keyword``; see ``tests/test_api_drift.py`` for what each ``**kwargs``
  does with a name it does not know.

The versions come from the requirements files, so bumping a pin there moves the guard with it.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from labs.core.paths import REPO_ROOT, cache_dir

REQUIREMENTS = {"cpu": REPO_ROOT / "requirements.txt", "gpu": REPO_ROOT / "requirements-gpu.txt"}

# Bases that are known not to be dataclasses: their annotations are not constructor keywords.
NON_DATACLASS_BASES = frozenset({"object", "PushToHubMixin", "ABC", "Generic"})

# Bases defined in another distribution: (distribution, file inside its wheel).
EXTERNAL_BASES = {"TrainingArguments": ("transformers", "transformers/training_args.py")}

PIP_TIMEOUT_S = 300


class WheelUnavailable(RuntimeError):
    """A pinned wheel is not in the cache and pip could not download it (offline, index down)."""


@dataclass(frozen=True)
class Params:
    """The keywords a callable accepts by name, and whether it also takes ``**kwargs``."""

    named: frozenset[str]
    var_keyword: bool
    where: str  # "<dist>==<version>:<file>:<qualname>", for messages

    def unknown(self, keys) -> list[str]:
        """The keys that are not named parameters (``**kwargs`` is deliberately not counted)."""
        return sorted(set(keys) - self.named)


# --------------------------------------------------------------------------------------------------
# Versions and wheels
# --------------------------------------------------------------------------------------------------


def pinned_version(dist: str, stack: str) -> str:
    """The ``dist==version`` pin in the requirements file of ``stack`` ("cpu" or "gpu")."""
    path = REQUIREMENTS[stack]
    pattern = re.compile(rf"^\s*{re.escape(dist)}\s*==\s*([^\s;#]+)", re.IGNORECASE)
    for line in path.read_text().splitlines():
        match = pattern.match(line)
        if match:
            return match.group(1)
    raise KeyError(f"{path.name} does not pin {dist}==<version>")


def wheel_dir() -> Path:
    path = cache_dir() / "wheels"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _normalise(dist: str) -> str:
    return re.sub(r"[-_.]+", "_", dist).lower()


def _find_cached(dist: str, version: str, folder: Path) -> Path | None:
    """A wheel named ``<dist>-<version>-*.whl`` in ``folder`` (wheel names normalise the dist name)."""
    for path in sorted(folder.glob("*.whl")):
        name, _, rest = path.name.partition("-")
        if _normalise(name) == _normalise(dist) and rest.startswith(f"{version}-"):
            return path
    return None


def wheel_path(dist: str, version: str) -> Path:
    """The wheel of ``dist==version`` in the cache, downloaded with pip on first use.

    Downloads into a temporary folder and moves the wheel in at the end, so two test runs at once
    never see half a file. Raises :class:`WheelUnavailable` with pip's own last lines when it fails.
    """
    folder = wheel_dir()
    cached = _find_cached(dist, version, folder)
    if cached:
        return cached
    with tempfile.TemporaryDirectory(dir=folder, prefix=".download-") as tmp:
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
            "--disable-pip-version-check", "--retries", "1", "--timeout", "20",
            f"{dist}=={version}", "-d", tmp,
        ]  # fmt: skip
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise WheelUnavailable(f"pip download {dist}=={version} did not finish: {exc}") from exc
        found = _find_cached(dist, version, Path(tmp))
        if done.returncode != 0 or found is None:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            raise WheelUnavailable(f"pip download {dist}=={version} failed (rc={done.returncode}): {tail}")
        target = folder / found.name
        os.replace(found, target)
        return target


def wheel_source(dist: str, version: str, relpath: str) -> str:
    with zipfile.ZipFile(wheel_path(dist, version)) as whl:
        try:
            return whl.read(relpath).decode("utf-8")
        except KeyError:
            raise FileNotFoundError(f"{dist}=={version} has no {relpath}") from None


# --------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------


def _class_node(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"class {name} not found")


def _is_dataclass(node: ast.ClassDef) -> bool:
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if ast.unparse(target).split(".")[-1] == "dataclass":
            return True
    return False


def _field_is_init(value: ast.expr | None) -> bool:
    """False for ``field(init=False)``: such a field is not a constructor keyword."""
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "field":
        for kw in value.keywords:
            if kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                return False
    return True


def own_init_fields(node: ast.ClassDef) -> set[str]:
    """Annotated class-level fields the dataclass ``__init__`` takes (ClassVar, init=False skipped)."""
    names = set()
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if "ClassVar" in ast.unparse(item.annotation):
                continue
            if _field_is_init(item.value):
                names.add(item.target.id)
    return names


def _module_of_base(tree: ast.Module, module: str, base: str) -> str | None:
    """Dotted module that defines ``base``, from the importing module's own imports (None: same module)."""
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == base for a in node.names):
            if node.level:
                parts = module.split(".")[: -node.level]
                return ".".join(parts + ([node.module] if node.module else []))
            return node.module
    return None


def dataclass_fields(dist: str, version: str, relpath: str, class_name: str,
                     pins: dict[str, str]) -> set[str]:
    """Constructor keywords of a dataclass in a wheel, following its dataclass bases.

    ``pins`` gives the version of any other distribution a base lives in (``{"transformers": "5.17.0"}``).
    """
    tree = ast.parse(wheel_source(dist, version, relpath))
    node = _class_node(tree, class_name)
    if not _is_dataclass(node):
        raise TypeError(f"{class_name} in {dist}=={version}:{relpath} is not a dataclass")
    fields = own_init_fields(node)
    module = relpath[: -len(".py")].replace("/", ".")
    for base_expr in node.bases:
        base = ast.unparse(base_expr).split(".")[-1]
        if base in NON_DATACLASS_BASES:
            continue
        if base in EXTERNAL_BASES:
            other, other_path = EXTERNAL_BASES[base]
            if other not in pins:
                raise KeyError(f"{class_name} inherits {base} from {other}: pass its pinned version")
            fields |= dataclass_fields(other, pins[other], other_path, base, pins)
            continue
        base_module = _module_of_base(tree, module, base) or module
        top = base_module.split(".")[0]
        if top != relpath.split("/")[0]:
            raise LookupError(f"{class_name}: base {base} comes from {base_module}, which is not followed")
        base_path = base_module.replace(".", "/") + ".py"
        fields |= dataclass_fields(dist, version, base_path, base, pins)
    return fields


def function_params(dist: str, version: str, relpath: str, qualname: str) -> Params:
    """Named parameters of ``Class.method`` (or a module-level function) in a wheel's source."""
    tree = ast.parse(wheel_source(dist, version, relpath))
    scope: list[ast.stmt] = tree.body
    *owners, func_name = qualname.split(".")
    for owner in owners:
        scope = _class_node(ast.Module(body=scope, type_ignores=[]), owner).body
    for node in scope:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == func_name:
            args = node.args
            named = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
            return Params(
                named=frozenset(n for n in named if n not in {"self", "cls"}),
                var_keyword=args.kwarg is not None,
                where=f"{dist}=={version}:{relpath}:{qualname}",
            )
    raise LookupError(f"{qualname} not found in {dist}=={version}:{relpath}")


# --------------------------------------------------------------------------------------------------
# The four APIs the course calls
# --------------------------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def grpo_config_fields(trl_version: str, transformers_version: str) -> frozenset[str]:
    """Keywords ``trl.GRPOConfig`` accepts in ``trl_version`` on top of ``transformers_version``."""
    pins = {"transformers": transformers_version}
    return frozenset(dataclass_fields("trl", trl_version, "trl/trainer/grpo_config.py", "GRPOConfig", pins))


@lru_cache(maxsize=None)
def sft_config_fields(trl_version: str, transformers_version: str) -> frozenset[str]:
    """Keywords ``trl.SFTConfig`` (the format pass) accepts in ``trl_version`` on top of ``transformers_version``."""
    pins = {"transformers": transformers_version}
    return frozenset(dataclass_fields("trl", trl_version, "trl/trainer/sft_config.py", "SFTConfig", pins))


@lru_cache(maxsize=None)
def lora_config_fields(peft_version: str) -> frozenset[str]:
    return frozenset(dataclass_fields("peft", peft_version, "peft/tuners/lora/config.py", "LoraConfig", {}))


@lru_cache(maxsize=None)
def unsloth_from_pretrained(unsloth_version: str) -> Params:
    """``FastLanguageModel.from_pretrained``: defined in ``unsloth/models/loader.py``."""
    return function_params("unsloth", unsloth_version, "unsloth/models/loader.py",
                           "FastLanguageModel.from_pretrained")


@lru_cache(maxsize=None)
def unsloth_get_peft_model(unsloth_version: str) -> Params:
    """``FastLanguageModel.get_peft_model``: a ``(model, *args, **kwargs)`` wrapper in ``loader.py``
    (``functools.wraps``) that forwards to ``FastLlamaModel.get_peft_model`` in ``llama.py``, whose
    ``def`` names the real parameters; its own ``**kwargs`` go on into ``peft.LoraConfig(**arguments)``.
    """
    return function_params("unsloth", unsloth_version, "unsloth/models/llama.py",
                           "FastLlamaModel.get_peft_model")


def unknown_keywords(keys, accepted: frozenset[str] | Params) -> list[str]:
    names = accepted.named if isinstance(accepted, Params) else accepted
    return sorted(set(keys) - set(names))


def drift_message(call: str, release: str, unknown: list[str], accepted) -> str:
    """One readable failure line: which call, which release, which keywords, and the close matches."""
    import difflib

    names = sorted(accepted.named if isinstance(accepted, Params) else accepted)
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, names, n=2)
        hints.append(f"{key!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    if isinstance(accepted, Params) and accepted.var_keyword:
        effect = "Its **kwargs would take them without checking, so they would be ignored or fail later."
    else:
        effect = "That release raises TypeError on them."
    return (
        f"The course passes {call} keyword(s) that {release} does not accept: {'; '.join(hints)}. "
        f"{effect} Remove them, or build them per version."
    )
