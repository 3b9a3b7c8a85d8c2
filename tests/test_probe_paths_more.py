"""The doctor's fallbacks for a broken or unusual install, exercised through real inputs.

Odd package metadata is written as a ``*.dist-info`` folder into ``tmp_path`` and put on ``sys.path``; a missing
package is ``sys.modules[name] = None``; a host that answers is a TCP or HTTP server on 127.0.0.1 started here.
Nothing reaches the internet, nothing trains.
"""

from __future__ import annotations

import http.server
import importlib
import os
import socket
import sys
import threading
import types
from contextlib import contextmanager
from pathlib import Path

import pytest
from packaging.requirements import Requirement  # noqa: F401  imported before sys.path is narrowed below

from labs.core import runinfo
from labs.core.profiles import CPU, RTX5090, cuda_available
from labs.doctor import gpu_stack as G
from labs.l72 import backend, model_ids
from labs.training import reasoning as R

P = importlib.import_module("labs.doctor.probe")  # labs.doctor re-exports a function called probe


def write_dist(site: Path, name: str, version: str, requires=(), record=()) -> Path:
    """A minimal installed distribution: ``<site>/<name>-<version>.dist-info`` with METADATA and RECORD."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {req}" for req in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (info / "RECORD").write_text("".join(f"{path},,\n" for path in record), encoding="utf-8")
    return info


def only_site(monkeypatch, site: Path) -> None:
    """Make ``site`` the only place installed distributions are looked up (the real ones become absent)."""
    monkeypatch.setattr(sys, "path", [str(site)])


# --- probe.py: TRL's vLLM range ------------------------------------------------------------------------


def test_without_trl_there_is_no_vllm_range(tmp_path, monkeypatch):
    """No TRL installed: the record's trl_vllm_range is None, not a crash."""
    only_site(monkeypatch, tmp_path)
    assert P.dist_version("trl") is None
    assert P.trl_vllm_range() is None


def test_an_unparsable_requirement_of_trl_is_skipped(tmp_path, monkeypatch):
    """A Requires-Dist line that does not parse is skipped; the valid vllm extra after it still gives the range."""
    write_dist(tmp_path, "trl", "0.0.1", requires=["this is not a requirement !!",
                                                  'vllm<=0.31.0,>=0.22.0; extra == "vllm"'])
    only_site(monkeypatch, tmp_path)
    got = P.trl_vllm_range()
    assert got == {"spec": "<=0.31.0,>=0.22.0", "trl": "0.0.1", "source": "metadata de trl (extra vllm)"}


def test_trl_without_the_vllm_extra_falls_back_to_its_import_utils(tmp_path, monkeypatch):
    """No vllm extra in the metadata: the bounds are read out of trl/import_utils.py."""
    site, src = tmp_path / "site", tmp_path / "src" / "trl"
    src.mkdir(parents=True)
    (src / "import_utils.py").write_text(
        '_vllm_base_version = Version("0")\n'
        'if not (Version("0.10.2") <= _vllm_base_version <= Version("0.12.0")):\n'
        '    warnings.warn("unsupported vllm")\n', encoding="utf-8")
    write_dist(site, "trl", "0.0.2", requires=["bad requirement ((", "accelerate>=1.0"],
               record=["trl/__init__.py", "../src/trl/import_utils.py"])
    only_site(monkeypatch, site)
    assert P.trl_vllm_range() == {"spec": ">=0.10.2,<=0.12.0", "trl": "0.0.2", "source": "trl/import_utils.py"}


def test_trl_with_neither_the_extra_nor_the_bounds_gives_no_range(tmp_path, monkeypatch):
    """import_utils.py without the version check (or not listed at all): no range, None."""
    site, src = tmp_path / "site", tmp_path / "src" / "trl"
    src.mkdir(parents=True)
    (src / "import_utils.py").write_text("def is_vllm_available():\n    return False\n", encoding="utf-8")
    write_dist(site, "trl", "0.0.3", requires=["accelerate>=1.0"], record=["../src/trl/import_utils.py"])
    only_site(monkeypatch, site)
    assert P.trl_vllm_range() is None


def test_unsloth_caps_skip_an_unparsable_requirement(tmp_path, monkeypatch):
    """unsloth's caps on transformers survive a malformed Requires-Dist line next to them."""
    write_dist(tmp_path, "unsloth", "0.0.1", requires=["%%% not parsable", "transformers>=4.0,<=5.0", "numpy"])
    only_site(monkeypatch, tmp_path)
    assert P.unsloth_caps() == {"transformers": [{"by": "unsloth 0.0.1", "spec": "<=5.0,>=4.0"}]}


# --- probe.py: torch and the GPU -------------------------------------------------------------------


def _torch_installed() -> bool:
    return P.dist_version("torch") is not None


def test_a_torch_that_fails_to_import_is_reported_not_raised(monkeypatch):
    """An installed torch whose import fails: the record says imported=False and why, and lists no GPU."""
    if not _torch_installed():
        pytest.skip("torch is not installed in this environment")
    monkeypatch.setitem(sys.modules, "torch", None)
    facts, gpus = P.torch_facts(import_torch=True)
    assert facts["installed"] is True and facts["imported"] is False
    assert facts["error"] == "ModuleNotFoundError: import of torch halted; None in sys.modules"
    assert gpus == []


def test_a_cuda_query_that_raises_is_reported(monkeypatch):
    """torch imports but asking CUDA fails (a broken driver): the error is in the record, no GPU listed."""
    if not _torch_installed():
        pytest.skip("torch is not installed in this environment")

    def is_available():
        raise RuntimeError("CUDA driver initialization failed")

    fake = types.ModuleType("torch")
    fake.__version__ = "9.9.9+cu128"
    fake.version = types.SimpleNamespace(cuda="12.8")
    fake.cuda = types.SimpleNamespace(is_available=is_available)
    monkeypatch.setitem(sys.modules, "torch", fake)
    facts, gpus = P.torch_facts(import_torch=True)
    assert facts["imported"] is True and facts["version"] == "9.9.9+cu128" and facts["cuda"] == "12.8"
    assert facts["error"] == "RuntimeError: CUDA driver initialization failed"
    assert facts["cuda_available"] is None and gpus == []


def test_gpu_free_memory_is_optional():
    """mem_get_info failing leaves free_bytes None; the name, capability and total are still recorded."""

    def mem_get_info(index):
        raise RuntimeError("no context")

    props = types.SimpleNamespace(name="Fake GPU", major=12, minor=0, total_memory=32 * 2**30)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(get_device_properties=lambda i: props,
                                                            mem_get_info=mem_get_info))
    assert P._gpu_facts(fake, 0) == {"index": 0, "name": "Fake GPU", "capability": [12, 0],
                                     "total_bytes": 32 * 2**30, "free_bytes": None}


def test_an_nvidia_smi_that_cannot_run_is_reported(tmp_path, monkeypatch):
    """An nvidia-smi on PATH that the OS cannot execute: driver None, no GPUs, and the OSError as the error."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_bytes(b"\x00\x01 not an executable format\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    got = P.nvidia_smi_facts()
    assert got["driver"] is None and got["gpus"] == []
    assert got["error"].startswith("OSError: ") or got["error"].startswith("PermissionError: ")


# --- probe.py: disk and caches ---------------------------------------------------------------------


def test_hf_home_places_the_hub_cache(tmp_path, monkeypatch):
    """With only HF_HOME set, the hub cache is HF_HOME/hub (as huggingface_hub resolves it)."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert P.hf_hub_cache() == tmp_path / "hfhome" / "hub"


def test_disk_facts_of_a_folder_not_made_yet(tmp_path):
    """A cache folder that does not exist yet: free space of the file system of its nearest existing parent."""
    target = tmp_path / "not" / "made" / "yet"
    got = P.disk_facts(target)
    assert got["path"] == str(target)
    assert got["device"] == os.stat(tmp_path).st_dev
    assert got["free_bytes"] > 0
    assert not target.exists()  # looking does not create it


def test_a_broken_shard_index_is_skipped_for_the_next_snapshot(tmp_path):
    """A snapshot whose model.safetensors.index.json is not JSON does not count; a later full snapshot does."""
    repo = tmp_path / "models--org--tiny"
    broken, good = repo / "snapshots" / "a-broken", repo / "snapshots" / "b-good"
    broken.mkdir(parents=True)
    good.mkdir(parents=True)
    (broken / "model.safetensors.index.json").write_text("{not json", encoding="utf-8")
    (broken / "config.json").write_text("{}", encoding="utf-8")
    (good / "model.safetensors").write_bytes(b"w")
    (good / "config.json").write_text("{}", encoding="utf-8")
    assert P.hf_cached_model("org/tiny", tmp_path)["complete"] is True
    # only the broken one: not complete
    (good / "model.safetensors").unlink()
    assert P.hf_cached_model("org/tiny", tmp_path)["complete"] is False


# --- probe.py: the hub ----------------------------------------------------------------------------


def test_a_hub_endpoint_that_answers_is_reachable(monkeypatch):
    """HF_ENDPOINT pointing at a host that accepts the connection: reachable, and the reason names host:port."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
        got = P.hub_reachability(timeout=2.0)
    assert got == {"checked": True, "reachable": True, "reason": f"127.0.0.1:{port}"}


# --- gpu_stack.py ---------------------------------------------------------------------------------


def test_an_unparsable_requirement_names_no_cuda_major():
    """A malformed requirement is skipped; the -cuNN name next to it still counts."""
    assert G.cuda_major_from_requirements(["not a requirement !!", "nvidia-cudnn-cu12>=9"]) == {12}


def test_vllm_cuda_major_from_its_local_version_tag(tmp_path, monkeypatch):
    """A vLLM built as ``+cu129``: the major comes from the version tag, without reading any library."""
    write_dist(tmp_path, "course-fake-vllm", "0.1.0+cu129")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert G.vllm_cuda_facts("course-fake-vllm") == {
        "version": "0.1.0+cu129", "major": 12, "source": "etiqueta local de la versión (0.1.0+cu129)"}


def test_vllm_cuda_major_from_metadata_when_a_library_is_missing(tmp_path, monkeypatch):
    """A RECORD listing a .so that is not on disk is skipped; the requirements' cu13 then decide."""
    write_dist(tmp_path, "course-fake-vllm2", "0.2.0", requires=["nvidia-cutlass-dsl[cu13]>=4", "numpy"],
               record=["vllm/_C.so", "vllm/__init__.py"])
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not (tmp_path / "vllm" / "_C.so").exists()
    assert G.vllm_cuda_facts("course-fake-vllm2") == {
        "version": "0.2.0", "major": 13, "source": "requisitos de vllm (metadata)"}


def test_16bit_mapping_and_bad_mappings_of_unmapped_names():
    """Not 4-bit: INT_TO_FLOAT_MAPPER maps; a name no mapper knows is still overridden by BAD_MAPPINGS."""
    mappers = {"INT_TO_FLOAT_MAPPER": {"org/m-bnb-4bit": "org/m"}, "MAP_TO_UNSLOTH_16bit": {},
               "FLOAT_TO_INT_MAPPER": {}}
    assert G.map_model_name("org/M-bnb-4bit", False, mappers) == "org/m"
    assert G.map_model_name("Org/Odd", True, mappers, bad={"org/odd": "org/fixed"}) == "org/fixed"
    assert G.map_model_name("Org/Odd", True, mappers) == "Org/Odd"


def test_loader_utils_without_bad_mappings_gives_none(tmp_path):
    """An Unsloth whose loader_utils.py has no BAD_MAPPINGS: the mappers are read and no override applies."""
    models = tmp_path / "unsloth" / "models"
    models.mkdir(parents=True)
    (models / "mapper.py").write_text(
        "INT_TO_FLOAT_MAPPER = {}\nFLOAT_TO_INT_MAPPER = {'a/b': 'a/b-bnb-4bit'}\nMAP_TO_UNSLOTH_16bit = {}\n")
    (models / "loader_utils.py").write_text("OTHER = {'x': 'y'}\n")
    mappers, bad = G.load_unsloth_mappers(tmp_path / "unsloth")
    assert bad == {}
    assert mappers["FLOAT_TO_INT_MAPPER"] == {"a/b": "a/b-bnb-4bit"}


def test_an_unsloth_with_an_unreadable_mapper_falls_back_to_the_recorded_map(tmp_path, monkeypatch):
    """An installed Unsloth without models/mapper.py: the recorded map is used and the source says why."""
    package = tmp_path / "unsloth"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('the doctor must not import unsloth')\n")
    monkeypatch.delitem(sys.modules, "unsloth", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    name = "unsloth/Qwen3-4B-Instruct-2507"
    repos = G.unsloth_repo_map([name])
    assert repos["_source"].startswith("no pude leer el mapeo de Unsloth (FileNotFoundError")
    assert repos["_source"].endswith("uso el registrado")
    assert repos[name] == G.RECORDED_UNSLOTH_REPOS[name]


# --- model_ids.py ---------------------------------------------------------------------------------


def test_a_mapper_without_the_table_is_refused():
    """A mapper.py text without __INT_TO_FLOAT_MAPPER raises with the Spanish reason."""
    with pytest.raises(ValueError, match="mapper.py no tiene __INT_TO_FLOAT_MAPPER"):
        model_ids.mapper_entries("OTHER = {'a': 'b'}\n")


def test_without_huggingface_hub_the_table_answers(monkeypatch):
    """Hub allowed but huggingface_hub missing: the lookup still answers, from Unsloth's table."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    found = model_ids.look_up("unsloth/Qwen3-4B-Instruct-2507", use_cpu=False)
    assert found.exists is True
    assert found.source_es.startswith("la tabla de modelos de Unsloth")


class _Hub(http.server.BaseHTTPRequestHandler):
    status, error_code = 500, None

    def do_GET(self):  # noqa: N802 - the name http.server calls
        body = b'{"error": "test"}'
        self.send_response(self.status)
        if self.error_code:
            self.send_header("X-Error-Code", self.error_code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextmanager
def local_hub(monkeypatch, status: int, error_code: str | None):
    """A hub on 127.0.0.1 answering every request with ``status``; huggingface_hub is pointed at it."""
    hf_api = pytest.importorskip("huggingface_hub.hf_api")
    from huggingface_hub import constants

    handler = type("Handler", (_Hub,), {"status": status, "error_code": error_code})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # huggingface_hub reads HF_ENDPOINT and HF_HUB_OFFLINE once, at import: set what they would have set
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hf_api.api, "endpoint", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def test_a_gated_repo_exists(monkeypatch):
    """The hub answers 'gated': the model exists, with restricted access."""
    with local_hub(monkeypatch, 403, "GatedRepo"):
        found = model_ids.look_up("org/gated-model", use_cpu=False)
    assert found == model_ids.Lookup("org/gated-model", True, "el hub de modelos", "existe, con acceso restringido")


def test_a_hub_error_falls_back_to_the_table(monkeypatch):
    """The hub answers with a server error: the table answers instead (a Qwen3 it lists exists)."""
    with local_hub(monkeypatch, 500, None):
        found = model_ids.look_up("unsloth/Qwen3-4B-Instruct-2507", use_cpu=False)
    assert found.exists is True
    assert found.source_es.startswith("la tabla de modelos de Unsloth")


# --- backend.py and profiles.py -------------------------------------------------------------------


def test_gpu_path_on_a_cpu_profile_is_the_fallback():
    """The CPU profile: not Unsloth's GPU path, and the reason says the profile is a CPU one."""
    runs, why = backend.gpu_path(CPU)
    assert runs is False
    assert why.startswith(f"el perfil '{CPU.name}' es de CPU.")


def test_gpu_path_without_torch_says_no_gpu_is_seen(monkeypatch):
    """A GPU profile where torch cannot be imported: no CUDA is seen, and gpu_path says so instead of raising."""
    monkeypatch.setitem(sys.modules, "torch", None)
    assert cuda_available() is False
    runs, why = backend.gpu_path(RTX5090)
    assert runs is False
    assert why.startswith(f"El perfil '{RTX5090.name}' es de GPU, pero no se ve ninguna GPU CUDA")


# --- runinfo.py -----------------------------------------------------------------------------------


def test_hardware_without_sysconf_or_torch(monkeypatch):
    """A platform without os.sysconf (Windows) and no importable torch: no RAM figure, no GPUs, no crash."""
    monkeypatch.delattr(os, "sysconf", raising=False)
    monkeypatch.setitem(sys.modules, "torch", None)
    info = runinfo.hardware()
    assert "ram_gib" not in info
    assert info["gpus"] == []
    assert info["cpu_count"] == os.cpu_count()


# --- reasoning.py ---------------------------------------------------------------------------------


def test_an_unreadable_tokenizer_config_is_reported(tmp_path):
    """tokenizer_config.json that is not JSON: an error fact, and the Spanish sentence says it could not read it."""
    (tmp_path / "tokenizer_config.json").write_text("{broken", encoding="utf-8")
    facts = R.tokenizer_file_facts(tmp_path)
    assert set(facts) == {"error"} and facts["error"].startswith("JSONDecodeError: ")
    assert R.describe_es(facts) == f"no pude leer el tokenizer ({facts['error']})"


def test_special_think_tags_from_added_tokens_decoder(tmp_path):
    """Think tags marked special only in tokenizer_config.json's added_tokens_decoder are found."""
    (tmp_path / "tokenizer_config.json").write_text(
        '{"added_tokens_decoder": {"151667": {"content": "<think>", "special": true},'
        ' "151668": {"content": "</think>", "special": false}, "7": "not a dict"}}', encoding="utf-8")
    assert R.tokenizer_file_facts(tmp_path) == {"parser": [], "special_think_tags": ["<think>"]}


class _StubbornTokenizer:
    """A tokenizer whose response parser cannot be turned off (its setter ignores None)."""

    @property
    def response_template(self):
        return "{{ content }}"

    @response_template.setter
    def response_template(self, value):
        pass

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": []}


def test_a_parser_that_cannot_be_turned_off_stops_the_run():
    """If the parser stays on after the fix, keep_reasoning_for_rewards raises with the Spanish reason."""
    with pytest.raises(RuntimeError, match="No pude dejar <think>…</think> a la vista de las recompensas: "
                                           "trae response_template"):
        R.keep_reasoning_for_rewards(_StubbornTokenizer())


def test_trls_source_without_trl_installed_gives_no_range(tmp_path, monkeypatch):
    """TRL removed between reading its version and its files (another pip in another terminal): no range."""
    only_site(monkeypatch, tmp_path)
    assert P._trl_vllm_range_from_source("1.16.0") is None
