"""Each pre-flight check fires on its bad input, with a Spanish message that says what to change."""

import subprocess
import sys

import pytest

from labs.training import preflight
from labs.training.preflight import PreflightError
from labs.core.profiles import get_profile
from rewards import reward_functions

COLUMNS = ("prompt", "answer", "id")
CI = get_profile("ci")


def problems(profile=CI, funcs=(), keywords=()):
    with pytest.raises(PreflightError) as err:
        preflight.preflight(profile, funcs, COLUMNS, keywords)
    return str(err.value)


def test_the_course_configuration_passes():
    for name in ("cpu", "ci", "rtx5090"):
        preflight.preflight(get_profile(name), reward_functions(), COLUMNS)


def test_batch_not_divisible_by_group_size():
    msg = problems(CI.replace(per_device_train_batch_size=6, num_generations=4))
    assert "no es múltiplo de num_generations=4" in msg and "per_device_train_batch_size" in msg


def test_group_of_one():
    assert "al menos 2" in problems(CI.replace(num_generations=1))


def test_temperature_too_low():
    msg = problems(CI.replace(temperature=0.0))
    assert "temperatura" in msg and "0.3" in msg


@pytest.mark.parametrize("fraction", [0.0, 1.0, 1.5, -0.2])
def test_vllm_memory_fraction_out_of_range(fraction):
    assert "entre 0 y 1" in problems(CI.replace(vllm_gpu_memory_utilization=fraction))


def test_reward_function_parameter_without_column():
    def my_reward(completions, solution, **kwargs):
        return [0.0] * len(completions)

    msg = problems(funcs=[my_reward])
    assert "my_reward" in msg and "'solution'" in msg and "answer" in msg


def test_reward_function_without_kwargs():
    def strict(completions, answer):
        return [0.0] * len(completions)

    assert "**kwargs" in problems(funcs=[strict])


def test_max_prompt_length_is_explained():
    assert "se quitó en 0.28" in problems(keywords=["max_prompt_length"])


def test_missing_local_model_path():
    assert "no existe" in problems(CI.replace(model="/no/such/model"))


def test_missing_data_file(monkeypatch, tmp_path):
    monkeypatch.setattr(preflight, "GSM8K_DIR", tmp_path)
    assert "data/gsm8k" in problems()


def test_all_problems_are_listed_together():
    err_text = problems(CI.replace(temperature=0.0, num_generations=1))
    assert "2 problema(s)" in err_text


def test_command_line_rejects_max_prompt_length_before_loading_anything():
    result = subprocess.run(
        [sys.executable, "-m", "labs", "l71", "--profile", "ci", "--set", "max_prompt_length=512"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2
    assert "max_prompt_length" in result.stderr and "se quitó" in result.stderr


def test_command_line_rejects_unknown_profile():
    result = subprocess.run(
        [sys.executable, "-m", "labs", "l71", "--profile", "rtx4090"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 2 and "rtx5090" in result.stderr
