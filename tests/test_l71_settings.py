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
    path = settings.save(config(profile, tmp_path, learning_rate=3e-5, beta=0.1), profile, echo=lines.append)
    assert path == runs / "_ajustes" / "l71-ci.json"
    assert "learning_rate=3e-05 (perfil: " in lines[0] and "python -m labs l71" in lines[1] and "--profile" not in lines[1]
    overrides, source = settings.load(profile, echo=lines.append)
    assert overrides == {"learning_rate": 3e-5, "beta": 0.1}
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
