"""``python -m labs l71`` with a recorder in place of training: what a command would train, written to run.json.

``install(monkeypatch)`` replaces ``labs.l71.cli.run_lab`` in this process; run as a script
(``python tests/recipe_recorder.py <l71 arguments>``) it does the same in a child process, for the sweep's
``command_for``. The recorder writes the run folder as a run starts it (``write_run_json`` with the profile and
the reward functions the command line resolved: the recipe identity included) and marks it finished; it trains
nothing. Every call is appended to ``<runs>/_recorder.log`` (one run name a line), so a test can tell what ran twice.
"""

from __future__ import annotations

import sys
from pathlib import Path

CI_BASE = "ci-base"  # a CPU profile shaped like rtx5090-base: a format pass and LoRA, on the bundled model


def register_ci_base() -> None:
    """Add ``CI_BASE`` to the course's profiles (this process only; the recorder's child does the same)."""
    from labs.core.profiles import PROFILES, get_profile

    PROFILES.setdefault(CI_BASE, get_profile("ci").replace(
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


def install(monkeypatch) -> None:
    from labs.l71 import cli

    monkeypatch.setattr(cli, "run_lab", run_lab)


def trained(runs: Path) -> list[str]:
    """The run names the recorder wrote, in order (one line per training it stood in for)."""
    log = Path(runs) / "_recorder.log"
    return log.read_text(encoding="utf-8").split() if log.exists() else []


if __name__ == "__main__":
    from labs.l71 import cli

    register_ci_base()
    cli.run_lab = run_lab
    sys.exit(cli.main(sys.argv[1:]))
