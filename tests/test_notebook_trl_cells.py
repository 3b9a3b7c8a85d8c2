"""The TRL and Unsloth calls the L7.1 and L7.2 notebooks write in their own cells stay the recipe's.

The notebooks build ``GRPOConfig(...)`` and ``GRPOTrainer(...)`` in plain sight; the values come from the
profile through ``recipe.grpo_config_kwargs``, with the lesson's knobs rewritten by name. These tests
fail if a cell holds a second copy of a value (a literal instead of the profile's field), if its config
differs from the recipe's, or if the trainer loses its run-folder callbacks or its resume and failure
handling.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

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


def test_l71_config_cell_rewrites_knobs_from_the_profile_only():
    source = cell("L7_1_grpo_trl_vllm.ipynb", "GRPOConfig(**ajustes)")
    (update,) = calls(source, "ajustes.update")
    shown = [kw.arg for kw in update.keywords]
    assert {"num_generations", "learning_rate", "beta", "max_steps"} <= set(shown)
    assert set(shown) <= set(recipe.grpo_config_kwargs(get_profile("ci"), "x"))
    for kw in update.keywords:  # p.<the same name>: the profile's value, never a literal copy
        value = kw.value
        assert isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name), kw.arg
        assert (value.value.id, value.attr) == ("p", kw.arg), ast.unparse(kw)


@pytest.mark.parametrize("changes", [{}, {"learning_rate": 3e-6, "beta": 0.1, "max_steps": 7}])
def test_l71_config_cell_builds_the_recipes_config(changes, tmp_path):
    from IPython.display import Markdown
    from trl import GRPOConfig

    profile = get_profile("ci", **changes)
    run = RunFolder(tmp_path)
    shown = []
    namespace = {"recipe": recipe, "lab": SimpleNamespace(profile=profile, run=run), "Markdown": Markdown,
                 "display": shown.append}
    exec(cell("L7_1_grpo_trl_vllm.ipynb", "GRPOConfig(**ajustes)"), namespace)
    expected = GRPOConfig(**recipe.grpo_config_kwargs(profile, str(run.checkpoints)))
    assert namespace["config"].to_dict() == expected.to_dict()
    assert f"`{profile.learning_rate}`" in shown[0].data  # the table shows the values in force


@pytest.mark.parametrize("notebook, marker", [("L7_1_grpo_trl_vllm.ipynb", "trainer = GRPOTrainer(")])
def test_the_trainer_cell_passes_the_run_folder_callbacks(notebook, marker):
    (trainer,) = calls(cell(notebook, marker), "GRPOTrainer")
    keywords = {kw.arg: ast.unparse(kw.value) for kw in trainer.keywords}
    assert {"model", "reward_funcs", "args", "train_dataset", "callbacks"} <= set(keywords)
    assert keywords["callbacks"].startswith("recipe.run_folder_callbacks(")
    assert calls(cell(notebook, marker), "recipe.prepare_environment")


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
