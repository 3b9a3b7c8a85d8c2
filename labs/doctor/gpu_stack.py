"""Facts about the GPU stack that its packages' metadata and files state: which CUDA major a vLLM build
needs, and which model repo Unsloth really loads for a profile.

* vLLM's CUDA major. vLLM 0.31.0 from PyPI is a CUDA 13 build: its compiled extensions name
  ``libcudart.so.13`` and ``libnvrtc.so.13`` (ELF ``NEEDED`` entries, read with ``readelf -d``) and its
  metadata pulls ``nvidia-cutlass-dsl[cu13]``. A torch of another CUDA major beside it (say PyTorch's
  ``+cu128`` build) makes vLLM's kernels fail to load. :func:`cuda_major_from_libraries` reads the
  library names out of the installed ``.so`` files; :func:`cuda_major_from_requirements` reads the
  ``-cuNN`` names and ``[cuNN]`` extras of its requirements.
* Unsloth's repo. With ``load_in_4bit=True`` Unsloth maps ``unsloth/Qwen3-4B-Instruct-2507`` to the
  pre-quantised ``unsloth/Qwen3-4B-Instruct-2507-unsloth-bnb-4bit`` (``unsloth/models/mapper.py`` and
  ``loader_utils.__get_model_name``). :func:`unsloth_repo_map` runs that mapping from the installed
  Unsloth's own files without importing the package (``import unsloth`` patches transformers and TRL,
  and L7.2 needs it imported first); without Unsloth, ``RECORDED_UNSLOTH_REPOS`` holds what the
  pinned release maps to.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
from pathlib import Path

# What unsloth 2026.10.9's mapper gives for the course's model (read from the wheel's mapper.py).
UNSLOTH_RECORDED_RELEASE = "2026.10.9"
RECORDED_UNSLOTH_REPOS = {
    "unsloth/Qwen3-4B-Instruct-2507": {
        "4bit": "unsloth/Qwen3-4B-Instruct-2507-unsloth-bnb-4bit",
        "16bit": "unsloth/Qwen3-4B-Instruct-2507",
    },
}

_CUDA_LIBRARY = re.compile(rb"lib(?:cudart|nvrtc|cublas)\.so\.(\d+)")
_CU_TAG = re.compile(r"cu(\d+)")
MAX_SO_BYTES = 16 * 2**20  # the small extensions name the same libraries as the 300 MB ones


def cu_tag_major(digits: str) -> int:
    """``13`` -> 13, ``128`` -> 12, ``130`` -> 13, ``118`` -> 11 (PyTorch and NVIDIA tag styles)."""
    return int(digits if len(digits) <= 2 else digits[:-1])


def cuda_major_from_local_version(version: str | None) -> int | None:
    """``2.13.0+cu128`` -> 12; ``2.13.0`` or ``+cpu`` -> None."""
    local = (version or "").partition("+")[2]
    match = _CU_TAG.fullmatch(local)
    return cu_tag_major(match.group(1)) if match else None


def cuda_major_from_requirements(requirements: list[str]) -> set[int]:
    """CUDA majors named by unconditional requirements: ``nvidia-cudnn-cu13``, ``nvidia-cutlass-dsl[cu13]``."""
    from packaging.requirements import InvalidRequirement, Requirement

    majors = set()
    for line in requirements:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue  # optional extras (vLLM's "deepstream") are not installed by default
        match = re.search(r"-cu(\d+)$", req.name.lower())
        if match:
            majors.add(cu_tag_major(match.group(1)))
        for extra in req.extras:
            match = _CU_TAG.fullmatch(extra)
            if match:
                majors.add(cu_tag_major(match.group(1)))
    return majors


def cuda_major_from_libraries(blobs: dict[str, bytes]) -> tuple[set[int], list[str]]:
    """CUDA majors of the runtime libraries named inside compiled files, and where each was seen."""
    majors, seen = set(), []
    for name, data in blobs.items():
        for match in sorted(set(_CUDA_LIBRARY.findall(data))):
            majors.add(int(match))
            seen.append(f"{name}: cuda .so.{int(match)}")
    return majors, seen


def vllm_cuda_facts(dist: str = "vllm") -> dict | None:
    """``{"version", "major", "source"}`` for the installed CUDA vLLM, or None when it is not installed."""
    try:
        version = importlib.metadata.version(dist)
        files = importlib.metadata.files(dist) or []
        requires = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:
        return None
    major = cuda_major_from_local_version(version)
    if major is not None:
        return {"version": version, "major": major, "source": f"etiqueta local de la versión ({version})"}
    blobs = {}
    for entry in files:
        path = str(entry)
        if path.endswith(".so") and path.startswith("vllm/") and "third_party" not in path:
            located = Path(entry.locate())
            try:
                if located.stat().st_size <= MAX_SO_BYTES:
                    blobs[path] = located.read_bytes()
            except OSError:
                continue
    majors, seen = cuda_major_from_libraries(blobs)
    if len(majors) == 1:
        return {"version": version, "major": majors.pop(), "source": "; ".join(seen[:2])}
    from_meta = cuda_major_from_requirements(requires)
    if len(from_meta) == 1:
        return {"version": version, "major": from_meta.pop(), "source": "requisitos de vllm (metadata)"}
    return {"version": version, "major": None, "source": f"no concluyente: bibliotecas {sorted(majors)}, "
                                                       f"metadata {sorted(from_meta)}"}


# --- Unsloth's model-name mapping ----------------------------------------------------------------


def map_model_name(name: str, load_in_4bit: bool, mappers: dict, bad: dict | None = None) -> str:
    """What ``unsloth.models.loader_utils.get_model_name`` returns (without the FP8 and remote paths).

    ``mappers``: the ``INT_TO_FLOAT_MAPPER``, ``FLOAT_TO_INT_MAPPER`` and ``MAP_TO_UNSLOTH_16bit`` dicts
    of ``unsloth/models/mapper.py``; ``bad``: ``loader_utils.BAD_MAPPINGS`` (a mapped name it overrides).
    """
    lower = name.lower()
    new = None
    if not load_in_4bit and lower in mappers["INT_TO_FLOAT_MAPPER"]:
        new = mappers["INT_TO_FLOAT_MAPPER"][lower]
    elif not load_in_4bit and lower in mappers["MAP_TO_UNSLOTH_16bit"]:
        new = mappers["MAP_TO_UNSLOTH_16bit"][lower]
    elif load_in_4bit and lower in mappers["FLOAT_TO_INT_MAPPER"]:
        new = name if lower.endswith("-bnb-4bit") else mappers["FLOAT_TO_INT_MAPPER"][lower]
    bad = bad or {}
    if new is not None and new.lower() in bad:
        new = bad[new.lower()]
    elif new is None and lower in bad:
        new = bad[lower]
    return new or name


def _bad_mappings(source: str) -> dict:
    """``BAD_MAPPINGS`` out of loader_utils.py's text: string keys, some written ``"...".lower()``."""
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(getattr(t, "id", None) == "BAD_MAPPINGS" for t in node.targets)):
            out = {}
            for key, value in zip(node.value.keys, node.value.values):
                if isinstance(key, ast.Call) and isinstance(key.func, ast.Attribute):
                    key = key.func.value
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    out[str(key.value).lower()] = str(value.value)
            return out
    return {}


def load_unsloth_mappers(package_dir: Path) -> tuple[dict, dict]:
    """Run ``<unsloth>/models/mapper.py`` on its own (it imports nothing) and read ``BAD_MAPPINGS``."""
    mapper = package_dir / "models" / "mapper.py"
    namespace: dict = {"__name__": "unsloth_mapper_for_the_doctor"}
    exec(compile(mapper.read_text(encoding="utf-8"), str(mapper), "exec"), namespace)
    mappers = {k: namespace[k] for k in ("INT_TO_FLOAT_MAPPER", "FLOAT_TO_INT_MAPPER", "MAP_TO_UNSLOTH_16bit")}
    loader_utils = package_dir / "models" / "loader_utils.py"
    bad = _bad_mappings(loader_utils.read_text(encoding="utf-8")) if loader_utils.exists() else {}
    return mappers, bad


def unsloth_repo_map(names: list[str]) -> dict:
    """``{name: {"4bit", "16bit"}, "_source": ...}``: from the installed Unsloth, else the recorded table."""
    spec = importlib.util.find_spec("unsloth")
    if spec is not None and spec.submodule_search_locations:
        package_dir = Path(list(spec.submodule_search_locations)[0])
        try:
            mappers, bad = load_unsloth_mappers(package_dir)
        except Exception as exc:  # a changed file layout: say so and fall back
            source = f"no pude leer el mapeo de Unsloth ({type(exc).__name__}: {exc}); uso el registrado"
        else:
            try:
                version = importlib.metadata.version("unsloth")
            except importlib.metadata.PackageNotFoundError:
                version = "?"
            out = {n: {"4bit": map_model_name(n, True, mappers, bad), "16bit": map_model_name(n, False, mappers, bad)}
                   for n in names}
            out["_source"] = f"unsloth {version} instalado (unsloth/models/mapper.py)"
            return out
    else:
        source = f"Unsloth no está instalado: mapeo registrado de unsloth {UNSLOTH_RECORDED_RELEASE}"
    out = {n: dict(RECORDED_UNSLOTH_REPOS.get(n, {"4bit": n, "16bit": n})) for n in names}
    out["_source"] = source
    return out


def unsloth_repo(model: str, load_in_4bit: bool, repo_map: dict | None) -> str:
    """The repo Unsloth downloads for ``model``: from a probe's map, else the recorded table."""
    entry = (repo_map or {}).get(model) or RECORDED_UNSLOTH_REPOS.get(model)
    if not entry:
        return model
    return entry["4bit" if load_in_4bit else "16bit"]
