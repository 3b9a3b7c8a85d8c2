"""labs.doctor.gpu_stack: the CUDA major of a vLLM build and the repo Unsloth really loads.

The GPU wheels cannot be installed here, so the parsers run on the texts those wheels hold (vLLM 0.31.0's
requirements as its METADATA states them, library names as its extensions' NEEDED entries spell them)
and on a stand-in Unsloth package whose ``__init__`` refuses to be imported.
"""

from __future__ import annotations

import pytest

from labs.doctor import gpu_stack as G

# From vllm-0.31.0's METADATA (Requires-Dist lines that name a CUDA major).
VLLM_0_31_REQUIRES = [
    "torch==2.13.0",
    "nvidia-cutlass-dsl[cu13]==4.7.1",
    "humming-kernels[cu13]==0.1.16",
    'nvidia-deepstream-videodecode-cu13>=9.0.2; extra == "deepstream"',
    'zentorch==2.13.0.1; extra == "zen"',
]


def test_cu_tags_and_local_versions():
    assert [G.cu_tag_major(d) for d in ("12", "13", "118", "128", "130")] == [12, 13, 11, 12, 13]
    assert G.cuda_major_from_local_version("2.13.0+cu128") == 12
    assert G.cuda_major_from_local_version("2.13.0+cu130") == 13
    assert G.cuda_major_from_local_version("2.13.0") is None
    assert G.cuda_major_from_local_version("2.13.0+cpu") is None


def test_requirements_name_cuda13_and_extras_gated_ones_do_not_count():
    assert G.cuda_major_from_requirements(VLLM_0_31_REQUIRES) == {13}
    assert G.cuda_major_from_requirements(['nvidia-nccl-cu12==2.27; platform_system == "Linux"']) == {12}
    assert G.cuda_major_from_requirements(['a-cu12; extra == "x"', "numpy"]) == set()


def test_library_names_in_compiled_files():
    blobs = {"vllm/cumem_allocator.abi3.so": b"\x00libcuda.so.1\x00libnvrtc.so.13\x00libc10.so\x00",
             "vllm/_flashmla_C.abi3.so": b"\x00libcudart.so.13\x00libtorch.so\x00"}
    majors, seen = G.cuda_major_from_libraries(blobs)
    assert majors == {13} and len(seen) == 2
    mixed, _ = G.cuda_major_from_libraries({"a.so": b"libcudart.so.12\x00", "b.so": b"libnvrtc.so.13\x00"})
    assert mixed == {12, 13}
    assert G.cuda_major_from_libraries({"c.so": b"libcuda.so.1\x00"})[0] == set()  # the driver API is not a CUDA major


def test_vllm_cpu_build_has_no_cuda_major_and_a_missing_vllm_is_none():
    assert G.vllm_cuda_facts("a-distribution-that-is-not-installed") is None
    facts = G.vllm_cuda_facts("vllm-cpu")  # the CPU stack's build
    if facts is None:
        pytest.skip("vllm-cpu is not installed (the GPU stack)")
    assert facts["major"] is None


# Unsloth's mapper for the course's model, as unsloth 2026.10.9's mapper.py builds it (lower-case keys).
MAPPER = '''
INT_TO_FLOAT_MAPPER = {"unsloth/qwen3-4b-instruct-2507-unsloth-bnb-4bit": "unsloth/Qwen3-4B-Instruct-2507"}
FLOAT_TO_INT_MAPPER = {
    "unsloth/qwen3-4b-instruct-2507": "unsloth/Qwen3-4B-Instruct-2507-unsloth-bnb-4bit",
    "qwen/qwen3-4b-instruct-2507": "unsloth/Qwen3-4B-Instruct-2507-unsloth-bnb-4bit",
    "unsloth/qwen3-32b": "unsloth/Qwen3-32B-unsloth-bnb-4bit",
}
MAP_TO_UNSLOTH_16bit = {"qwen/qwen3-4b-instruct-2507": "unsloth/Qwen3-4B-Instruct-2507"}
'''
LOADER_UTILS = '''
import torch  # never executed: the doctor reads this file as text
BAD_MAPPINGS = {
    "unsloth/Qwen3-32B-unsloth-bnb-4bit".lower(): "unsloth/Qwen3-32B-bnb-4bit",
}
'''


@pytest.fixture
def fake_unsloth(tmp_path, monkeypatch):
    package = tmp_path / "unsloth"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('the doctor must not import unsloth')\n")
    (package / "models" / "mapper.py").write_text(MAPPER)
    (package / "models" / "loader_utils.py").write_text(LOADER_UTILS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return package


def test_unsloths_own_mapping_is_read_without_importing_unsloth(fake_unsloth):
    names = ["unsloth/Qwen3-4B-Instruct-2507", "Qwen/Qwen3-4B-Instruct-2507", "unsloth/Qwen3-32B", "org/other"]
    repos = G.unsloth_repo_map(names)
    assert "instalado" in repos["_source"] and "mapper.py" in repos["_source"]
    assert repos["unsloth/Qwen3-4B-Instruct-2507"] == {"4bit": "unsloth/Qwen3-4B-Instruct-2507-unsloth-bnb-4bit",
                                                       "16bit": "unsloth/Qwen3-4B-Instruct-2507"}
    assert repos["Qwen/Qwen3-4B-Instruct-2507"]["16bit"] == "unsloth/Qwen3-4B-Instruct-2507"
    assert repos["unsloth/Qwen3-32B"]["4bit"] == "unsloth/Qwen3-32B-bnb-4bit"  # BAD_MAPPINGS overrides
    assert repos["org/other"] == {"4bit": "org/other", "16bit": "org/other"}
    # the recorded fallback agrees with the mapper for the course's model
    assert repos["unsloth/Qwen3-4B-Instruct-2507"] == G.RECORDED_UNSLOTH_REPOS["unsloth/Qwen3-4B-Instruct-2507"]


def test_explicit_4bit_names_are_kept():
    mappers = {"INT_TO_FLOAT_MAPPER": {}, "MAP_TO_UNSLOTH_16bit": {},
               "FLOAT_TO_INT_MAPPER": {"x/m-bnb-4bit": "x/m-unsloth-bnb-4bit"}}
    assert G.map_model_name("x/m-bnb-4bit", True, mappers) == "x/m-bnb-4bit"


def test_without_unsloth_the_recorded_map_is_used_and_says_so():
    import importlib.util

    if importlib.util.find_spec("unsloth") is not None:
        pytest.skip("Unsloth is installed here: the probe reads its own mapping")
    repos = G.unsloth_repo_map(["unsloth/Qwen3-4B-Instruct-2507"])
    assert "no está instalado" in repos["_source"] and G.UNSLOTH_RECORDED_RELEASE in repos["_source"]
    assert G.unsloth_repo("unsloth/Qwen3-4B-Instruct-2507", True, repos).endswith("-unsloth-bnb-4bit")
    assert G.unsloth_repo("unsloth/Qwen3-4B-Instruct-2507", False, None) == "unsloth/Qwen3-4B-Instruct-2507"
