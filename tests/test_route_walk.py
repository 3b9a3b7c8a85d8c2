"""The route, walked with one student recipe that differs from the defaults (issue 39, item 5).

A recipe of the student's own (a learning rate in the band other than the profile's, another beta, lenient rewards
written in section 1) is saved, then the route's steps run in order on CPU, for ``ci`` and for ``ci-base``, a CPU
profile shaped like ``rtx5090-base`` (format pass and LoRA on the bundled model): save, rehearse, L7.1, L7.2's
comparison, E1-E3's sweeps, E4, C2b. The recorder (tests/recipe_recorder.py) stands in for training: every command
runs through its real command line and writes the run.json a run starts with, so each run's recipe identity is what
the real run would train. The test asserts that each run trained the saved recipe plus only its promised change,
that nothing trained twice, and that C2b grades the L7.1 run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import recipe_recorder
from test_recipe_identity import save_recipe

from labs.core import runfolder as rf
from labs.core.profiles import get_profile
from labs.l71 import recipe_identity
from rewards import REWARD_NAMES, reward_functions

OWN = f"{Path(__file__).parent / 'data' / 'recompensa_alumno.py'}:razonamiento_con_cuentas"


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    recipe_recorder.register_ci_base(monkeypatch)
    return tmp_path


def changes(recipe: dict, saved: dict) -> set[str]:
    """The knobs (and ``recompensas``) in which a run's recipe differs from the saved one."""
    return {line.split(":")[0] for line in recipe_identity.differences_es(recipe, saved)}


@pytest.mark.parametrize("name", ["ci", recipe_recorder.CI_BASE])
def test_the_route_trains_one_recipe_and_its_changes(name, runs, monkeypatch, tmp_path):
    from labs import l71
    from labs.exercises import e4, student, sweep
    from labs.grading import choose_main
    from labs.grading.inputs import load_run
    from labs.l72 import compare

    recipe_recorder.install(monkeypatch)
    monkeypatch.setattr(l71, "run_lab", recipe_recorder.run_lab)  # E4's notebook path calls the lab directly
    profile = get_profile(name)
    # 1. save: section 1's lenient rewards and section 3's GRPOConfig, with another learning rate and beta
    saved = save_recipe(profile, learning_rate=2e-5, beta=0.1)
    assert saved["settings"]["learning_rate"] != profile.learning_rate and saved["settings"]["beta"] != profile.beta
    # 2. rehearse: the saved recipe on the rehearsal's budget (steps and lengths shrink, nothing else)
    assert changes(recipe_recorder.rehearsed_recipe(profile, tmp_path / "ensayo", monkeypatch), saved) <= {"max_steps", "max_completion_length"}
    # 3. L7.1: the main run is the recipe
    assert l71.main(["--profile", name]) == 0
    main = runs / f"l71-{name}"
    # 4. L7.2's comparison finds it by its recipe
    assert compare.find_lab_run("L7.1", profile) == main
    # 5. E1-E3: each variant is the recipe with its one change; what equals the recipe is the main run, reused
    perfil_con_grupo = lambda p, g: p.replace(num_generations=g, per_device_train_batch_size=g,  # noqa: E731
                                              gradient_accumulation_steps=p.prompts_per_step)
    built = {"E1": student.e1_variants(profile, perfil_con_grupo),
             "E2": student.e2_variants(profile, lambda names: [n for n in names if n != "correctness_reward"]),
             "E3": student.e3_variants(profile, lambda p, beta: p.replace(beta=beta))}
    promised = {"E1": {"num_generations", "per_device_train_batch_size", "gradient_accumulation_steps"},
                "E2": {"recompensas"}, "E3": {"beta"}}
    for exercise in built:
        result = sweep.run_sweep(student.saved_variants(exercise, profile), profile, runs_root=runs,
                                 echo=lambda _: None)
        result.raise_on_failure()
        for r in result.results:
            got = changes(recipe_identity.of_record(rf.read_json(r.run_dir / rf.RUN_JSON)), saved)
            assert got == set() if r.run_dir == main else (got and got <= promised[exercise]), (r.run_dir.name, got)
    # 6. E4: the recipe plus the student's reward
    names = [*REWARD_NAMES, OWN]
    e4_run = e4.train_or_read(profile, names, reward_functions(names), runs_root=runs, echo=lambda _: None)
    assert changes(recipe_identity.of_record(rf.read_json(e4_run / rf.RUN_JSON)), saved) == {"recompensas"}
    # nothing trained twice, and the main run was never trained again for the exercises
    trained = recipe_recorder.trained(runs)
    assert len(trained) == len(set(trained)) and trained[0] == main.name, trained
    assert not (runs / f"ref-{name}").exists()
    # 7. C2b: the grader's main run is L7.1's
    folders = [p.parent for p in runs.glob("*/" + rf.RUN_JSON)]
    chosen, _, _ = choose_main([load_run(f) for f in folders])
    assert chosen.root == main
