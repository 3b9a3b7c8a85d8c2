"""Lesson 7.8's trap (labs.l71.trap): GRPO at the SFT learning rate 2e-4 beside the course's rate.

The ``trains`` tests run the comparison the L7.1 notebook's section 12 shows, on the ci profile, once for the
module, and assert what that section claims: the same first batch in both runs (the negative control: before
any update the learning rate changes nothing), then a KL with the reference at least ten times the course
rate's at every later step (measured on a CPU with bf16 units under ci's autocast, in float32 and with one thread:
from 37 to about 200 times; trap.KL_FACTOR says where). What only this module checks: that claim, that the two
runs differ in nothing but the learning rate, that they leave no checkpoint and are read back (not trained)
the second time, and that they never become the run the C2b grader takes for the main one.

The other tests read synthetic run folders: the GPU path (a terminal command while its run is missing, then
the main run's first steps beside the trap run) and the printed command, which ``python -m labs l71`` parses.
"""

import shlex
import time

import pytest

from labs.core import runfolder as rf
from labs.core.paths import runs_dir
from labs.core.profiles import get_profile
from labs.l71 import trap

KL_FACTOR = trap.KL_FACTOR  # what the notebook's section 12 claims, at the least


@pytest.fixture(scope="module")
def comparison():
    started = time.perf_counter()
    result = trap.compare(get_profile("ci"), entrenar_aqui=True)
    return result, time.perf_counter() - started


@pytest.mark.trains
def test_first_step_is_the_same_batch_in_both_runs(comparison):
    c, _ = comparison
    assert c.steps == trap.CPU_STEPS and len(c.course.rows) == len(c.trap.rows) == trap.CPU_STEPS
    first_course, first_trap = c.course.rows[0], c.trap.rows[0]
    for key in ("reward", "grad_norm", "completions/mean_length"):
        assert first_course[key] == pytest.approx(first_trap[key], rel=1e-6), key
    assert first_course["kl"] == first_trap["kl"] == 0.0


@pytest.mark.trains
def test_kl_at_the_sft_rate_is_ten_times_the_course_rate_at_every_later_step(comparison):
    c, seconds = comparison
    print(f"trap comparison: {seconds:.1f} s; KL course {c.course.series('kl')}, 2e-4 {c.trap.series('kl')}")
    for step, (low, high) in enumerate(zip(c.course.series("kl")[1:], c.trap.series("kl")[1:]), start=2):
        assert high >= KL_FACTOR * low > 0, f"paso {step}: KL {high} a 2e-4 frente a {low}"
    assert c.kl_ratio() >= KL_FACTOR
    assert any("se aleja de la referencia" in line for line in c.verdict_es())


@pytest.mark.trains
def test_the_runs_differ_only_in_the_learning_rate(comparison):
    c, _ = comparison
    configs = [rf.read_json(side.root / rf.RUN_JSON) for side in (c.course, c.trap)]
    assert [cfg["grpo_config"]["learning_rate"] for cfg in configs] == [get_profile("ci").learning_rate, 2e-4]
    assert all(cfg["lab"] == trap.TRAP_LAB and cfg["profile"]["use_vllm"] is False for cfg in configs)
    differ = {k for k in configs[0]["grpo_config"] if configs[0]["grpo_config"][k] != configs[1]["grpo_config"].get(k)}
    assert differ == {"learning_rate", "output_dir"}
    assert configs[0]["base_model"] == configs[1]["base_model"]


@pytest.mark.trains
def test_no_checkpoint_is_left_and_a_second_call_reads(comparison):
    c, _ = comparison
    for side in (c.course, c.trap):
        assert rf.RunFolder(side.root).checkpoint_folders() == []
        assert rf.RunFolder(side.root).is_finished()
        assert len(side.last_completions) == get_profile("ci").generation_batch_size
    started = time.perf_counter()
    again = trap.compare(get_profile("ci"))
    assert time.perf_counter() - started < 30  # read, not trained
    assert again.trap.rows == c.trap.rows and again.course.rows == c.course.rows


@pytest.mark.trains
def test_the_trap_runs_are_never_the_graded_main_run(comparison):
    from labs.grading import selfcheck

    c, _ = comparison
    assert c.trap.root.parent.name.startswith("_")
    chosen, _why = selfcheck.choose_run(runs_dir())
    assert chosen is None or trap.TRAP_DIR not in chosen.parts


# --- no training below: synthetic run folders ---


def _rows(steps: int, kl: float) -> list[dict]:
    return [{"step": i + 1, "kl": 0.0 if i == 0 else kl * i, "reward": 0.2, "grad_norm": 1.0,
             "completions/mean_length": 100.0, "completions/clipped_ratio": 0.0} for i in range(steps)]


def _write_run(root, rows, lr, finished=True, beta=0.04):
    run = rf.RunFolder(root)
    run.root.mkdir(parents=True, exist_ok=True)
    for row in rows:
        rf.append_jsonl(run.metrics_path, row)
    rf.write_json(run.path(rf.RUN_JSON), {"grpo_config": {"learning_rate": lr, "max_steps": len(rows), "beta": beta},
                                          "reward_functions": ["correctness_reward"]})
    if finished:
        run.write_status(rf.STATE_FINISHED, len(rows), len(rows))


def test_gpu_profile_gives_the_command_until_its_runs_exist_then_reads_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    profile = get_profile("rtx5090")
    assert trap.compare(profile) is None
    assert trap.terminal_command(profile) in capsys.readouterr().out
    _write_run(tmp_path / "l71-rtx5090", _rows(40, 0.001), profile.learning_rate, finished=False, beta=0.1)
    _write_run(tmp_path / trap.trap_run_name(profile, trap.TRAP_LEARNING_RATE), _rows(trap.GPU_STEPS, 0.5), 2e-4)
    c = trap.compare(profile)
    assert "difieren en: beta" in capsys.readouterr().out  # the main run's own settings are said, not hidden
    assert len(c.course.rows) == len(c.trap.rows) == trap.GPU_STEPS  # the main run's first steps only
    assert c.course.learning_rate == profile.learning_rate and c.trap.learning_rate == 2e-4
    assert c.kl_ratio() == pytest.approx(500)
    assert "paso 1" not in " ".join(c.verdict_es())  # no same-batch claim: the main run was not trained beside it
    assert f"| KL con la referencia | {trap.lr_tag(profile.learning_rate)} |" in c.table_es()


def test_the_printed_command_is_one_the_l71_command_line_accepts(monkeypatch):
    from labs.l71 import cli

    seen = {}
    monkeypatch.setattr(cli, "_run", lambda args: seen.update(vars(args)) or 0)
    words = shlex.split(trap.terminal_command(get_profile("rtx5090")))
    assert words[:4] == ["python", "-m", "labs", "l71"]
    assert cli.main(words[4:]) == 0
    assert seen["lab"] == trap.TRAP_LAB and seen["run_name"] == trap.trap_run_name(get_profile("rtx5090"), 2e-4)
    overrides = cli.overrides_from_cli(seen["set"], get_profile("rtx5090"))
    assert overrides == {"learning_rate": 2e-4, "max_steps": trap.GPU_STEPS, "eval_size": 32}


def test_lr_tag():
    assert [trap.lr_tag(x) for x in (2e-4, 1e-5, 5e-6, 1e-6)] == ["2e-4", "1e-5", "5e-6", "1e-6"]


def test_the_gpu_comparison_pairs_rows_by_step_not_by_position(tmp_path, monkeypatch, capsys):
    """A main run that logs every 10 steps (saved logging_steps=10) is compared with the trap at steps 10 and 20,
    never its steps 10-200 against the trap's 1-20."""
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    profile = get_profile("rtx5090")
    every_ten = [{**row, "step": 10 * (i + 1), "kl": 0.001 * (i + 1)} for i, row in enumerate(_rows(40, 0.0))]
    _write_run(tmp_path / "l71-rtx5090", every_ten, profile.learning_rate, finished=False)
    _write_run(tmp_path / trap.trap_run_name(profile, trap.TRAP_LEARNING_RATE), _rows(trap.GPU_STEPS, 0.5), 2e-4)
    c = trap.compare(profile)
    assert [r["step"] for r in c.course.rows] == [r["step"] for r in c.trap.rows] == [10, 20]
    assert c.kl_ratio() == pytest.approx((0.5 * 19) / 0.002)  # step 20 against step 20
    assert "| métrica | learning_rate | paso 10 | paso 20 |" in c.table_es()
    assert any("pasos 20 a 20" in line for line in c.verdict_es())


def test_on_a_cpu_profile_the_trap_trains_only_behind_its_switch_and_says_how_long_first(tmp_path, monkeypatch, capsys):
    """An untouched Run All of L7.1 trained the trap (15 minutes on ci in JupyterLab, where the text said a minute)."""
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    profile = get_profile("ci")
    assert trap.compare(profile) is None  # nothing trains (this test is not marked trains: the guard would fail it)
    said = capsys.readouterr().out
    assert "ENTRENAR_TRAMPA = True" in said and "2 runs de 3 pasos" in said and "aún no hay un paso medido" in said
    _write_run(tmp_path / "l71-ci", [{**r, "step_time": 40.0} for r in _rows(2, 0.0)], profile.learning_rate)
    assert trap.compare(profile) is None
    assert "unos 4 min de pasos a los 40 s por paso de tu run principal (l71-ci" in capsys.readouterr().out
