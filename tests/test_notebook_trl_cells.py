"""The TRL and Unsloth calls the L7.1 and L7.2 notebooks write in their own cells stay the recipe's.

The notebooks build ``GRPOConfig(...)`` and ``GRPOTrainer(...)`` in plain sight (in L7.1 the student writes
them: ``mi_config`` and ``argumentos_trainer``); the values come from the profile through
``recipe.grpo_config_kwargs``, with the lesson's knobs written by name. These tests
fail if a cell holds a second copy of a value (a literal instead of the profile's field), if its config
differs from the recipe's, or if the trainer loses its run-folder callbacks or its resume and failure
handling.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from labs.core.profiles import get_profile
from labs.core.runfolder import RunFolder
from labs.training import recipe

NOTEBOOKS = Path(__file__).resolve().parent.parent / "sources"


def cell(notebook: str, marker: str) -> str:
    cells = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]
    found = ["".join(c["source"]) for c in cells if c["cell_type"] == "code" and marker in "".join(c["source"])]
    assert len(found) == 1, f"{notebook}: {len(found)} code cells contain {marker!r}"
    return found[0]


def calls(source: str, name: str) -> list[ast.Call]:
    """Calls of ``name`` (``f`` or ``obj.f``) in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            dotted = f.id if isinstance(f, ast.Name) else (
                f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None)
            if dotted == name:
                out.append(node)
    return out


def test_l71_config_cell_writes_the_lessons_knobs_by_name_and_the_rest_from_the_recipe():
    from labs.l71 import settings

    source = cell("L7_1_grpo_trl_vllm.ipynb", "def mi_config(")
    (config,) = calls(source, "GRPOConfig")
    shown = [kw.arg for kw in config.keywords if kw.arg]
    assert sorted(shown) == sorted(settings.LESSON_KNOBS)  # every lesson knob, once, and nothing else by name
    assert "max_prompt_length" not in source
    (rest,) = [kw.value for kw in config.keywords if kw.arg is None]  # output, device, logging, vLLM: the recipe's
    assert ast.unparse(rest) == "settings.rest_of_recipe(p, output_dir)"
    # the student chooses the values: they are not the profile's fields copied one by one
    copied = [kw.arg for kw in config.keywords if kw.arg and ast.unparse(kw.value) == f"p.{kw.arg}"]
    assert len(copied) < len(settings.LESSON_KNOBS) // 2, copied


@pytest.mark.parametrize("name", ["ci", "cpu"])
def test_l71_config_cell_saves_the_chosen_values_which_keep_the_lessons_rules(name, tmp_path, monkeypatch):
    from IPython.display import Markdown
    from trl import GRPOConfig

    from labs import l71
    from labs.l71 import settings

    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    profile = get_profile(name)
    shown = []
    namespace = {"GRPOConfig": GRPOConfig, "settings": settings, "recipe": recipe, "l71": l71, "profile": profile,
                 "Markdown": Markdown, "display": shown.append}
    exec(cell("L7_1_grpo_trl_vllm.ipynb", "def mi_config("), namespace)
    exec(cell("L7_1_grpo_trl_vllm.ipynb", "settings.save(config"), namespace)
    config, chosen = namespace["config"], namespace["p"]
    knobs = settings.knobs_of(config)
    assert settings.problems(knobs, profile) == {}
    assert {k: getattr(chosen, k) for k in settings.LESSON_KNOBS} == knobs  # section 6 trains the chosen values
    run = RunFolder(tmp_path / f"l71-{name}")
    expected = GRPOConfig(**{**recipe.grpo_config_kwargs(profile, str(run.checkpoints)), **knobs})
    assert config.to_dict() == expected.to_dict()  # the rest is the recipe's
    assert f"`{config.learning_rate}`" in shown[0].data  # the table shows the values in force
    saved = json.loads(settings.settings_path(profile).read_text())
    assert saved["values"] == knobs


def test_l71_trainer_arguments_keep_the_run_folder_callbacks():
    source = cell("L7_1_grpo_trl_vllm.ipynb", "def argumentos_trainer(")
    (arguments,) = calls(source, "dict")
    keywords = {kw.arg: ast.unparse(kw.value) for kw in arguments.keywords}
    assert {"model", "reward_funcs", "args", "train_dataset", "callbacks", "peft_config"} <= set(keywords)
    assert keywords["callbacks"] == "recipe.run_folder_callbacks(run)"
    assert keywords["train_dataset"] == "data.to_dataset(filas)"
    trainer_cell = cell("L7_1_grpo_trl_vllm.ipynb", "trainer = GRPOTrainer(")
    (trainer,) = calls(trainer_cell, "GRPOTrainer")
    (unpacked,) = [kw.value for kw in trainer.keywords if kw.arg is None]
    assert ast.unparse(unpacked) == (
        "argumentos_trainer(p, lab.base_model, lab.reward_funcs, config, splits['train'], lab.run)")
    assert calls(trainer_cell, "recipe.prepare_environment") and calls(trainer_cell, "lab.use_trainer")


@pytest.mark.parametrize("notebook", ["L7_1_grpo_trl_vllm.ipynb"])
def test_training_resumes_and_records_failures(notebook):
    source = cell(notebook, "trainer.train(")
    tree = ast.parse(source)
    withs = [n for n in ast.walk(tree) if isinstance(n, ast.With)]
    guarded = [w for w in withs if ast.unparse(w.items[0].context_expr).startswith("recipe.recorded_training(")]
    assert guarded and any("trainer.train(resume_from_checkpoint=desde)" in ast.unparse(w) for w in guarded)
    assert calls(source, "recipe.resume_point")


# L7.2's Unsloth calls are the student's own cells, checked against the lab's keywords: tests/test_l72_demo.py.


def test_a_knob_changed_in_the_cell_is_told_apart_from_the_profile():
    from trl import GRPOConfig

    from labs.l71.lab import config_changes

    kwargs = recipe.grpo_config_kwargs(get_profile("ci", report_to=("wandb",)), "out")
    assert config_changes(kwargs, GRPOConfig(**kwargs)) == {}  # TRL keeps every value as given
    changed = GRPOConfig(**dict(kwargs, learning_rate=2e-5, beta=0.0))
    assert config_changes(kwargs, changed) == {"learning_rate": (kwargs["learning_rate"], 2e-5), "beta": (kwargs["beta"], 0.0)}
