"""What L7.2's cells print on a CPU profile (issue 40, quiet notebooks): no GPU plan, rounded numbers, and the
L7.1 child's output in a log file with a short summary in the cell."""

from __future__ import annotations

import sys
import textwrap

import pytest

import rundirs
from labs import l72 as u
from labs.l72 import compare as _compare, demo as _demo  # noqa: F401 - u.compare, u.demo
from labs.core import childlog
from labs.core.profiles import get_profile


def test_a_cpu_profile_prints_one_line_instead_of_the_gpu_memory_plans(capsys):
    assert u.print_vram_plans(get_profile("ci")) == []
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [u.steps.CPU_PLAN_NOTE_ES] and "python -m labs vram --profile rtx5090" in out[0]
    plans = u.print_vram_plans(get_profile("rtx5090"), 32)  # a GPU profile still gets both plans
    out = capsys.readouterr().out
    assert len(plans) == 2 and out.count("Plan de VRAM") == 2


def test_the_comparison_table_rounds_its_numbers_for_reading(tmp_path):
    run = rundirs.make_run(tmp_path, "l72-ci", metrics=rundirs.history(6), lab="L7.2", profile="ci")
    record = dict(u.lab_record(run), seconds_per_step=31.998386, memory_gib=3.2512345, reward_final=1.23456789,
                  base_accuracy=0.1234567, vllm_fraction=0.35)
    shown = u.comparison_table([record, record]).to_string()
    assert "31.998386" not in shown and "32.0" in shown
    assert "3.2512345" not in shown and "3.25" in shown and "1.23456789" not in shown and "0.123" in shown


def _child(tmp_path, body: str) -> list[str]:
    """A stand-in for `python -m labs l71`: library noise on both streams, then ``body``."""
    code = textwrap.dedent(f"""
        import json, sys
        print("[INFO] Running in WANDB offline mode")  # transformers' line at its wandb integration's import
        for i in range(40):
            print(f"Loading weights {{i}}/40", file=sys.stderr)
            print(f"[paso {{i}}/40] recompensa 0.5")
        {body}
    """)
    return [sys.executable, "-c", code]


@pytest.mark.parametrize("lab", ["l71", "l72"])
def test_a_lab_child_writes_its_output_to_a_log_and_the_cell_gets_a_short_summary(tmp_path, monkeypatch, lab):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    label = u.child_runs.LAB_LABELS[lab]
    run = rundirs.make_run(tmp_path, f"{lab}-ci", metrics=rundirs.history(6), lab=label, profile="ci",
                           verdicts=rundirs.paired_verdicts(2, 4, 1, 1))
    said: list[str] = []
    got = u.child_runs.run_lab_in_subprocess(lab, "ci", said.append,
                                          command=_child(tmp_path, f"print(json.dumps({{'run_dir': {str(run)!r}}}))"))
    assert got == run
    log = childlog.log_path(f"{lab}-ci")
    text = log.read_text()
    assert text.count("Loading weights") == 40 and text.count("[paso") == 40  # everything the child said, in the log
    assert "WANDB offline" not in text  # but transformers' English info line (issue 52)
    assert len(said) == 2 and str(log) in said[0]  # the cell: what runs and where its log is ...
    assert said[1].startswith(f"[{lab}] {label} terminó en") and "6 pasos" in said[1] and str(run) in said[1]  # the result
    assert not any("Loading weights" in line or "[paso" in line for line in said), said


def test_a_failed_l71_child_raises_with_the_logs_last_lines_and_its_path(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    said: list[str] = []
    with pytest.raises(RuntimeError) as error:
        u.run_l71_in_subprocess("ci", said.append, command=_child(tmp_path, "print('ERROR: sin memoria'); sys.exit(3)"))
    message = str(error.value)
    log = childlog.log_path("l71-ci")
    assert "código 3" in message and "ERROR: sin memoria" in message and f"Registro completo: {log}" in message
    assert len(message.splitlines()) <= childlog.TAIL_LINES + 2  # the last lines, not the whole output
    assert len(said) == 1  # only the start line reached the cell before the failure


def test_a_finished_l72_run_on_a_cpu_profile_is_read_without_a_child(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    run = rundirs.make_run(tmp_path, "l72-ci", metrics=rundirs.history(2), lab="L7.2", profile="ci")
    said: list[str] = []
    assert u.demo.full_run(get_profile("ci"), show=said.append) == run
    assert said == [f"Leo el run terminado de L7.2: {run}"] and not (tmp_path / childlog.LOG_DIR).exists()
