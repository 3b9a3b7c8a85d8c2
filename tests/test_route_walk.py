"""The route, walked with one student recipe that differs from the defaults (issue 39, item 5).

A recipe of the student's own (a learning rate in the band other than the profile's, another beta, Dr. GRPO's loss
and a temperature of 0.8 as L6 taught, lenient rewards written in section 1) is saved, then the route's steps run in order on CPU, for ``ci`` and for ``ci-base``, a CPU
profile shaped like ``rtx5090-base`` (format pass and LoRA on the bundled model): save, rehearse, L7.1, L7.2's
comparison, E1-E3's sweeps, E4, C2b. The recorder (tests/recipe_recorder.py) stands in for training: every command
runs through its real command line and writes the run.json a run starts with, so each run's recipe identity is what
the real run would train. The test asserts that each run trained the saved recipe plus only its promised change
(L7.2: only its engine's stated change, ``labs.l72.recipe_rule``), that nothing trained twice, and that C2b grades
the L7.1 run, never the rehearsal's or L7.2's. With ``-s`` it prints each run's recipe id and what differs.
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


def change_values(recipe: dict, saved: dict) -> str:
    """What a run changed, with its values (``beta=0.0``; the reward functions added or removed): for the closing
    note of issue 51, which quotes the walk's printed lines."""
    parts = []
    for key in sorted(changes(recipe, saved)):
        if key == "recompensas":
            added, removed = sorted(set(recipe["rewards"]) - set(saved["rewards"])), sorted(set(saved["rewards"]) - set(recipe["rewards"]))
            parts.append("recompensas" + "".join(f" +{n}" for n in added) + "".join(f" -{n}" for n in removed))
        else:
            parts.append(f"{key}={recipe['settings'].get(key)!r}")
    return ", ".join(parts) or "(la receta)"


@pytest.mark.cpu_stack  # L7.2's start checks the machine for a CPU profile: the GPU stack's vLLM refuses it
@pytest.mark.parametrize("name", ["ci", recipe_recorder.CI_BASE])
def test_the_route_trains_one_recipe_and_its_changes(name, runs, monkeypatch, tmp_path):
    from labs import l71
    from labs.exercises import e4, student, sweep
    from labs.grading import choose_main, grade_submission, selfcheck
    from labs.grading.inputs import load_run
    from labs.grading.submissions import find_run_folders
    from labs.l72 import compare, recipe_rule
    from labs.l72.fallback import FallbackLab

    recipe_recorder.install(monkeypatch)
    monkeypatch.setattr(l71, "run_lab", recipe_recorder.run_lab)  # E4's notebook path calls the lab directly
    profile = get_profile(name)
    walked = []  # (run, recipe id, what differs from the saved recipe): for the closing note of issue 51
    # 1. save: section 1's lenient rewards and section 3's GRPOConfig, with another learning rate and beta, and
    #    what L6 taught: Dr. GRPO's loss and a lower temperature
    saved = save_recipe(profile, learning_rate=2e-5, beta=0.1, loss_type="dr_grpo", temperature=0.8)
    assert saved["settings"]["learning_rate"] != profile.learning_rate and saved["settings"]["beta"] != profile.beta
    assert saved["settings"]["loss_type"] == "dr_grpo" and saved["settings"]["temperature"] == 0.8
    assert all(isinstance(sha, str) for sha in saved["rewards"].values())  # the student's own functions
    walked.append(("receta guardada", saved["id"], change_values(saved, saved)))
    # 2. rehearse: the saved recipe on the rehearsal's budget (steps and lengths shrink, nothing else); its run
    #    stays in rehearsal-cpu/l71, finished, beside the main run
    rehearsal = runs / "rehearsal-cpu"
    rehearsed = recipe_recorder.rehearsed_recipe(profile, rehearsal, monkeypatch)
    assert changes(rehearsed, saved) <= {"max_steps", "max_completion_length"}
    walked.append(("rehearsal-cpu/l71", rehearsed["id"], change_values(rehearsed, saved)))
    from labs.rehearsal import budget

    recipe_recorder.write_finished(rehearsal / "l71", budget.rehearsal_profile(recipe_identity.saved_profile(profile)),
                                   "L7.1", recipe_identity.saved_rewards())
    rf.mark_purpose(rf.RunFolder(rehearsal / "l71"), rf.PURPOSE_REHEARSAL)  # as labs.rehearsal.parts records it
    # 3. L7.1: the main run is the recipe
    assert l71.main(["--profile", name]) == 0
    main = runs / f"l71-{name}"
    # 4. L7.2's comparison finds it by its recipe; L7.2 trains the saved rewards and knobs, and only the engine's
    #    stated changes differ (a recipe of all the weights gets LoRA at 10x its rate; a LoRA recipe keeps its rate)
    assert compare.find_lab_run("L7.1", profile) == main
    lab = FallbackLab(profile)  # L7.2's CPU path as it starts: the plan, the checks, the run folder; nothing loads
    l72_run = recipe_recorder.write_finished(lab.run.root, lab.profile, "L7.2", lab.reward_funcs,
                                             {recipe_rule.KEY: lab.recipe_record})
    l72_recipe = recipe_identity.of_record(rf.read_json(l72_run / rf.RUN_JSON))
    engine = {"learning_rate"} if not profile.use_lora else set()
    assert changes(l72_recipe, saved) == engine, changes(l72_recipe, saved)
    assert l72_recipe["rewards"] == saved["rewards"]
    assert set(lab.recipe_record["changes"]) == engine | ({"lora"} if not profile.use_lora else set())
    said = compare.describe_settings_es([compare.lab_record(main), compare.lab_record(l72_run)])
    same = "Fuera de esos cambios del motor" if engine else "Ajustes de entrenamiento: los mismos en L7.1 y L7.2"
    assert any(line.startswith(same) for line in said), said
    assert not any("distint" in line for line in said), said
    rule = rf.read_json(l72_run / rf.RUN_JSON)[recipe_rule.KEY]  # run.json's l72_recipe: the recipe and the engine's changes
    assert rule["recipe"]["id"] == saved["id"]
    walked.append((l72_run.name, l72_recipe["id"], change_values(l72_recipe, saved)
                   + f"; l72_recipe: receta {rule['recipe']['id']}, cambios del motor: {', '.join(sorted(rule['changes'])) or 'ninguno'}"))
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
            recipe = recipe_identity.of_record(rf.read_json(r.run_dir / rf.RUN_JSON))
            got = changes(recipe, saved)
            assert got == set() if r.run_dir == main else (got and got <= promised[exercise]), (r.run_dir.name, got)
            assert recipe["settings"]["loss_type"] == "dr_grpo" and recipe["settings"]["temperature"] == 0.8
            walked.append((r.run_dir.name, recipe["id"], change_values(recipe, saved)))
    # 6. E4: the recipe plus the student's reward
    names = [*REWARD_NAMES, OWN]
    e4_run = e4.train_or_read(profile, names, reward_functions(names), runs_root=runs, echo=lambda _: None)
    e4_recipe = recipe_identity.of_record(rf.read_json(e4_run / rf.RUN_JSON))
    assert changes(e4_recipe, saved) == {"recompensas"}
    walked.append((e4_run.name, e4_recipe["id"], change_values(e4_recipe, saved)))
    # nothing trained twice, and the main run was never trained again for the exercises
    trained = recipe_recorder.trained(runs)
    assert len(trained) == len(set(trained)) and trained[0] == main.name, trained
    assert not (runs / f"ref-{name}").exists()
    # 7. C2b: the grader's main run is L7.1's, never the rehearsal's (finished, nested) nor L7.2's; so says the self-check
    folders = find_run_folders(runs)
    assert rehearsal / "l71" in folders and l72_run in folders
    chosen, _, _ = choose_main([load_run(f) for f in folders])
    assert chosen.root == main
    assert grade_submission(runs).data.root == main and selfcheck.choose_run()[0] == main
    print(f"\n[{name}] receta {saved['id']}: " + ", ".join(f"{k}={v!r}" for k, v in saved["settings"].items()))
    for run, rid, what in walked:
        print(f"[{name}] {run:<28} {rid}  {what}")
