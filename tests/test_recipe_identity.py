"""One recipe: the student's saved settings and reward functions have one identity, recorded in every run.json,
and every run (L7.1, E1-E3's reference and variants, the rehearsal, L7.2's comparison, the grader) derives from it.

Nothing here trains: ``recorder`` stands in for ``labs.l71.cli.run_lab`` and writes the run folder a run would
start with (``write_run_json`` with the profile and reward functions the command line resolved), then marks it
finished, so what each command *would train* is read back from run.json as the real run records it.
"""

from __future__ import annotations

import re

import pytest
import recipe_recorder

from labs.core import runfolder as rf
from labs.core.profiles import get_profile
from labs.l71 import recipe_identity, settings, student_rewards
from rewards import REWARD_NAMES, reward_functions

LENIENT = 0.3


def correctness_reward(completions, answer, **kwargs):
    return [2.0 if re.search(rf"<answer>\s*{re.escape(str(g))}\s*</answer>", c[0]["content"]) else 0.0
            for c, g in zip(completions, answer)]


def format_reward(completions, **kwargs):
    return [LENIENT for _ in completions]


def soft_format_reward(completions, **kwargs):
    return [0.1 * ("<answer>" in c[0]["content"]) for c in completions]


STUDENT = [correctness_reward, format_reward, soft_format_reward]


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    return tmp_path


def save_recipe(profile, **knobs):
    """What the L7.1 notebook saves: its GRPOConfig knobs (``knobs`` changed from the profile) and section 1."""
    from types import SimpleNamespace

    values = {**{k: getattr(profile, k) for k in settings.LESSON_KNOBS}, **knobs}
    settings.save(SimpleNamespace(**values), profile, echo=lambda _: None)
    student_rewards.save(STUDENT, echo=lambda _: None)
    return recipe_identity.saved(profile)


@pytest.fixture
def recorder(runs, monkeypatch):
    """``labs.l71.cli.run_lab`` that records what it would train in run.json (tests/recipe_recorder.py)."""
    recipe_recorder.install(monkeypatch)
    return lambda: recipe_recorder.trained(runs)


def test_every_run_json_records_the_recipe_it_trained(runs, recorder):
    from labs.l71 import main

    profile = get_profile("ci")
    saved = save_recipe(profile, learning_rate=2e-5, beta=0.1)
    assert main(["--profile", "ci"]) == 0
    record = rf.read_json(runs / "l71-ci" / rf.RUN_JSON)
    recipe = record["recipe"]
    assert recipe == saved and re.fullmatch(r"[0-9a-f]{12}", recipe["id"])
    assert recipe["settings"]["learning_rate"] == 2e-5 and recipe["settings"]["beta"] == 0.1
    sources = {s["name"]: s["source_sha256"] for s in record["reward_sources"]}
    assert recipe["rewards"] == sources and all(len(sha) == 64 for sha in sources.values())
    # the course's recipe is another identity; an older run.json without "recipe" is read the same way
    course = recipe_identity.of_run(profile, reward_functions())
    assert course["id"] != saved["id"] and set(course["rewards"]) == set(REWARD_NAMES)
    assert all(v is None for v in course["rewards"].values())
    del record["recipe"]
    assert recipe_identity.of_record(record) == saved
    lines = recipe_identity.differences_es(course, saved)
    assert any(line.startswith("learning_rate:") for line in lines) and any("format_reward" in line for line in lines)


def sweep_exercise(exercise, profile, runs):
    from labs.exercises import student, sweep

    built = {"E1": lambda: student.e1_variants(profile, lambda p, g: p.replace(
                 num_generations=g, per_device_train_batch_size=g, gradient_accumulation_steps=p.prompts_per_step)),
             "E2": lambda: student.e2_variants(profile, lambda names: [n for n in names if n != "correctness_reward"]),
             "E3": lambda: student.e3_variants(profile, lambda p, beta: p.replace(beta=beta))}[exercise]()
    result = sweep.run_sweep(student.saved_variants(exercise, profile), profile, runs_root=runs,
                             echo=lambda _: None)
    result.raise_on_failure()
    return built, result


def test_e1_to_e3_train_the_saved_recipe_with_only_their_change(runs, recorder):
    profile = get_profile("ci")
    saved = save_recipe(profile, learning_rate=2e-5, beta=0.1)
    changes = {}
    for exercise in ("E1", "E2", "E3"):
        _, result = sweep_exercise(exercise, profile, runs)
        for r in result.results:
            recipe = recipe_identity.of_record(rf.read_json(r.run_dir / rf.RUN_JSON))
            changes[r.run_dir.name] = recipe_identity.differences_es(recipe, saved)
    # the reference is the recipe itself; each variant differs from it in its one change, nothing else
    assert changes.pop("ref-ci") == []
    assert changes.pop("e2-ci-solo-formato") == ["recompensas: correctness_reward está en tu receta, no en la carpeta"]
    assert [k.split(":")[0] for k in changes.pop("e3-ci-beta0")] == ["beta"]
    e1 = changes.pop("e1-ci-g2")
    assert {line.split(":")[0] for line in e1} <= {"num_generations", "per_device_train_batch_size",
                                                   "gradient_accumulation_steps"} and e1
    assert changes == {}, changes  # E1's G=4 and E3's recipe beta are the reference run, shared
    assert sorted(recorder()) == sorted(["ref-ci", "e1-ci-g2", "e2-ci-solo-formato", "e3-ci-beta0"])  # once each


def test_the_rehearsal_builds_the_lab_with_the_saved_recipe(runs, monkeypatch, tmp_path):
    from labs.rehearsal import budget

    profile = get_profile("ci")
    saved = save_recipe(profile, learning_rate=2e-5, beta=0.1)
    built = [recipe_recorder.rehearsed_recipe(profile, tmp_path / "ensayo", monkeypatch)]
    # the rehearsal's budget shrinks steps and lengths; the learning rate, beta, batch and rewards are the recipe's
    rehearsed = budget.rehearsal_profile(recipe_identity.saved_profile(profile))
    assert built == [recipe_identity.of_run(rehearsed, recipe_identity.saved_rewards())]
    assert built[0]["rewards"] == saved["rewards"]
    assert {k: built[0]["settings"][k] for k in ("learning_rate", "beta")} == {"learning_rate": 2e-5, "beta": 0.1}


def test_l72_finds_the_l71_run_by_its_recipe_and_states_every_difference(runs, recorder):
    from labs.l71 import main
    from labs.l72 import compare

    profile = get_profile("ci")
    save_recipe(profile, learning_rate=2e-5, beta=0.1)
    assert main(["--profile", "ci"]) == 0  # the main run, trained with the saved recipe
    assert compare.find_lab_run("L7.1", profile) == runs / "l71-ci"
    # an L7.1 run of the profile's defaults and the course's functions is not the student's recipe
    assert main(["--profile", "ci", "--run-name", "l71-ci-curso", "--sin-ajustes", "--recompensas-del-curso"]) == 0
    assert compare.find_lab_run("L7.1", profile) == runs / "l71-ci"
    # L7.2 trains the course's functions: the comparison says so, function by function, with the settings
    assert main(["--profile", "ci", "--run-name", "l72-ci", "--lab", "L7.2", "--recompensas-del-curso"]) == 0
    a, b = compare.lab_record(runs / "l71-ci"), compare.lab_record(runs / "l72-ci")
    text = " ".join(compare.describe_settings_es([a, b]))
    assert "Funciones de recompensa distintas entre L7.1 y L7.2" in text
    assert "format_reward de L7.1 es tuya (SHA-256" in text and "la de L7.2, la del curso (rewards/)" in text
    # a finished L7.1 run of another recipe is named with what differs, and the command that trains the saved one
    (runs / "l71-ci" / rf.STATUS_JSON).unlink()
    assert compare.find_lab_run("L7.1", profile) is None
    note = " ".join(compare.other_recipe_es(profile))
    assert "l71-ci-curso entrenó otra receta" in note and "learning_rate: l71-ci-curso 1e-05, tu receta guardada 2e-05" in note
    assert "python -m labs l71 --profile ci --fresh" in note


def test_the_grader_never_takes_an_exercises_reference_as_the_main_run(tmp_path):
    """``ref-<profile>`` records lab L7.1 (it trains the saved recipe) and may be the only finished run of L7.1."""
    from rundirs import history, make_run

    from labs.grading import choose_main
    from labs.grading.inputs import load_run

    ref = make_run(tmp_path, "ref-rtx5090", metrics=history(30), max_steps=250)
    main = make_run(tmp_path, "l71-rtx5090", metrics=history(20), max_steps=500, state=rf.STATE_RUNNING, step=20)
    chosen, others, why = choose_main([load_run(ref), load_run(main)])
    assert chosen.root == main and [o.root for o in others] == [ref]
    assert "ref-rtx5090 (es la referencia de los ejercicios: una comparación)" in why


def test_a_sweep_never_mixes_recipes_and_retrains_only_what_the_change_touches(runs, recorder, monkeypatch):
    from labs.exercises import student, sweep

    profile = get_profile("ci")
    save_recipe(profile, learning_rate=2e-5, beta=0.1)
    sweep_exercise("E2", profile, runs)
    assert sorted(recorder()) == ["e2-ci-solo-formato", "ref-ci"]
    # the student rewrites correctness_reward: the reference trained the old one, E2's variant never trains it
    def correctness_reward(completions, answer, **kwargs):  # the student's second version
        return [1.0 if str(g) in c[0]["content"] else 0.0 for c, g in zip(completions, answer)]

    student_rewards.save([correctness_reward, format_reward, soft_format_reward], echo=lambda _: None)
    variants = student.saved_variants("E2", profile)
    with pytest.raises(sweep.SweepError) as err:
        sweep.run_sweep(variants, profile, runs_root=runs, echo=lambda _: None)
    text = str(err.value)
    assert "ref-ci ya terminó, pero entrenó otra receta" in text and "recompensas: correctness_reward de la carpeta" in text
    assert re.search(r"python -m labs sweep E2.* --rehacer-distintas", text)
    # the notebook says the same instead of reading the mixed folders (off the ci smoke test, which retrains here)
    with monkeypatch.context() as m:
        m.setattr(sweep, "is_smoke_test", lambda _: False)
        with pytest.raises(sweep.SweepError, match="--rehacer-distintas"):
            sweep.read_or_run("E2", variants, profile, runs_root=runs, echo=lambda _: None)
    result = sweep.run_sweep(variants, profile, runs_root=runs, echo=lambda _: None,
                             set_aside=True)
    assert [r.state for r in result.results] == [sweep.FINISHED, sweep.SKIPPED]  # only the reference retrains
    assert sorted(recorder()) == ["e2-ci-solo-formato", "ref-ci", "ref-ci"]
    assert (runs / "ref-ci-otra-receta-1" / rf.RUN_JSON).exists()  # set aside, not deleted
    now = recipe_identity.of_record(rf.read_json(runs / "ref-ci" / rf.RUN_JSON))
    assert now == recipe_identity.saved(profile)


def test_l72_never_trains_the_main_run_before_the_recipe_is_saved(runs, monkeypatch):
    """L7.2's untouched Run All (ci): no saved recipe, so no ``python -m labs l71`` child; the cell says what to do."""
    from labs.l72 import child_runs

    started = []
    monkeypatch.setattr(child_runs, "run_l71_in_subprocess", lambda *a, **k: started.append(a) or runs / "l71-ci")
    monkeypatch.setattr(child_runs, "prime_format_pass_in_subprocess", lambda *a, **k: None)
    said = []
    assert child_runs.ensure_l71_run("ci", show=said.append) is None and started == []
    assert "sección 1" in said[-1] and "sección 3" in said[-1] and "cuaderno L7.1" in said[-1]
    save_recipe(get_profile("ci"))
    assert child_runs.ensure_l71_run("ci", show=said.append) == runs / "l71-ci" and len(started) == 1


def test_ensure_l71_run_reuses_the_finished_run_and_names_one_of_another_recipe(runs, monkeypatch):
    """L7.2's cell with ENTRENAR_EN_CPU = True: an L7.1 run of another recipe is named with what differs and the
    saved recipe trains; once that run is finished the cell reuses it and starts nothing."""
    from labs.l72 import child_runs

    started = []
    monkeypatch.setattr(child_runs, "run_l71_in_subprocess", lambda *a, **k: started.append(a) or runs / "l71-ci")
    monkeypatch.setattr(child_runs, "prime_format_pass_in_subprocess", lambda *a, **k: None)
    profile = get_profile("ci")
    save_recipe(profile, beta=0.2)
    recipe_recorder.write_finished(runs / "l71-ci-curso", profile, "L7.1", reward_functions(REWARD_NAMES))
    said = []
    assert child_runs.ensure_l71_run("ci", show=said.append) == runs / "l71-ci" and len(started) == 1
    assert "l71-ci-curso entrenó otra receta" in said[0] and "beta: l71-ci-curso 0.04" in said[0]
    recipe_recorder.write_finished(runs / "l71-ci", recipe_identity.saved_profile(profile), "L7.1",
                                   recipe_identity.saved_rewards())
    said.clear()
    assert child_runs.ensure_l71_run("ci", show=said.append) == runs / "l71-ci" and len(started) == 1
    assert said == [f"[l71] Uso el run de L7.1 que ya existe: {runs / 'l71-ci'}"]


def test_the_l72_comparison_names_an_l71_run_of_another_recipe_on_a_gpu_profile(runs):
    """rtx5090: no finished L7.1 run of the saved recipe, one of another recipe: the cell says which and what
    differs, then the terminal command, and compares with nothing."""
    from labs.l72 import demo

    profile = get_profile("rtx5090")
    save_recipe(profile, learning_rate=profile.learning_rate * 2)
    recipe_recorder.write_finished(runs / "l71-rtx5090-viejo", profile, "L7.1", reward_functions(REWARD_NAMES))
    said = []
    assert demo.l71_reference(profile, show=said.append) is None
    assert len(said) == 2 and "l71-rtx5090-viejo entrenó otra receta" in said[0] and "learning_rate" in said[0]
    assert said[1].startswith("No hay un run terminado de L7.1 con tu perfil rtx5090 y tu receta")


def test_e4_trains_the_recipe_plus_the_students_reward_in_the_notebook_and_the_terminal(runs, recorder, monkeypatch):
    import shlex
    from pathlib import Path

    import recipe_recorder

    from labs import l71
    from labs.exercises import e4

    profile = get_profile("ci")
    saved = save_recipe(profile, learning_rate=2e-5, beta=0.1)
    own = f"{Path(__file__).parent / 'data' / 'recompensa_alumno.py'}:razonamiento_con_cuentas"
    names = [*REWARD_NAMES, own]
    monkeypatch.setattr(l71, "run_lab", recipe_recorder.run_lab)
    here = e4.train_or_read(profile, names, reward_functions(names), runs_root=runs, echo=lambda _: None)
    trained = recipe_identity.of_record(rf.read_json(here / rf.RUN_JSON))
    assert recipe_identity.differences_es(trained, saved) == [
        "recompensas: razonamiento_con_cuentas está en la carpeta, no en tu receta"]
    # the terminal's command trains the same recipe (the recorder stands in for training)
    (here / rf.STATUS_JSON).unlink()
    words = shlex.split(e4.terminal_command(profile, names, reward_functions(names), runs))
    assert l71.main(words[4:]) == 0
    assert recipe_identity.of_record(rf.read_json(here / rf.RUN_JSON)) == trained


@pytest.mark.cpu_stack  # open_run checks the machine for a CPU profile: the GPU stack's vLLM refuses it
def test_the_l71_notebook_opens_its_run_with_the_saved_recipe(runs):
    """The notebook trains where the terminal would: its Lab's profile and rewards are the saved recipe, so run.json's
    profile (what E1-E3's reference and L7.2 match) says what it trains."""
    from labs.l71 import open_run

    profile = get_profile("ci")
    saved = save_recipe(profile, learning_rate=2e-5, beta=0.1)
    lab = open_run(profile, echo=lambda _: None)  # no run yet: on a CPU profile it trains here (nothing loads yet)
    assert recipe_identity.of_run(lab.profile, lab.reward_funcs) == saved
    assert lab.settings_from["values"] == {"learning_rate": 2e-5, "beta": 0.1}


def test_a_notebook_config_change_updates_the_recorded_recipe(runs):
    """The notebook's own GRPOConfig (its learning rate, and keys that are no profile field, such as vLLM's context
    length) reaches run.json's recipe; only the lesson's knobs are part of it."""
    from types import SimpleNamespace

    from labs.l71.lab import Lab, new_run, write_run_json
    from labs.training import recipe

    profile = get_profile("ci")
    run = new_run(profile)
    write_run_json(run, profile, "L7.1", reward_functions(), "modelo")
    kwargs = recipe.grpo_config_kwargs(profile, str(run.checkpoints))
    assert "vllm_max_model_length" in kwargs and "vllm_max_model_length" not in profile.__dataclass_fields__
    args = SimpleNamespace(**{**kwargs, "learning_rate": 2e-5, "vllm_max_model_length": kwargs["vllm_max_model_length"] + 8})
    lab = SimpleNamespace(profile=profile, run=run, resumed=False, reward_funcs=reward_functions(), accept_changes=False)
    Lab.use_trainer(lab, SimpleNamespace(args=args, processing_class=None))
    record = rf.read_json(run.path(rf.RUN_JSON))
    assert record["recipe"] == recipe_identity.of_run(profile.replace(learning_rate=2e-5), reward_functions())


def test_e4_trains_again_when_the_recipe_changes(runs):
    """E4 is the recipe plus the student's reward: a finished E4 folder of an older recipe is not read as this one
    (its name named only the student's reward, so a new learning rate read the old run)."""
    from pathlib import Path

    from labs.exercises import e4
    from rewards import REWARD_NAMES, reward_functions

    profile = get_profile("ci")
    own = Path(__file__).resolve().parent / "data" / "recompensa_alumno.py"
    funcs = reward_functions([*REWARD_NAMES, f"{own}:razonamiento_con_cuentas"])
    save_recipe(profile)
    first = e4.run_name(profile, funcs)
    assert e4.run_name(profile, funcs) == first  # the same recipe: the same folder, read when finished
    save_recipe(profile, learning_rate=2e-5, beta=0.1)
    assert e4.run_name(profile, funcs) != first
