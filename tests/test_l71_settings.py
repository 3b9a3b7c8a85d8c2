"""The L7.1 notebook's settings file: what it saves, what ``python -m labs l71`` loads, and bad files."""

import json

import pytest
from trl import GRPOConfig

from labs.core.profiles import get_profile
from labs.core.runfolder import STATE_FINISHED, RunFolder
from labs.l71 import settings


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    return tmp_path


def config(profile, tmp_path, **knobs):
    kwargs = {**settings.rest_of_recipe(profile, str(tmp_path / "out")),
              **{k: getattr(profile, k) for k in settings.LESSON_KNOBS}, **knobs}
    return GRPOConfig(**kwargs)


def test_rest_of_recipe_and_knobs_make_the_recipes_config(tmp_path):
    from labs.training import recipe

    profile = get_profile("ci")
    rest = settings.rest_of_recipe(profile, "out")
    assert not set(rest) & set(settings.LESSON_KNOBS)
    assert set(settings.LESSON_KNOBS) <= set(recipe.grpo_config_kwargs(profile, "out"))
    assert config(profile, tmp_path).to_dict() == GRPOConfig(**recipe.grpo_config_kwargs(profile, str(tmp_path / "out"))).to_dict()


def test_saved_knobs_come_back_as_overrides(runs, tmp_path):
    profile = get_profile("ci")
    lines = []
    path = settings.save(config(profile, tmp_path, learning_rate=1.5e-5, beta=0.1), profile, echo=lines.append)
    assert path == runs / "_ajustes" / "l71-ci.json"
    assert "learning_rate=1.5e-05 (perfil: " in lines[0] and "python -m labs l71" in lines[1] and "--profile" not in lines[1]
    overrides, source = settings.load(profile, echo=lines.append)
    assert overrides == {"learning_rate": 1.5e-5, "beta": 0.1}
    assert source["file"] == str(path) and source["values"] == overrides and source["source"] == settings.SOURCE
    assert "[ajustes] Uso tus ajustes" in lines[-1]
    assert settings.load(get_profile("cpu")) == ({}, None)  # one file per profile


def test_the_profiles_own_values_override_nothing(runs, tmp_path):
    profile = get_profile("ci")
    settings.save(config(profile, tmp_path), profile, echo=lambda _: None)
    overrides, source = settings.load(profile)
    assert overrides == {} and source["values"] == {}


def test_an_edit_after_a_finished_run_says_it_needs_fresh(runs, tmp_path):
    profile = get_profile("ci")
    run = RunFolder(runs / "l71-ci")
    run.write_status(STATE_FINISHED, profile.max_steps, profile.max_steps)
    lines = []
    settings.save(config(profile, tmp_path, max_steps=7), profile, run, echo=lines.append)
    assert "ya terminó" in lines[1] and "python -m labs l71 --fresh" in lines[1]


@pytest.mark.parametrize("content, expected", [
    ("{not json", "No puedo leer"),
    (json.dumps({"values": {"max_prompt_length": 512}}), "no acepta: max_prompt_length"),
    (json.dumps({"values": {"max_steps": 2.5}}), "max_steps=2.5 debe ser un número entero"),
    (json.dumps({"values": {"beta": "0.04"}}), "beta='0.04' debe ser un número"),
])
def test_a_bad_file_is_refused_in_spanish_and_left_alone(runs, content, expected):
    path = settings.settings_path("ci")
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(ValueError, match=expected):
        settings.load(get_profile("ci"))
    assert path.read_text() == content


# --- the lesson's rules for the values the student chooses (labs.l71.settings.problems)

from labs.core.profiles import PROFILES  # noqa: E402


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_keeps_the_lessons_rules(name):
    assert settings.problems({}, get_profile(name)) == {}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_the_notebooks_batch_demo_breaks_the_rule_on_every_profile(name):
    from labs.training.preflight import PreflightError, preflight

    profile = get_profile(name)
    broken = settings.broken_batch(profile)
    assert set(settings.problems(broken, profile)) == {"per_device_train_batch_size"}
    with pytest.raises(PreflightError, match="no es múltiplo de num_generations"):
        preflight(profile.replace(**broken), None, columns=("prompt", "answer", "id"))


def test_the_old_demo_showed_nothing_on_the_5090():
    """Why the demo computes its batch: num_generations + 2 fills whole groups on rtx5090 (10 x 4 = 40, five of 8)."""
    profile = get_profile("rtx5090")
    assert settings.problems({"per_device_train_batch_size": profile.num_generations + 2}, profile) == {}


@pytest.mark.parametrize("name, values, knob", [
    ("ci", {"per_device_train_batch_size": 6}, "per_device_train_batch_size"),
    ("ci", {"num_generations": 1, "per_device_train_batch_size": 1}, "num_generations"),
    ("ci", {"learning_rate": 2e-4}, "learning_rate"),  # the SFT rate
    ("rtx5090", {"learning_rate": 1e-6}, "learning_rate"),  # the lesson's full-weights rate, on LoRA
    ("cpu", {"learning_rate": 5e-5}, "learning_rate"),
    ("ci", {"beta": 0.0}, "beta"),
    ("ci", {"beta": 2.0}, "beta"),
    ("ci", {"max_completion_length": 8}, "max_completion_length"),
    ("cpu", {"max_completion_length": 1024}, "max_completion_length"),
    ("rtx5090", {"max_completion_length": 4096}, "max_completion_length"),  # the VRAM plan does not fit
    ("ci", {"logging_steps": 2, "max_steps": 3}, "logging_steps"),
    ("rtx5090", {"logging_steps": 5, "max_steps": 20}, "logging_steps"),  # 4 points: the rubric's trend needs 10
    ("cpu", {"logging_steps": 2}, "logging_steps"),  # 8 points
    ("ci", {"max_steps": 2.5}, "max_steps"),
])
def test_a_value_that_breaks_a_rule_gets_the_reason(name, values, knob):
    found = settings.problems(values, get_profile(name))
    assert knob in found and found[knob]
    assert "por ejemplo" not in found[knob] and f"{knob}=" not in found[knob]  # the reason, never the value to type


def test_a_value_outside_a_rule_is_not_saved_and_a_saved_one_is_refused_at_load(runs, tmp_path):
    profile = get_profile("ci")
    with pytest.raises(ValueError, match="learning_rate: El perfil ci entrena todos los pesos"):
        settings.save(config(profile, tmp_path, learning_rate=2e-4), profile, echo=lambda _: None)
    assert not settings.settings_path(profile).exists()  # nothing written
    path = settings.settings_path(profile)
    path.parent.mkdir(parents=True)
    content = json.dumps({"values": {"beta": 0.0}})
    path.write_text(content)
    with pytest.raises(ValueError, match="rompen reglas de la lección(.|\n)*beta: (.|\n)*--sin-ajustes"):
        settings.load(profile)
    assert path.read_text() == content


@pytest.mark.parametrize("name", ["cpu", "ci", "rtx5090", "rtx5090-base"])
def test_the_logged_points_the_settings_accept_are_enough_for_the_rubrics_trend(name):
    """One rule: a run the settings accept logs what C2b's trend tests need (the ci smoke profile: its own two)."""
    from labs.core.stats import MIN_TREND_POINTS

    profile = get_profile(name)
    fewest = settings.fewest_logged_points(profile)
    assert fewest == min(MIN_TREND_POINTS, profile.max_steps // profile.logging_steps)
    at_edge = {"max_steps": profile.max_steps, "logging_steps": profile.max_steps // fewest}
    assert "logging_steps" not in settings.problems(at_edge, profile)
    assert "logging_steps" in settings.problems({**at_edge, "logging_steps": profile.max_steps // (fewest - 1) + 1}, profile)


def test_settings_saved_under_another_profile_are_named_not_silently_ignored(runs, tmp_path):
    cpu = get_profile("cpu")
    settings.save(config(cpu, tmp_path, learning_rate=2e-5), cpu, echo=lambda _: None)
    said = []
    assert settings.load(get_profile("ci"), echo=said.append) == ({}, None)  # still not used: another profile
    assert len(said) == 1 and "No hay ajustes guardados para el perfil 'ci'" in said[0] and "'cpu'" in said[0]
    assert settings.load(cpu, echo=said.append)[0] == {"learning_rate": 2e-5}


# --- what L6 teaches the student to choose (issue 51, item 3)

L6_KNOBS = ("loss_type", "temperature", "scale_rewards", "epsilon")


def test_l6s_knobs_are_the_students_and_trls_own_names_and_defaults():
    """The four knobs are GRPOConfig's own (TRL 1.16 here; tests/test_gpu_wheels.py reads TRL 1.15's wheel for the
    recipe's keywords), the profiles' values are TRL's defaults, and the recipe passes them."""
    import dataclasses

    from labs.training import recipe

    fields = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    profile = get_profile("ci")
    assert set(L6_KNOBS) <= set(settings.LESSON_KNOBS)
    for knob in L6_KNOBS:
        assert fields[knob] == getattr(profile, knob), knob
        assert recipe.grpo_config_kwargs(profile, "out")[knob] == getattr(profile, knob)
    for knob, names in settings.TEXT_KNOBS.items():
        for name in names:  # every name the lesson teaches is one TRL takes
            assert getattr(GRPOConfig(output_dir="o", use_cpu=True, bf16=False, **{knob: name}), knob) == name


def test_a_recipe_with_dr_grpo_and_its_own_temperature_is_saved_and_loaded(runs, tmp_path):
    profile = get_profile("ci")
    chosen = dict(loss_type="dr_grpo", temperature=0.8, scale_rewards="none", epsilon=0.3)
    settings.save(config(profile, tmp_path, **chosen), profile, echo=lambda _: None)
    overrides, source = settings.load(profile, echo=lambda _: None)
    assert overrides == chosen and source["values"] == chosen


@pytest.mark.parametrize("values, knob", [
    ({"loss_type": "cispo"}, "loss_type"),
    ({"loss_type": 1}, "loss_type"),
    ({"scale_rewards": "std"}, "scale_rewards"),
    ({"scale_rewards": True}, "scale_rewards"),
    ({"temperature": 0.0}, "temperature"),
    ({"temperature": 3.0}, "temperature"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": 0.9}, "epsilon"),
])
def test_an_l6_value_that_breaks_a_rule_gets_the_reason_never_the_value(values, knob):
    found = settings.problems(values, get_profile("ci"))
    assert set(found) == {knob} and found[knob]
    assert "por ejemplo" not in found[knob] and f"{knob}=" not in found[knob]


def test_a_saved_l6_knob_of_the_wrong_kind_is_refused_at_load(runs):
    path = settings.settings_path("ci")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"values": {"loss_type": 3}}))
    with pytest.raises(ValueError, match="loss_type se escribe con su nombre entre comillas"):
        settings.load(get_profile("ci"), echo=lambda _: None)
    assert json.loads(path.read_text()) == {"values": {"loss_type": 3}}


@pytest.mark.parametrize("knob, value", [("loss_type", "dr_grpo"), ("temperature", 0.8), ("scale_rewards", "batch"),
                                         ("epsilon", 0.3)])
def test_each_l6_knob_is_part_of_the_recipes_identity(knob, value):
    from labs.l71 import recipe_identity

    profile = get_profile("ci")
    base = recipe_identity.of_run(profile, [])
    other = recipe_identity.of_run(profile.replace(**{knob: value}), [])
    assert base["id"] != other["id"]
    assert [line.split(":")[0] for line in recipe_identity.differences_es(other, base)] == [knob]


def test_a_run_json_from_before_the_l6_knobs_keeps_its_identity_with_trls_defaults():
    from labs.l71 import recipe_identity

    profile = get_profile("ci")
    now = recipe_identity.of_run(profile, [])
    old = {**now, "settings": {k: v for k, v in now["settings"].items() if k not in L6_KNOBS}, "id": "antiguo"}
    assert recipe_identity.of_record({"recipe": old, "profile": {"name": "ci"}})["id"] == now["id"]
