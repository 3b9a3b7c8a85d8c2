"""L7.2 on a laptop: the notebook's long-run cell with ``ENTRENAR_EN_CPU = True`` starts ``python -m labs l72`` on the
ci profile in a child process, which trains L7.2's CPU path (``labs.l72.FallbackLab``: transformers + PEFT's LoRA,
TRL's colocated vLLM engine) from start to finish. The rehearsal trains the same steps one by one; this is the
command a student without a card runs, with its start lines, its finish and its record."""

from __future__ import annotations

import pytest

from labs.core import childlog
from labs.core import runfolder as rf
from labs.core.profiles import get_profile
from labs.core.resources import read_resources

pytestmark = [pytest.mark.trains, pytest.mark.cpu_stack]


def test_the_notebooks_cell_trains_l72_on_ci_and_then_only_reads_it(tmp_path, monkeypatch):
    from labs.l72 import demo
    from labs.l72.backend import choose_backend

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    profile = get_profile("ci")
    said: list[str] = []
    run = demo.full_run(profile, show=said.append, entrenar=True)
    assert run is not None and rf.RunFolder(run).is_finished()
    record = rf.read_json(run / rf.RUN_JSON)
    backend = choose_backend(profile)
    assert record["lab"] == "L7.2" and record["backend_used"] == backend.name
    assert record["vllm_memory_fraction"]["rule"] == "trl-colocate" and record["l72_recipe"]["changes"]
    assert read_resources(run)["backend_used"] == backend.name  # FallbackLab.resource_fields, written at the finish
    assert rf.read_json(run / "eval/summary.json")["engine_lora_check"]["engine_has_adapter"] is True
    log = childlog.log_path("l72-ci").read_text(encoding="utf-8")
    assert f"[backend] {backend.name}: {backend.reason_es}" in log  # said before training starts
    assert "[backend] Recuerda: este run NO usó la ruta GPU de Unsloth." in log  # and again at the end
    assert said[-1].startswith("[l72] L7.2 terminó en") and str(run) in said[-1]
    said.clear()
    assert demo.full_run(profile, show=said.append, entrenar=True) == run  # finished: read, never trained again
    assert said == [f"Leo el run terminado de L7.2: {run}"]
