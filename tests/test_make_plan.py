"""Issue 40, item 2: `make` and `make test` pick the machine's stack, each in its own environment.

Each test copies the Makefile and the files its install rule depends on into an empty folder (no venv there, so
every plan starts from the install) and asks make for its plan only (`make -n`: recipes are printed, not run;
the `$(shell nvidia-smi -L)` that picks the stack does run, against the stand-in on PATH). A stand-in
`nvidia-smi` prints what the real one prints on an RTX 5090; another exits 9 as the real one does where the
driver is not loaded; with neither, there is no `nvidia-smi` at all.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("Makefile", "requirements.txt", "requirements-gpu.txt", "pyproject.toml", "tools/uv_sources.py")
RTX_5090 = "GPU 0: NVIDIA GeForce RTX 5090 (UUID: GPU-5f3a9c1e-7b2d-4e61-9a0c-3d8e2f14b6a7)"
NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.")

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def _stand_in(folder: Path, script: str) -> Path:
    folder.mkdir()
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + script + "\n")
    exe.chmod(0o755)
    return folder


def _plan(tmp_path: Path, *args: str, nvidia_smi: str | None) -> str:
    """`make -n <args>` in a copy of the repository's build files; ``nvidia_smi``: the stand-in's body, or None."""
    repo = tmp_path / "repo"
    for name in COPIED:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    # PATH holds grep (the stack's choice pipes nvidia-smi into it) and the stand-in, nothing else: a machine with a
    # real nvidia-smi (a GPU runner) lends none. make is called by its full path, so `$(MAKE)` finds itself.
    tools = _stand_in(tmp_path / "bin", nvidia_smi) if nvidia_smi is not None else tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    (tools / "grep").symlink_to(shutil.which("grep"))
    env = {k: v for k, v in os.environ.items() if k not in ("STACK", "VENV", "GPU_VENV", "MAKEFLAGS", "MAKELEVEL")}
    env["PATH"] = str(tools)
    done = subprocess.run([shutil.which("make"), "-n", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert not (repo / ".venv").exists() and not (repo / ".venv-gpu").exists()  # a plan, nothing installed
    return done.stdout


def _gpu_checks(plan: str) -> None:
    assert "-m venv .venv-gpu" in plan and "uv pip install --python .venv-gpu/bin/python -r requirements-gpu.txt" in plan
    assert "touch .venv-gpu/.installed-gpu" in plan
    assert "requirements.txt" not in plan.replace("requirements-gpu.txt", "")  # the CPU stack is not planned
    lines = plan.splitlines()
    assert not [line for line in lines if ".venv/" in line or line.rstrip().endswith(" .venv")], plan


def _cpu_checks(plan: str) -> None:
    assert "-m venv .venv" in plan and "-r .venv/requirements-uv.txt" in plan and "touch .venv/.installed-cpu" in plan
    assert "requirements-gpu.txt" not in plan and ".venv-gpu" not in plan


def test_a_5090_plans_the_gpu_stack_in_its_own_venv_then_the_routes_next_step(tmp_path):
    plan = _plan(tmp_path, nvidia_smi=f"echo '{RTX_5090}'")
    _gpu_checks(plan)
    assert plan.strip().splitlines()[-1].endswith(".venv-gpu/bin/python -m labs next")


def test_make_test_on_a_5090_tests_the_gpu_stack(tmp_path):
    plan = _plan(tmp_path, "test", nvidia_smi=f"echo '{RTX_5090}'")
    _gpu_checks(plan)
    assert ".venv-gpu/bin/python -m pytest" in plan and ".venv-gpu/bin/python -m labs rehearse" in plan


@pytest.mark.parametrize("nvidia_smi", [f"echo '{NO_DRIVER}' >&2; exit 9", None], ids=["driver-not-loaded", "absent"])
def test_without_a_gpu_make_plans_the_cpu_stack_and_l71_on_cpu(tmp_path, nvidia_smi):
    plan = _plan(tmp_path, nvidia_smi=nvidia_smi)
    _cpu_checks(plan)
    assert plan.strip().splitlines()[-1].endswith(".venv/bin/python -m labs l71 --profile cpu")
    test_plan = _plan(tmp_path / "test", "test", nvidia_smi=nvidia_smi)
    _cpu_checks(test_plan)
    assert ".venv/bin/python -m pytest" in test_plan and "--nbval-lax" in test_plan


def test_an_explicit_stack_overrides_the_machine(tmp_path):
    _cpu_checks(_plan(tmp_path / "cpu", "STACK=cpu", nvidia_smi=f"echo '{RTX_5090}'"))
    _gpu_checks(_plan(tmp_path / "gpu", "STACK=gpu", nvidia_smi=None))


def test_ci_gpu_leg_installs_into_the_gpu_venv_on_a_machine_without_a_gpu(tmp_path):
    """`.ci/run`'s second command: the sub-make (run even under -n) plans the GPU stack into .venv-gpu."""
    plan = _plan(tmp_path, "test-gpu-stack", nvidia_smi=None)
    _gpu_checks(plan)
    assert ".venv-gpu/bin/python -m pytest" in plan


def _marker_expression(plan: str) -> str:
    """The `-m "..."` of the plan's pytest command."""
    line = next(line for line in plan.replace("\\\n", " ").splitlines() if " -m pytest " in line)
    return re.search(r'\s-m "([^"]*)"', line).group(1)


def test_the_gpu_stacks_own_resolution_runs_in_its_leg_and_only_there(tmp_path):
    """requirements-gpu.txt's dry resolution (network, minutes) is the GPU leg's, not `make test`'s."""
    from _pytest.mark.expression import Expression

    import test_gpu_resolution as resolution

    expressions = {target: Expression.compile(_marker_expression(_plan(tmp_path / target, target, nvidia_smi=None)))
                   for target in ("test", "test-gpu-stack")}
    for test in (resolution.test_torch_and_vllm_resolve_to_one_cuda_major,
                 resolution.test_unsloth_4bit_fast_inference_packages_resolve):
        marks = {mark.name for mark in test.pytestmark}
        selected = {target: e.evaluate(lambda name: name in marks) for target, e in expressions.items()}
        assert selected == {"test": False, "test-gpu-stack": True}, test.__name__
