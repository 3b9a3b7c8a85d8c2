"""``python -m labs l71`` with a recorder in place of training: what a command would train, written to run.json.

``install(monkeypatch)`` replaces ``labs.l71.cli.run_lab``, and runs the sweep's children (the lab's real command
line, ``labs.exercises.sweep.lab_command``) in this process: the recorder trains nothing, so a child process would
only cost its imports. The recorder writes the run folder as a run starts it (``write_run_json`` with the profile and
the reward functions the command line resolved: the recipe identity included) and marks it finished; it trains
nothing. Every call is appended to ``<runs>/_recorder.log`` (one run name a line), so a test can tell what ran twice.
"""

from __future__ import annotations

from pathlib import Path

CI_BASE = "ci-base"  # a CPU profile shaped like rtx5090-base: a format pass and LoRA, on the bundled model


def register_ci_base(monkeypatch) -> None:
    """Add ``CI_BASE`` to the course's profiles for one test (``monkeypatch`` takes it out again)."""
    from labs.core.profiles import PROFILES, get_profile

    monkeypatch.setitem(PROFILES, CI_BASE, get_profile("ci").replace(
        name=CI_BASE, use_lora=True, learning_rate=5e-6, format_pass=True,
        description="ci con la forma de rtx5090-base (pase de formato y LoRA), solo para las pruebas"))


def run_lab(profile=None, run_name=None, fresh=False, reward_names=None, lab="L7.1", accept_changes=False,
            settings_from=None, variant_from=None, *, reward_funcs=None, **overrides):
    from labs.core import runfolder as rf
    from labs.core.paths import runs_dir
    from labs.l71 import lab as lab_module
    from rewards import reward_functions

    p = profile.replace(**overrides) if overrides else profile
    funcs = list(reward_funcs) if reward_funcs is not None else reward_functions(reward_names)
    run = lab_module.new_run(p, run_name, fresh, lab)
    if run.is_finished():
        return run.root
    extra = {k: v for k, v in (("settings_from", settings_from), ("variant_from", variant_from)) if v}
    lab_module.write_run_json(run, p, lab, funcs, "modelo", extra)
    rf.append_jsonl(run.root / rf.METRICS_JSONL, {"step": 1, "reward": 0.0})
    run.write_status(rf.STATE_FINISHED, p.max_steps, p.max_steps)
    with open(runs_dir() / "_recorder.log", "a", encoding="utf-8") as fh:
        fh.write(run.root.name + "\n")
    return run.root


def write_finished(run_dir, profile, lab: str, reward_funcs, extra=None) -> Path:
    """A finished run folder as ``profile`` and ``reward_funcs`` would leave it (run.json with its recipe), without
    appending to the recorder's log: the rehearsal's and L7.2's runs, which ``python -m labs l71`` never trains."""
    from labs.core import runfolder as rf
    from labs.l71 import lab as lab_module

    run = rf.RunFolder(run_dir)
    lab_module.write_run_json(run, profile, lab, reward_funcs, "modelo", extra)
    rf.append_jsonl(run.root / rf.METRICS_JSONL, {"step": 1, "reward": 0.0})
    run.write_status(rf.STATE_FINISHED, profile.max_steps, profile.max_steps)
    return run.root


def run_child_here(cmd, log_path=None, env=None, show=None, echo=None, timeout=None):
    """The sweep's child, ``python -m labs l71 ...`` as ``lab_command`` writes it, run in this process."""
    from labs.l71 import cli

    words = list(cmd)
    return cli.main(words[words.index("l71") + 1:]), [], False


def install(monkeypatch) -> None:
    """The recorder in place of training, for ``python -m labs l71`` and for the sweep's children."""
    from labs.exercises import sweep
    from labs.l71 import cli

    monkeypatch.setattr(cli, "run_lab", run_lab)
    monkeypatch.setattr(sweep, "run_child", run_child_here)


def trained(runs: Path) -> list[str]:
    """The run names the recorder wrote, in order (one line per training it stood in for)."""
    log = Path(runs) / "_recorder.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


def rehearsed_recipe(profile, root: Path, monkeypatch) -> dict:
    """The recipe the rehearsal's L7.1 part would train: its lab is recorded as it is built, and nothing loads."""
    import pytest

    from labs.l71 import recipe_identity
    from labs.rehearsal import parts
    from rewards import reward_functions

    built = []

    class Stop(Exception):
        pass

    class RecordingLab:
        def __init__(self, p, run_name=None, reward_funcs=None, **kwargs):
            built.append(recipe_identity.of_run(p, reward_funcs if reward_funcs is not None else reward_functions()))

        def load_data(self):
            raise Stop  # what it would train is known: nothing loads

        def close(self):
            pass

    monkeypatch.setattr(parts.l71, "Lab", RecordingLab)
    with pytest.raises(Stop):
        parts.run_part("l71", profile, root)
    assert len(built) == 1, built
    return built[0]
