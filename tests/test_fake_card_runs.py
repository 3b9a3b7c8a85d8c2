"""The course's GPU commands, typed as a student types them, run on a faked RTX 5090 (tests/fake_card.py).

Each command runs in its own process with the card installed at start-up (tests/fake_card_site/sitecustomize.py
says why a start-up hook), and so do the children it starts: ``python -m labs rehearse`` (its L7.1 part and its
Unsloth part), ``python -m labs l72``, ``python -m labs next`` and the L7.2 notebook's demo cells. The hub cache
holds the bundled 135M model under the GPU profiles' model ids (``fake_card.tiny_hub``), the other thing this
machine lacks. Every course line before the card's own work runs; each run stops where the next layer needs a
real CUDA device, and the test pins that boundary: TRL's trainer moving the model's weights to ``cuda:0`` (L7.1),
or Unsloth's model, which only a card makes, reaching TRL's trainer (L7.2). What lies past it is listed in
docs/testing.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import fake_card

pytestmark = pytest.mark.skipif(fake_card.unsloth_source("models/loader.py") is None,
                                reason="Unsloth is not installed (the CPU stack): make test-gpu-stack runs these")

REPO = Path(__file__).resolve().parent.parent
SOURCE_L72 = REPO / "sources" / "L7_2_unsloth_standby.ipynb"


def run_on_card(tmp_path: Path, *args: str, profile: str = "rtx5090", code: str | None = None):
    """``python -m labs <args>`` (or ``python -c code``) in a process on the card; (return code, output)."""
    env = fake_card.process_env(tmp_path)
    env["COURSE_PROFILE"] = profile
    cmd = [sys.executable, "-c", code] if code is not None else [sys.executable, "-m", "labs", *args]
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    return done.returncode, done.stdout + done.stderr


def test_the_rehearsals_unsloth_part_loads_through_unsloth_and_stops_at_the_trainer(tmp_path):
    """``rehearse --part l72`` (the child the rehearsal starts for L7.2): the lab's start with every check (the
    doctor passes the card), Standby's variable and the import order, Unsloth's load with vLLM inside, the fraction
    read back from its engine, the LoRA, the data with Unsloth's tokenizer and run.json; then TRL's trainer, which
    needs Unsloth's real model on the card. The failure is classified in Spanish and the part exits 1."""
    root = tmp_path / "rehearsal"
    code, out = run_on_card(tmp_path, "rehearse", "--part", "l72", "--profile", "rtx5090", "--root", str(root))
    assert code == 1, out
    part = json.loads((root / "part-l72.json").read_text(encoding="utf-8"))
    # the boundary: the first real CUDA call (a driver this machine lacks), classified as the driver's problem
    assert part["ok"] is False and part["lab"] == "L7.2" and "CUDA" in part["failure"]["error"], part
    assert "Leído del motor vLLM en marcha" in out, out  # the engine's fraction, after Unsloth's load
    run = json.loads((root / "l72" / "run.json").read_text(encoding="utf-8"))
    assert run["lab"] == "L7.2" and run["backend_used"] == "unsloth+vllm-standby", run
    assert run["vllm_memory_fraction"]["rule"] == "standby", run["vllm_memory_fraction"]


def test_the_rehearsal_on_the_card_runs_its_l71_part_to_the_cuda_boundary_and_fails_loudly(tmp_path):
    """``python -m labs rehearse`` as make runs it: the card and driver read, the L7.1 child's lab loads its model
    and data and builds TRL's trainer, which moves the weights to the card: there a real CUDA device is needed.
    The rehearsal writes its record and page with that failure, prints its recommendation, and exits 1."""
    root = tmp_path / "rehearsal"
    code, out = run_on_card(tmp_path, "rehearse", "--profile", "rtx5090", "--root", str(root))
    assert code == 1, out
    record = json.loads((root / "rehearsal.json").read_text(encoding="utf-8"))
    assert record["status"] == "failed" and record["device"]["name"] == fake_card.CARD_NAME, record["device"]
    assert record["parts"]["l71"]["ok"] is False and "l72" not in record["parts"], record["parts"]
    assert "[ensayo] FALLÓ" in out and (root / "informe.md").exists(), out
    assert "cuda" in json.dumps(record["failure"]).lower(), record["failure"]  # the boundary: weights to the card


def test_python_m_labs_l72_on_the_card_stops_at_the_trainer_with_a_spanish_message(tmp_path):
    code, out = run_on_card(tmp_path, "l72", "--profile", "rtx5090")
    assert code != 0, out
    assert "[vram] Plan de memoria de las dos rutas" in out and "Leído del motor vLLM en marcha" in out, out
    run = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text(encoding="utf-8"))
    assert run["lab"] == "L7.2" and run["backend_used"] == "unsloth+vllm-standby", run


DEMO = """
import json, os
from labs.l72 import demo
cells = [''.join(c['source']) for c in json.load(open({source!r}))['cells'] if c['cell_type'] == 'code']
# the student's four answers, as the source notebook's solutions write them
for name in ('standby_posible', 'importar_unsloth', 'cargar_modelo', 'anadir_lora'):
    cell = next(c for c in cells if c.lstrip().startswith('def ' + name + '('))
    exec(cell, globals())
mi_demo = demo.Demo('rtx5090')
FastLanguageModel = mi_demo.fast_language_model(importar_unsloth, standby_posible)
model, tokenizer = mi_demo.load(cargar_modelo, FastLanguageModel)
model = mi_demo.add_lora(anadir_lora, FastLanguageModel, model)
print('DEMO-CELLS-DONE', flush=True)
mi_demo.train_and_evaluate(model, tokenizer)
"""


def test_l72s_demo_cells_run_on_the_card_up_to_the_trainer(tmp_path):
    """The notebook's demo with the solutions' answers: the guard's verdict on this process, Unsloth imported under
    Standby, the load under the Standby guard, the LoRA; then the demo's run.json and trainer."""
    code, out = run_on_card(tmp_path, code=DEMO.format(source=str(SOURCE_L72)))
    assert code != 0 and "DEMO-CELLS-DONE" in out, out
    assert "importado con UNSLOTH_VLLM_STANDBY=1" in out and "Leído del motor vLLM en marcha" in out, out
    run = json.loads((tmp_path / "runs" / "l72-demo-rtx5090" / "run.json").read_text(encoding="utf-8"))
    assert run["lab"] == "L7.2-demo" and run["vllm_memory_fraction"]["rule"] == "standby", run


def test_make_on_the_card_runs_the_rehearsal_and_stops_when_it_fails(tmp_path):
    """``python -m labs next`` (make, on a GPU machine) with nothing saved: the rehearsal; it fails at the card's
    boundary, so the route exits non-zero and says, in Spanish, which step failed."""
    code, out = run_on_card(tmp_path, "next", profile="rtx5090")
    assert code == 1, out
    assert "[ruta] siguiente paso: python -m labs rehearse" in out and "[ruta] El paso python -m labs rehearse " \
        "falló" in out, out
