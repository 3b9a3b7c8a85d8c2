"""run.json is written once; a resume that would train with another recipe is refused before any model
loads (issue 24, item 2), or, with --accept-changes, recorded beside the original and shown by the grader.

The unfinished run is what a real one leaves after step 2: run.json from ``write_run_json`` (the lab's
own writer), status.json "failed" at step 2 and a checkpoint-2 whose files are whole (small real
safetensors and ``torch.save`` files). No model is needed: the refusal must come before one loads.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from labs.core import runfolder as rf
from labs.core.profiles import get_profile
from labs.l71.lab import Lab, write_run_json
from labs.training import checkpoints, runrecord
from rewards import reward_functions

STUDENT = Path(__file__).resolve().parent / "data" / "recompensa_alumno.py"
FUNCTION = "razonamiento_con_cuentas"
NAME = "reanudado"


def whole_checkpoint(folder: Path, step: int) -> Path:
    folder.mkdir(parents=True)
    save_file({"w": torch.zeros(4, 4)}, str(folder / "model.safetensors"))
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        torch.save({"state": step}, folder / name)
    return folder


@pytest.fixture
def unfinished(tmp_path, monkeypatch):
    """An L7.1 run on ci with a student's function from its own file, stopped after step 2."""
    runs = tmp_path / "runs"
    monkeypatch.setenv("COURSE_RUNS", str(runs))
    reward_file = tmp_path / "mia.py"
    shutil.copy(STUDENT, reward_file)
    names = ["correctness_reward", f"{reward_file}:{FUNCTION}"]
    run = rf.RunFolder(runs / NAME)
    write_run_json(run, get_profile("ci"), "L7.1", reward_functions(names), "bundled-primed", {"base_label": "x"})
    run.write_status(rf.STATE_FAILED, 2, 2, kind="interrupted", message_es="...")
    whole_checkpoint(run.checkpoints / "checkpoint-2", 2)
    assert checkpoints.problem(run.checkpoints / "checkpoint-2") is None
    return {"run": run, "names": names, "file": reward_file, "run_json": run.path(rf.RUN_JSON).read_bytes()}


@pytest.mark.cpu_stack  # a ci-profile Lab: the doctor refuses it beside vLLM's CUDA build
def test_the_same_recipe_resumes(unfinished):
    lab = Lab("ci", run_name=NAME, reward_names=unfinished["names"])
    assert lab.resumed and unfinished["run"].path(rf.RUN_JSON).read_bytes() == unfinished["run_json"]


@pytest.mark.cpu_stack  # a ci-profile Lab: the doctor refuses it beside vLLM's CUDA build
def test_a_changed_learning_rate_is_refused_listing_it_and_the_ways_out(unfinished):
    with pytest.raises(runrecord.RecipeChanged) as err:
        Lab("ci", run_name=NAME, reward_names=unfinished["names"], learning_rate=2e-5)
    text = str(err.value)
    assert "learning_rate: en run.json 1e-05, ahora 2e-05" in text
    assert "learning_rate (GRPOConfig)" not in text  # one knob, one line
    assert "checkpoint-2" in text and "--fresh" in text and "--accept-changes" in text
    assert unfinished["run"].path(rf.RUN_JSON).read_bytes() == unfinished["run_json"]


@pytest.mark.cpu_stack  # a ci-profile Lab: the doctor refuses it beside vLLM's CUDA build
def test_an_edited_reward_function_is_refused(unfinished):
    path = unfinished["file"]
    path.write_text(path.read_text().replace("return", "return  ", 1))
    with pytest.raises(runrecord.RecipeChanged) as err:
        Lab("ci", run_name=NAME, reward_names=unfinished["names"])
    assert f"función de recompensa {FUNCTION}: su código cambió" in str(err.value)
    assert unfinished["run"].path(rf.RUN_JSON).read_bytes() == unfinished["run_json"]


@pytest.mark.cpu_stack  # a ci-profile Lab: the doctor refuses it beside vLLM's CUDA build
def test_a_dropped_reward_function_is_refused(unfinished):
    with pytest.raises(runrecord.RecipeChanged, match=f"{FUNCTION}: estaba en run.json y ahora no se usa"):
        Lab("ci", run_name=NAME, reward_names=unfinished["names"][:1])


@pytest.mark.cpu_stack  # a ci-profile Lab: the doctor refuses it beside vLLM's CUDA build
def test_keeping_and_watching_knobs_are_not_the_recipe(unfinished):
    Lab("ci", run_name=NAME, reward_names=unfinished["names"], reward_timeout_s=30.0, keep_checkpoints=True)


@pytest.mark.cpu_stack  # a ci-profile Lab: the doctor refuses it beside vLLM's CUDA build
def test_accepting_a_change_keeps_the_original_and_records_it_from_its_step(unfinished):
    run = unfinished["run"]
    Lab("ci", run_name=NAME, reward_names=unfinished["names"], learning_rate=2e-5, accept_changes=True)
    record = rf.read_json(run.path(rf.RUN_JSON))
    original = json.loads(unfinished["run_json"])
    assert record["profile"] == original["profile"] and record["grpo_config"] == original["grpo_config"]
    (change,) = record["changes"]
    assert change["step"] == 2 and change["profile"]["learning_rate"] == {"antes": 1e-05, "ahora": 2e-05}
    assert change["grpo_config"]["learning_rate"] == {"antes": 1e-05, "ahora": 2e-05}
    # the accepted recipe is now the one in force: resuming with it passes, going back is a change again
    Lab("ci", run_name=NAME, reward_names=unfinished["names"], learning_rate=2e-5)
    with pytest.raises(runrecord.RecipeChanged, match="en run.json 2e-05, ahora 1e-05"):
        Lab("ci", run_name=NAME, reward_names=unfinished["names"])


@pytest.mark.cpu_stack  # a ci-profile Lab: the doctor refuses it beside vLLM's CUDA build
def test_the_grading_report_shows_the_accepted_change(unfinished, tmp_path):
    from labs.grading import grade as grading
    from labs.grading.report import write_report

    run = unfinished["run"]
    path = unfinished["file"]
    path.write_text(path.read_text().replace("return", "return  ", 1))
    Lab("ci", run_name=NAME, reward_names=unfinished["names"], accept_changes=True)
    report = write_report(grading.grade_run(run.root), tmp_path / "informe").read_text(encoding="utf-8")
    assert "## Cambios de receta durante la ejecución" in report
    assert "Desde el paso 2" in report and f"{FUNCTION}: su código cambió" in report


SCRIPT = textwrap.dedent(
    """
    import json, sys
    from labs.l71 import cli
    code = cli.main(sys.argv[1:])
    # vLLM, or the module of the ci model's class (SmolLM2 is a LlamaForCausalLM): imported only to load it
    loaded = sorted(m for m in sys.modules if m.startswith("vllm") or m == "transformers.models.llama.modeling_llama")
    print(json.dumps({"code": code, "loaded": loaded}))
    """
)


@pytest.mark.cpu_stack  # a ci-profile Lab: the doctor refuses it beside vLLM's CUDA build
def test_the_command_line_refuses_before_any_model_loads(unfinished):
    env = dict(os.environ)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, "--profile", "ci", "--run-name", NAME, "--rewards", ",".join(unfinished["names"]),
         "--set", "learning_rate=2e-5"], capture_output=True, text=True, env=env, timeout=300)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == {"code": 2, "loaded": []}, result.stderr[-3000:]
    assert "learning_rate: en run.json 1e-05, ahora 2e-05" in result.stderr
    assert unfinished["run"].path(rf.RUN_JSON).read_bytes() == unfinished["run_json"]


def test_another_base_model_is_refused_and_a_moved_cache_is_not(unfinished):
    run = unfinished["run"]
    assert runrecord.check_base_model(run, "/otra/cache/primed/bundled-primed") is False
    with pytest.raises(runrecord.RecipeChanged, match="modelo de partida: en run.json 'bundled-primed'"):
        runrecord.check_base_model(run, "/cache/primed/otra-clave")
    assert run.path(rf.RUN_JSON).read_bytes() == unfinished["run_json"]
    assert runrecord.check_base_model(run, "/cache/primed/otra-clave", accept=True) is True
    assert rf.read_json(run.path(rf.RUN_JSON))["changes"][0]["base_model"]["ahora"] == "/cache/primed/otra-clave"
    assert runrecord.check_base_model(run, "/cache/primed/otra-clave") is False  # the accepted one is in force
