"""The L7.1 notebook shares the terminal's run folder: a finished run is read, an unfinished one is not trained twice."""

import pytest

from labs.core import runfolder as rf
from labs.core.profiles import get_profile
from labs.l71 import RunNotReady, open_run

from rundirs import GOOD_HOLDOUT, history, make_run, paired_verdicts


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RUNS", str(tmp_path))
    return tmp_path


def test_a_finished_terminal_run_is_opened_read_only(runs, capsys):
    make_run(runs, "l71-cpu", metrics=history(20), max_steps=20, profile="cpu", verdicts=paired_verdicts(*GOOD_HOLDOUT))
    metrics = (runs / "l71-cpu" / rf.METRICS_JSONL).read_text()
    lab = open_run("cpu")
    assert lab.read_only and lab.run.root == runs / "l71-cpu"
    assert "Ya hay un run terminado" in capsys.readouterr().out
    assert lab.build_trainer() is None and lab.trainer is None
    lab.train()
    assert "no entreno otra vez" in capsys.readouterr().out
    lab.finish()  # writes only the report that was missing
    assert (lab.run.root / "grading" / "informe.md").is_file()
    assert (runs / "l71-cpu" / rf.METRICS_JSONL).read_text() == metrics and lab.run.is_finished()


def test_on_a_gpu_profile_an_unfinished_run_is_finished_in_the_terminal(runs):
    make_run(runs, "l71-rtx5090", metrics=history(120), max_steps=500, state=rf.STATE_RUNNING, step=120)
    with pytest.raises(RunNotReady) as err:
        open_run("rtx5090")
    text = str(err.value)
    assert "paso 120 de 500" in text and "python -m labs l71 --profile rtx5090" in text
    assert "planificado, no medido" in text and "ENTRENAR_AQUI = True" in text


def test_on_a_gpu_profile_without_a_run_the_notebook_says_the_command(runs):
    with pytest.raises(RunNotReady, match="Aún no hay ningún run del perfil 'rtx5090'.*python -m labs l71 --profile rtx5090"):
        open_run(get_profile("rtx5090"))


def test_the_notebook_says_what_to_do_instead_of_a_traceback(runs):
    """Section 4 of the untouched notebook on a GPU profile ended in a RunNotReady traceback; with ``avisar`` (what
    the notebook's cell passes) it prints the command and the later cells skip their work (``lab.opened``)."""
    said = []
    lab = open_run(get_profile("rtx5090"), echo=said.append, avisar=True)
    assert lab.opened is False and not lab.run.root.exists()
    assert "Aún no hay ningún run del perfil 'rtx5090'" in said[-1] and "python -m labs l71 --profile rtx5090" in said[-1]


def _save_settings(profile, tmp_path, **knobs):
    from trl import GRPOConfig

    from labs.l71 import settings

    kwargs = {**settings.rest_of_recipe(profile, str(tmp_path / "out")),
              **{k: getattr(profile, k) for k in settings.LESSON_KNOBS}, **knobs}
    return settings.save(GRPOConfig(**kwargs), profile, new_run_folder(profile), echo=print)


def new_run_folder(profile):
    from labs.l71 import new_run

    return new_run(profile)


def test_the_notebooks_settings_reach_the_terminal_and_a_finished_run_says_fresh(runs, tmp_path, capsys):
    from labs.l71 import main

    for name in ("l71-ci", "e1-ci"):  # finished: the command returns at once, it trains nothing
        make_run(runs, name, metrics=history(2), max_steps=2, profile="ci", verdicts=paired_verdicts(*GOOD_HOLDOUT))
    _save_settings(get_profile("ci"), tmp_path, learning_rate=1.5e-5)
    saved = capsys.readouterr().out
    assert "ya terminó" in saved and "python -m labs l71 --fresh" in saved  # the edit cannot apply (ci is the profile in use: not named)
    assert main(["--profile", "ci"]) == 0
    out = capsys.readouterr().out
    assert "[ajustes] Uso tus ajustes del cuaderno L7.1" in out and "learning_rate=1.5e-05" in out
    assert "ya terminó" in out and "--fresh" in out
    assert main(["--profile", "ci", "--sin-ajustes"]) == 0
    assert "[ajustes]" not in capsys.readouterr().out
    assert main(["--profile", "ci", "--lab", "E1"]) == 0  # E1-E3 reuse this door, and train the saved recipe too
    assert "[ajustes] Uso tus ajustes del cuaderno L7.1" in capsys.readouterr().out


def test_a_bad_settings_file_stops_the_terminal_with_a_spanish_message(runs, capsys):
    from labs.l71 import main, settings

    path = settings.settings_path("ci")
    path.parent.mkdir(parents=True)
    path.write_text('{"values": {"max_prompt_length": 512}}')
    assert main(["--profile", "ci"]) == 2
    assert "no acepta: max_prompt_length" in capsys.readouterr().err


@pytest.mark.parametrize("folder", ["sources", "notebooks"])
def test_the_errata_8_cell_prints_only_the_error(folder, monkeypatch, capsys):
    """Erratum 8 (GRPOConfig() without a GPU): the cell shows TRL's ValueError and the line about this process,
    nothing before them (transformers printed "[INFO] Running in WANDB offline mode" when the child inherited
    WANDB_MODE=offline, which `make` and the suite set)."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / folder / "L7_1_grpo_trl_vllm.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    source = next("".join(c["source"]) for c in cells if c["cell_type"] == "code" and "sin_gpu = " in "".join(c["source"]))
    monkeypatch.setenv("WANDB_MODE", "offline")
    exec(compile(source, f"{folder}/L7_1 errata 8", "exec"), {})
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("En este proceso:"), lines
    assert lines[0].startswith("ValueError:") or lines[0].startswith("Sin error"), lines


def test_a_finished_run_of_another_recipe_says_what_differs_and_the_command_that_retrains(runs):
    """Issue 51, item 4: the notebook read a finished run of another recipe as if it were the student's."""
    import recipe_recorder
    from test_recipe_identity import save_recipe

    from rewards import reward_functions

    profile = get_profile("ci")
    recipe_recorder.write_finished(runs / "l71-ci", profile, "L7.1", reward_functions())  # the course's recipe
    said = []
    open_run(profile, echo=said.append)
    assert not any("otra receta" in line for line in said)  # nothing saved: it trained the recipe in force
    save_recipe(profile, learning_rate=2e-5, loss_type="dr_grpo")
    said = []
    lab = open_run(profile, echo=said.append)
    assert lab.read_only
    warning = next(line for line in said if "otra receta" in line)
    assert "learning_rate" in warning and "loss_type" in warning and "recompensas" in warning
    assert "python -m labs l71" in warning and "--fresh" in warning
