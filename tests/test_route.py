"""The student's route on a 5090: order, where each step runs, planned hours and disk labelled as planned."""

import pytest

from labs.core.profiles import get_profile
from labs.route import NOTEBOOK, TERMINAL, render_es, route
from labs.vram.timeplan import LABEL_ES, time_plan


@pytest.fixture(scope="module")
def steps():
    return route()


def position(steps, text):
    return next(i for i, s in enumerate(steps) if text in s.what)


def test_the_order_of_the_route(steps):
    assert position(steps, "labs rehearse") == position(steps, "labs doctor") + 1  # the rehearsal right after the doctor
    assert position(steps, "00_empieza") < position(steps, "labs doctor") < position(steps, "labs l71")
    # L7.1's sections 1-3 (the rewards and the GRPOConfig that train) before the terminal run, the rest after it
    l71 = [i for i, s in enumerate(steps) if "L7_1_" in s.what]
    assert len(l71) == 2 and l71[0] < position(steps, "labs l71") < l71[1] < position(steps, "labs l72")
    assert "secciones 1-3" in steps[l71[0]].why and position(steps, "labs l72") < position(steps, "L7_2_")
    for name, notebook in (("E1", "E1_"), ("E2", "E2_"), ("E3", "E3_")):
        # the notebook up to the student's variants, the sweep that trains them, the notebook's comparison
        visits = [i for i, s in enumerate(steps) if notebook in s.what]
        assert len(visits) == 2 and visits[0] < position(steps, f"labs sweep {name}") < visits[1]
    assert steps[-1].what == "C2b_rubrica.ipynb"


def _next_steps_order(root, monkeypatch) -> list[str]:
    """What ``python -m labs next`` asks for, in order, as the student does each thing it asks in a fresh run area:
    "rehearse", "profile" (save it), "recipe" (L7.1's sections 1-3), "l71"."""
    from test_recipe_identity import save_recipe

    from labs.core import profile_choice
    from labs.core.runfolder import RunFolder
    from labs.l71 import recipe_identity
    from labs.l71.lab import write_run_json
    from labs.route.next_step import ACCEPT_COMMAND, next_step

    monkeypatch.setenv("COURSE_RUNS", str(root))
    base = get_profile("rtx5090-base")

    def rehearse():  # what a rehearsal leaves: its record, and its L7.1 run of the recipe saved then, on its budget
        (root / "rehearsal-gpu").mkdir(exist_ok=True)
        (root / "rehearsal-gpu" / "rehearsal.json").write_text("{}")
        write_run_json(RunFolder(root / "rehearsal-gpu" / "l71"), recipe_identity.saved_profile(base).replace(max_steps=3),
                       "L7.1", recipe_identity.saved_rewards(), "modelo")

    done = {"rehearse": rehearse, "profile": lambda: profile_choice.save_choice(base.name, root=root),
            "recipe": lambda: save_recipe(base, learning_rate=8e-6)}
    order: list[str] = []
    for _ in range(8):
        step, why = next_step(root)
        action = step[0] if step else "profile" if ACCEPT_COMMAND in why else "recipe" if "sección" in why else why
        order.append(action)
        if action == "l71":
            return order
        done[action]()
    raise AssertionError(f"next never reached L7.1: {order}")


def test_the_listed_route_rehearses_the_recipe_after_it_is_written_as_next_does(steps, tmp_path, monkeypatch):
    """Issue 51: ``next`` trains nothing before the recipe is saved and rehearses again once it is (the recipe changed
    since the first rehearsal); the listed route rehearsed only at step 4, before the recipe existed (step 7), and
    went on to L7.1 with a recipe nothing had rehearsed. The listed order is ``next``'s order."""
    names = {"python -m labs rehearse": "rehearse", "python -m labs profile --accept": "profile", "python -m labs l71": "l71"}
    listed = [names.get(s.what) or ("recipe" if "L7_1_" in s.what and "secciones 1-3" in s.why else None) for s in steps]
    listed = [a for a in listed if a]
    assert listed[:listed.index("l71") + 1] == _next_steps_order(tmp_path, monkeypatch) == [
        "rehearse", "profile", "recipe", "rehearse", "l71"]


def test_what_trains_runs_in_a_terminal_and_notebooks_only_read(steps):
    for s in steps:
        if s.hours is not None:
            assert s.where == TERMINAL and s.hours > 0.5, s
        if s.what.endswith(".ipynb"):
            assert s.where == NOTEBOOK and s.hours is None
    gpu = get_profile("rtx5090")
    l71 = steps[position(steps, "labs l71")]
    assert l71.hours == pytest.approx(time_plan(gpu).hours)
    assert l71.disk_gb > time_plan(gpu).checkpoint_gb  # plus the first download of the model


def test_kernels_that_hold_the_gpu_are_shut_down(steps):
    for notebook in ("L7_1_", "L7_2_", "E3_"):
        assert "Shut Down Kernel" in [s for s in steps if notebook in s.what][-1].after


def test_the_rendered_route_labels_every_figure_as_planned(steps):
    text = render_es(steps)
    assert text.count(LABEL_ES) == sum(s.hours is not None for s in steps) + 1  # each step and the total
    assert "python -m labs rehearse" in text and "[terminal] python -m labs sweep E2  " in text


def test_the_route_follows_the_saved_profile_and_keeps_l72_on_the_instruct_one(tmp_path, monkeypatch):
    from labs.core import profile_choice
    from labs.route import outlook_es, route_profile

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    monkeypatch.setenv("COURSE_PROFILE", "ci")
    profile, why = route_profile()  # nothing saved: the route of the profile the outlook recommends
    assert profile.name == "rtx5090-base" and "python -m labs profile --accept" in why
    assert f"la ruta recomienda {profile.name} para el run principal" in outlook_es()
    profile_choice.save_choice("rtx5090-base")
    profile, why = route_profile()
    assert profile.name == "rtx5090-base" and str(tmp_path) in why
    steps = route(profile)
    assert steps[position(steps, "labs l71")].hours == pytest.approx(time_plan(profile).hours)
    l72 = steps[position(steps, "labs l72")]  # L7.2 stays on the instruct profile, which its command picks itself
    assert "(rtx5090, lo elige la orden)" in l72.why
    assert l72.hours == pytest.approx(time_plan(get_profile("rtx5090"), "unsloth").hours)
    assert position(steps, "labs profile --accept") == position(steps, "labs rehearse") + 1
    assert "--profile" not in render_es(steps)  # every command uses the saved profile (issue 33, item 4)


def test_the_outlook_before_any_rehearsal_comes_from_the_rules(tmp_path, monkeypatch):
    from labs.core import ceiling
    from labs.route import outlook_es

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    text = outlook_es()
    assert "[rtx5090] Criterio 2" in text and "[rtx5090-base]" in text and "python -m labs rehearse" in text
    assert f"{ceiling.LENGTH_FULL_SHARE * 100:.0f} %" in text
    measured = outlook_es({"profile": "rtx5090", "base_holdout": {"n": 200, "accuracy": 0.95, "mean_length": 300.0}})
    assert measured.startswith("Qué puede mostrar cada perfil (medido en el ensayo)") and "Recomendación: rtx5090-base" in measured


def _readme_route_commands() -> list[str]:
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    commands = []
    for line in readme.splitlines():
        if re.match(r"\| \w+ \| terminal \|", line):
            commands += [c for c in re.findall(r"`([^`]+)`", line) if c.startswith(("python -m labs", "make "))]
    return commands


def test_the_readme_route_table_has_labs_routes_commands(steps):
    """Issue 33, item 4: the README's table quotes labs.route's terminal commands, in order, and names no profile."""
    assert _readme_route_commands() == [s.what.split(" (")[0] for s in steps if s.where == TERMINAL]


def test_no_command_a_student_copies_names_a_5090_profile(tmp_path, monkeypatch):
    """Issue 33, item 4: a student on rtx5090-base who copies a command from the README or a notebook must not
    train rtx5090 (the opening of the L7.1 notebook and the README's route printed --profile rtx5090)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    texts = {p.name: p.read_text(encoding="utf-8") for p in [root / "README.md", *sorted((root / "sources").glob("*.ipynb")),
                                                             *sorted((root / "notebooks").glob("*.ipynb"))]}
    lab_run = re.compile(r"python -m labs (l71|l72|sweep)\b[^`\n\"]*--profile[ =]rtx5090")
    assert {name: lab_run.findall(text) for name, text in texts.items() if lab_run.search(text)} == {}
    from labs.core.profiles import student_command
    from labs.l71.notebook import terminal_command

    monkeypatch.setenv("COURSE_PROFILE", "rtx5090-base")  # the profile in use, as a saved choice makes it
    base = get_profile("rtx5090-base")
    assert terminal_command(base) == student_command("l71", base) == "python -m labs l71"
    assert student_command("l71", "rtx5090") == "python -m labs l71 --profile rtx5090"  # another one is named


def test_the_next_step_follows_the_run_area(tmp_path, monkeypatch):
    """`make` on a GPU (`python -m labs next`): the rehearsal first, then the student's choice, then their recipe
    (sections 1-3 of the L7.1 notebook; nothing trains the course's in its place), the rehearsal again when the recipe
    changed since the last one (issue 51, item 4), then L7.1 on it."""
    from test_recipe_identity import save_recipe

    from labs.core import profile_choice
    from labs.core.runfolder import RunFolder
    from labs.l71 import recipe_identity
    from labs.l71.lab import write_run_json
    from labs.route.next_step import ACCEPT_COMMAND, next_step

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    assert next_step(tmp_path)[0] == ["rehearse"]
    (tmp_path / "rehearsal-gpu").mkdir()
    (tmp_path / "rehearsal-gpu" / "rehearsal.json").write_text("{}")
    step, why = next_step(tmp_path)
    assert step == [] and ACCEPT_COMMAND in why  # nothing trains a profile the student has not chosen
    profile_choice.save_choice("rtx5090-base", root=tmp_path)
    step, why = next_step(tmp_path)
    assert step == [] and "la sección 1" in why and "la sección 3" in why and "rtx5090-base" in why
    base = get_profile("rtx5090-base")
    # the rehearsal tried the course's recipe (before any was saved), on its budget
    write_run_json(RunFolder(tmp_path / "rehearsal-gpu" / "l71"), base.replace(max_steps=3, max_completion_length=256),
                   "L7.1", recipe_identity.saved_rewards(), "modelo")
    save_recipe(base, learning_rate=8e-6, loss_type="dr_grpo")
    step, why = next_step(tmp_path)
    assert step == ["rehearse"] and "learning_rate" in why and "loss_type" in why and "recompensas" in why
    assert "max_steps" not in why  # the rehearsal's budget is no change of the recipe
    write_run_json(RunFolder(tmp_path / "rehearsal-gpu" / "l71"), recipe_identity.saved_profile(base).replace(max_steps=3),
                   "L7.1", recipe_identity.saved_rewards(), "modelo")
    step, why = next_step(tmp_path)
    assert step == ["l71"] and "rtx5090-base" in why


def test_a_failed_rehearsal_is_the_next_step_again_not_a_profile_to_save(tmp_path):
    """A rehearsal that failed recommends nothing: `make` runs it again, saying why the last one failed."""
    import json

    from labs.route.next_step import ACCEPT_COMMAND, next_step

    (tmp_path / "rehearsal-gpu").mkdir()
    failure = {"kind": "error", "message_es": "El entrenamiento falló con NameError."}
    (tmp_path / "rehearsal-gpu" / "rehearsal.json").write_text(json.dumps({"status": "failed", "failure": failure}))
    step, why = next_step(tmp_path)
    assert step == ["rehearse"] and "falló: El entrenamiento falló con NameError." in why and ACCEPT_COMMAND not in why
    (tmp_path / "rehearsal-gpu" / "rehearsal.json").write_text(json.dumps({"status": "ok", "failure": None}))
    assert next_step(tmp_path)[0] == []


def test_next_exits_with_its_steps_code_and_says_why_in_spanish(tmp_path, monkeypatch, capfd):
    """`make` on a GPU runs `python -m labs next`: a step that fails must stop make, with the reason in Spanish.
    The real step runs in its child process (the rehearsal, refusing an unknown profile before anything loads)."""
    from labs.route import next_step

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    assert next_step.main(["--profile", "no-existe"]) == 2
    err = capfd.readouterr().err
    assert "No existe el perfil 'no-existe'" in err
    assert "El paso python -m labs rehearse --profile no-existe falló (código de salida 2)" in err
