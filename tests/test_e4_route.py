"""E4 on a 5090 follows the exercises' route: the notebook reads a finished run or gives the terminal command."""

from pathlib import Path

import pytest

from labs.core.profiles import get_profile
from labs.core.runfolder import STATE_FINISHED, RunFolder
from labs.exercises import BUDGETS, e4
from labs.exercises.sweep import SweepError
from rewards import REWARD_NAMES, reward_functions

STUDENT = Path(__file__).resolve().parent / "data" / "recompensa_alumno.py"
OWN = f"{STUDENT}:razonamiento_con_cuentas"


def test_a_gpu_profile_without_a_run_stops_with_the_terminal_command(tmp_path):
    gpu = get_profile("rtx5090")
    names = [*REWARD_NAMES, OWN]
    funcs = reward_functions(names)
    with pytest.raises(SweepError) as err:
        e4.train_or_read(gpu, names, funcs, runs_root=tmp_path, echo=lambda line: None)
    message = str(err.value)
    assert "ENTRENAR_AQUI" in message and "terminal" in message
    command = e4.terminal_command(gpu, names, funcs, tmp_path)
    assert command in message
    assert f"--run-name {e4.run_name(gpu, funcs)}" in command and "--lab E4" in command
    assert "tests/data/recompensa_alumno.py:razonamiento_con_cuentas" in command  # from the repository root
    assert f"--set max_steps={BUDGETS['rtx5090']['max_steps']}" in command
    assert not (tmp_path / e4.run_name(gpu, funcs)).exists()  # nothing trained, no folder made


def test_a_finished_run_is_read_without_training(tmp_path):
    gpu = get_profile("rtx5090")
    names = [*REWARD_NAMES, OWN]
    funcs = reward_functions(names)
    folder = RunFolder(tmp_path / e4.run_name(gpu, funcs))
    folder.root.mkdir(parents=True)
    folder.write_status(STATE_FINISHED, 250, 250)
    said = []
    assert e4.train_or_read(gpu, names, funcs, runs_root=tmp_path, echo=said.append) == folder.root
    assert any("ya terminó" in line for line in said)


def cuenta_en_el_think(completions, **kwargs):
    import re

    from rewards import completion_text

    return [0.3 if re.search(r"<think>[^<]*\d\s*[-+*/]\s*\d", completion_text(c)) else 0.0 for c in completions]


def test_the_notebook_function_is_written_to_the_file_that_trains(tmp_path, monkeypatch):
    from rewards import examples

    monkeypatch.chdir(tmp_path)
    spec = e4.write_reward_file(cuenta_en_el_think)
    assert spec == "mi_recompensa.py:cuenta_en_el_think"
    loaded = reward_functions([*REWARD_NAMES, spec])
    assert loaded[-1] is not cuenta_en_el_think and loaded[-1].__name__ == "cuenta_en_el_think"
    table = examples.check_against_hacks(examples.score_table(loaded))
    assert "razonamiento de relleno" in table["closed"]
    command = e4.terminal_command(get_profile("rtx5090"), [*REWARD_NAMES, spec], loaded, tmp_path)
    assert f"--rewards {','.join(REWARD_NAMES)}," in command and "mi_recompensa.py:cuenta_en_el_think" in command
    with pytest.raises(ValueError, match="nombre propio"):
        e4.write_reward_file(reward_functions(["format_reward"])[0])
