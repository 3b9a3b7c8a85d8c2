"""labs.exercises.sweep: skipping finished runs, resuming, failures, timeouts, and the child's command line.

The children here are stand-ins started with ``sys.executable -c``: they write status.json the way
the lab does and append their name to a marker file, so a test sees exactly which processes ran.
"""

from __future__ import annotations

import sys
import time

import pytest
from rundirs import make_run

from labs.exercises import sweep
from labs.core.profiles import get_profile, parse_override
from labs.core.runfolder import RunFolder

# argv: run_dir, name, marker file, mode ("ok" | "fail" | "error" | "sleep" | "silent" | "crash" | "killed")
CHILD = r"""
import json, os, sys, time
run_dir, name, marker, mode = sys.argv[1:5]
with open(marker, "a") as fh:
    fh.write(name + "\n")
os.makedirs(run_dir, exist_ok=True)
print("ruido de una biblioteca", flush=True)
print("[INFO] ruido de wandb", flush=True)
print("[W1129 12:17:01.712152365 utils.cpp:68] Warning: ruido de torch", flush=True)
print("[qué observar] una línea del curso", flush=True)
print("[run] empiezo " + name, flush=True)
print("[paso 1/2] recompensa 0.5 · corrección 0 · formato 0.25", flush=True)
assert os.environ["COURSE_RUNS"] == os.path.dirname(run_dir), os.environ["COURSE_RUNS"]
assert int(os.environ["MASTER_PORT"]) > 0  # each child gets a port of its own for torch.distributed
def status(state, **extra):
    with open(os.path.join(run_dir, "status.json"), "w") as fh:
        json.dump({"state": state, "step": 1, "max_steps": 2, **extra}, fh)
if mode == "ok":
    status("finished")
elif mode == "fail":
    status("failed", kind="oom", message_es="Memoria agotada (OOM). Baja per_device_train_batch_size.")
    print("ERROR: el entrenamiento se detuvo.", file=sys.stderr, flush=True)
    sys.exit(1)
elif mode == "error":
    print("ERROR: El perfil no tiene el ajuste 'foo'.", file=sys.stderr, flush=True)
    sys.exit(2)
elif mode == "sleep":
    time.sleep(60)
elif mode == "silent":
    status("running")
elif mode == "crash":
    raise RuntimeError("The server socket has failed to listen")
elif mode == "killed":
    import signal
    os.kill(os.getpid(), signal.SIGKILL)
"""


def fake(root, marker, modes):
    """A ``command_for`` that runs CHILD with the mode chosen per variant name (default "ok")."""

    def command_for(variant, profile_name):
        assert profile_name == "ci"
        return [sys.executable, "-c", CHILD, str(root / variant.name), variant.name, str(marker),
                modes.get(variant.name, "ok")]

    return command_for


def started(marker) -> list[str]:
    return marker.read_text().split() if marker.exists() else []


@pytest.fixture
def env(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    root.mkdir()
    # the run area is the test's own: the student's saved recipe (runs/_ajustes) is read from it, and a notebook run
    # earlier in the session may have saved one in the session's area
    monkeypatch.setenv("COURSE_RUNS", str(root))
    return root, tmp_path / "started.txt"


def variants(*names):
    return [sweep.Variant(n, {"max_steps": 2}, label=n) for n in names]


def test_finished_run_is_skipped_without_starting_a_process(env):
    root, marker = env
    RunFolder(root / "a-ci").write_status("finished", 2, 2)
    lines = []
    result = sweep.run_sweep(variants("a-ci", "b-ci"), "ci", runs_root=root, command_for=fake(root, marker, {}), echo=lines.append)
    assert started(marker) == ["b-ci"]
    assert [r.state for r in result.results] == [sweep.SKIPPED, sweep.FINISHED]
    assert result.run_dirs() == {"a-ci": root / "a-ci", "b-ci": root / "b-ci"}
    assert not result.failed
    result.raise_on_failure()  # nothing to raise
    assert any("ya terminada" in line for line in lines)


def test_second_sweep_resumes_only_what_is_unfinished(env):
    root, marker = env
    RunFolder(root / "a-ci").write_status("running", 1, 2)  # interrupted halfway: must run again
    vs = variants("a-ci", "b-ci", "c-ci")
    first = sweep.run_sweep(vs, "ci", runs_root=root, command_for=fake(root, marker, {"c-ci": "silent"}), echo=lambda s: None)
    assert started(marker) == ["a-ci", "b-ci", "c-ci"]
    assert [r.state for r in first.results] == [sweep.FINISHED, sweep.FINISHED, sweep.FAILED]
    assert "finished" in first.results[2].message  # exit 0 but not finished is still a failure

    second = sweep.run_sweep(vs, "ci", runs_root=root, command_for=fake(root, marker, {}), echo=lambda s: None)
    assert started(marker) == ["a-ci", "b-ci", "c-ci", "c-ci"]
    assert [r.state for r in second.results] == [sweep.SKIPPED, sweep.SKIPPED, sweep.FINISHED]


def test_failure_reports_the_status_message_and_continues(env):
    root, marker = env
    lines = []
    result = sweep.run_sweep(
        variants("a-ci", "b-ci"), "ci", runs_root=root, command_for=fake(root, marker, {"a-ci": "fail"}), echo=lines.append
    )
    assert started(marker) == ["a-ci", "b-ci"]
    a, b = result.results
    assert a.state == sweep.FAILED and a.returncode == 1
    assert a.message == "[oom] Memoria agotada (OOM). Baja per_device_train_batch_size."
    assert b.state == sweep.FINISHED
    assert any("FALLÓ" in line and "Memoria agotada" in line for line in lines)
    assert a.log_path.exists() and "ERROR: el entrenamiento se detuvo." in a.log_path.read_text()
    with pytest.raises(sweep.SweepError, match="a-ci.*Memoria agotada"):
        result.raise_on_failure()


def test_stop_on_failure_leaves_the_rest_unstarted(env):
    root, marker = env
    result = sweep.run_sweep(
        variants("a-ci", "b-ci"), "ci", runs_root=root, command_for=fake(root, marker, {"a-ci": "fail"}),
        stop_on_failure=True, echo=lambda s: None,
    )
    assert started(marker) == ["a-ci"]
    assert [r.state for r in result.results] == [sweep.FAILED, sweep.NOT_RUN]
    assert len(result.failed) == 2


def test_failure_without_status_reports_the_error_line(env):
    root, marker = env
    # a failure left by an earlier attempt is not the reason this time
    RunFolder(root / "a-ci").write_status("failed", 1, 2, kind="nan", message_es="viejo")
    result = sweep.run_sweep(variants("a-ci"), "ci", runs_root=root, command_for=fake(root, marker, {"a-ci": "error"}), echo=lambda s: None)
    assert result.results[0].state == sweep.FAILED
    assert result.results[0].returncode == 2
    assert result.results[0].message == "ERROR: El perfil no tiene el ajuste 'foo'."


def test_crash_and_kill_are_explained(env):
    root, marker = env
    result = sweep.run_sweep(
        variants("a-ci", "b-ci"), "ci", runs_root=root, command_for=fake(root, marker, {"a-ci": "crash", "b-ci": "killed"}),
        echo=lambda s: None,
    )
    crashed, killed = result.results
    assert crashed.returncode == 1
    assert "RuntimeError: The server socket has failed to listen" in crashed.message
    assert killed.returncode == -9 and "memoria" in killed.message


def test_timeout_stops_the_child(env):
    root, marker = env
    start = time.monotonic()
    result = sweep.run_sweep(
        variants("a-ci"), "ci", runs_root=root, command_for=fake(root, marker, {"a-ci": "sleep"}), timeout=2, echo=lambda s: None
    )
    assert time.monotonic() - start < 30
    r = result.results[0]
    assert r.state == sweep.FAILED and r.returncode is None
    assert "límite de 2 s" in r.message


PARENT = r"""
import sys
from pathlib import Path
from labs.exercises import sweep
root, marker, child = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
def command_for(variant, profile_name):
    return [sys.executable, "-c", child, str(root / variant.name), variant.name, marker, "sleep"]
sweep.run_sweep([sweep.Variant("a-ci")], "ci", runs_root=root, command_for=command_for)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_child_dies_with_a_killed_parent(env):
    """A killed notebook kernel must not leave a training running on its own."""
    import os
    import signal
    import subprocess

    root, marker = env
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(root), str(marker), CHILD])
    try:
        deadline = time.monotonic() + 60
        while not started(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started(marker) == ["a-ci"]
        out = subprocess.run(["pgrep", "-f", f"{root / 'a-ci'}"], capture_output=True, text=True)
        children = [int(p) for p in out.stdout.split()]
        assert children
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 20
    alive = children
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = []
        for pid in children:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
    assert not alive, f"child process(es) {alive} outlived their parent"


def test_course_lines_are_shown_and_library_noise_is_not(env):
    root, marker = env
    lines = []
    sweep.run_sweep(variants("a-ci"), "ci", runs_root=root, command_for=fake(root, marker, {}), echo=lines.append)
    assert any("[run] empiezo a-ci" in line for line in lines)
    assert any("[qué observar] una línea del curso" in line for line in lines)
    assert any("[paso 1/2] recompensa 0.5" in line for line in lines)  # the training display, step by step
    assert not any("ruido" in line for line in lines)
    everything = []
    sweep.run_sweep(variants("b-ci"), "ci", runs_root=root, command_for=fake(root, marker, {}), echo=everything.append, show="all")
    assert any("ruido" in line for line in everything)


def test_names_must_carry_the_profile(env):
    root, marker = env
    with pytest.raises(sweep.SweepError, match="no contiene el perfil 'ci'"):
        sweep.run_sweep(variants("e1-cpu-g4"), "ci", runs_root=root, command_for=fake(root, marker, {}), echo=lambda s: None)
    assert started(marker) == []


def test_unknown_setting_is_refused_before_anything_runs(env):
    root, marker = env
    bad = [sweep.Variant("a-ci"), sweep.Variant("b-ci", {"no_such_setting": 1})]
    with pytest.raises(ValueError, match="no_such_setting"):
        sweep.run_sweep(bad, "ci", runs_root=root, command_for=fake(root, marker, {}), echo=lambda s: None)
    assert started(marker) == []


def test_finished_run_with_other_settings_is_not_reused(env):
    root, marker = env
    make_run(root, "a-ci", profile="ci", max_steps=2, beta=0.2)
    with pytest.raises(sweep.SweepError, match="beta"):
        sweep.run_sweep(variants("a-ci"), "ci", runs_root=root, command_for=fake(root, marker, {}), echo=lambda s: None)
    # the same folder, asked for with its own settings, is reused
    same = [sweep.Variant("a-ci", {"max_steps": 2, "beta": 0.2})]
    result = sweep.run_sweep(same, "ci", runs_root=root, command_for=fake(root, marker, {}), echo=lambda s: None)
    assert result.results[0].state == sweep.SKIPPED
    # ...but not with other reward functions
    other_rewards = [sweep.Variant("a-ci", {"max_steps": 2, "beta": 0.2}, rewards=("format_reward",))]
    with pytest.raises(sweep.SweepError, match="recompensas"):
        sweep.run_sweep(other_rewards, "ci", runs_root=root, command_for=fake(root, marker, {}), echo=lambda s: None)
    assert started(marker) == []


def test_shared_variant_runs_once(env):
    root, marker = env
    v = sweep.Variant("ref-ci", {"max_steps": 2})
    result = sweep.run_sweep([v, sweep.Variant("ref-ci", {"max_steps": 2}, label="otra etiqueta")], "ci",
                             runs_root=root, command_for=fake(root, marker, {}), echo=lambda s: None)
    assert started(marker) == ["ref-ci"]
    assert len(result.results) == 1
    with pytest.raises(sweep.SweepError, match="ajustes distintos"):
        sweep.check_variants([v, sweep.Variant("ref-ci", {"max_steps": 3})], get_profile("ci"))


def test_lab_command_round_trips_through_the_cli_parser():
    profile = get_profile("ci")
    v = sweep.Variant(
        "e1-ci-g8",
        {"num_generations": 8, "beta": 0.0, "learning_rate": 1e-6, "use_vllm": False,
         "lora_targets": ("q_proj", "v_proj"), "model": "bundled:SmolLM2-135M-Instruct"},
        rewards=("format_reward", "soft_format_reward"),
        lab="E1",
    )
    cmd = sweep.lab_command(v, "ci")
    assert cmd[:4] == [sys.executable, "-m", "labs", "l71"]
    assert cmd[cmd.index("--profile") + 1] == "ci"
    assert cmd[cmd.index("--run-name") + 1] == "e1-ci-g8"
    assert cmd[cmd.index("--lab") + 1] == "E1"
    assert cmd[cmd.index("--rewards") + 1] == "format_reward,soft_format_reward"
    parsed = dict(parse_override(cmd[i + 1], profile) for i, arg in enumerate(cmd) if arg == "--set")
    assert parsed == v.overrides
    assert "--rewards" not in sweep.lab_command(sweep.Variant("ref-ci"), "ci")


def test_plan_says_what_would_run(env):
    root, _ = env
    RunFolder(root / "a-ci").write_status("finished", 2, 2)
    RunFolder(root / "b-ci").write_status("failed", 1, 2)
    assert [(v.name, done) for v, done in sweep.plan(variants("a-ci", "b-ci", "c-ci"), "ci", root)] == [
        ("a-ci", True), ("b-ci", False), ("c-ci", False)
    ]


def test_command_line_refuses_to_mix_settings_and_says_why(env, monkeypatch, capsys):
    from labs import exercises

    root, _ = env
    monkeypatch.setenv("COURSE_RUNS", str(root))
    first = exercises.e2_variants("ci", without_correctness)[0]  # what the E2 notebook saves
    make_run(root, first.name, profile="ci", max_steps=99)  # a finished folder made with other settings
    assert sweep.main(["e2", "--profile", "ci"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR:") and first.name in err and "max_steps" in err
    assert not list((root / sweep.LOG_DIR).glob("*.log"))  # refused before any child started (its saved variants are there)


def without_correctness(names):
    """A right answer to E2's variant question."""
    return [n for n in names if n != "correctness_reward"]


def test_command_line_without_the_students_variants_says_which_notebook(env, monkeypatch, capsys):
    root, _ = env
    monkeypatch.setenv("COURSE_RUNS", str(root))
    assert sweep.main(["E1", "--profile", "ci"]) == 1
    err = capsys.readouterr().err
    assert "notebooks/E1_tamano_de_grupo.ipynb" in err and "termina el ejercicio «tus variantes" in err
    assert not (root / sweep.LOG_DIR / "e1-ci-g2.log").exists()  # nothing started


def test_command_line_unknown_profile(capsys):
    assert sweep.main(["E1", "--profile", "nope"]) == 1
    assert "Perfiles válidos" in capsys.readouterr().err


def test_set_gives_every_variant_the_budget_and_is_remembered(env, monkeypatch, capsys):
    from labs import exercises

    root, _ = env
    monkeypatch.setenv("COURSE_RUNS", str(root))
    budget = {"max_steps": 3}
    exercises.e2_variants("ci", without_correctness)  # the E2 notebook's variant cell, on the default budget
    for v in exercises.saved_variants("E2", "ci", root, budget):
        assert ["--set", "max_steps=3"] == sweep.lab_command(v, "ci")[-2:] or "max_steps=3" in sweep.lab_command(v, "ci")
        rewards = None if v.rewards is None else {n: 1.0 for n in v.rewards}
        make_run(root, v.name, profile="ci", max_steps=3, rewards=rewards)  # as if the sweep had run them
    assert sweep.main(["E2", "--profile", "ci", "--set", "max_steps=3"]) == 0
    out = capsys.readouterr().out
    assert "Presupuesto max_steps=3 guardado" in out and "ya terminada, la reutilizo" in out
    assert exercises.recorded_budget(get_profile("ci")) == budget
    assert sweep.command_line("E2", get_profile("ci")) == "python -m labs sweep E2 --set max_steps=3"  # ci is in use
    # the notebook reads those runs, without training
    result = sweep.read_or_run("E2", exercises.e2_variants("ci", without_correctness), "ci", echo=lambda line: None)
    assert [r.state for r in result.results] == [sweep.SKIPPED, sweep.SKIPPED] and not result.failed


def test_a_notebook_on_a_gpu_profile_never_trains_a_missing_run_unless_asked(env):
    from labs import exercises

    root, _ = env
    gpu = get_profile("rtx5090")
    said = []
    with pytest.raises(sweep.SweepError) as err:
        sweep.read_or_run("E3", exercises.planned_variants("E3", gpu, root), gpu, runs_root=root, echo=said.append)
    text = str(err.value)
    assert "Faltan 3 de las 3 ejecuciones de E3" in text and "planificado, no medido" in text
    assert "python -m labs sweep E3 --profile rtx5090" in text and "ENTRENAR_AQUI = True" in text
    assert said == ["En una terminal, este ejercicio se lanza con: python -m labs sweep E3 --profile rtx5090"]
    assert not (root / sweep.LOG_DIR).exists()  # nothing started
