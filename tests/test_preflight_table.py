"""Every profile knob's type and range (labs.training.knobs): one table drives the check and this test.

Each row's ``bad_values`` (a wrong type, each bound crossed, NaN for numbers) must be refused with a
Spanish message naming the knob, the value and the valid range; the bounds themselves and every
profile's own defaults pass. End to end, a lab given any of those values stops before it creates a run
folder or imports a model or vLLM.
"""

import dataclasses
import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

from labs.core.profiles import PROFILES, Profile, get_profile
from labs.training import knobs, preflight
from rewards import reward_functions

CI = get_profile("ci")
CASES = [(k, bad) for k in knobs.KNOBS for bad in k.bad_values()]


def test_every_profile_field_has_a_row():
    assert knobs.unchecked_fields() == []
    assert {f.name for f in dataclasses.fields(Profile)} == set(knobs.BY_NAME)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profiles_defaults_pass(name):
    assert knobs.check_knobs(get_profile(name)) == []
    preflight.preflight(get_profile(name), reward_functions(), ("prompt", "answer", "id"))


@pytest.mark.parametrize("knob,bad", CASES, ids=[f"{k.name}={bad!r}" for k, bad in CASES])
def test_each_out_of_range_value_is_refused_naming_knob_value_and_range(knob, bad):
    problems = knobs.check_knobs(CI.replace(**{knob.name: bad}))
    assert len(problems) == 1, problems
    text = problems[0]
    assert text.startswith(f"{knob.name}={bad!r} no es válido") and knob.range_es() in text
    with pytest.raises(preflight.PreflightError) as err:
        preflight.preflight(CI.replace(**{knob.name: bad}), reward_functions(), ("prompt", "answer", "id"))
    assert text in str(err.value) and "1 problema(s)" in str(err.value)


@pytest.mark.parametrize("knob", [k for k in knobs.KNOBS if k.kind in (int, float)], ids=lambda k: k.name)
def test_closed_bounds_are_accepted(knob):
    for bound, is_open in ((knob.low, knob.low_open), (knob.high, knob.high_open)):
        if bound is not None and not is_open:
            value = knob.kind(bound)
            assert knob.problem(value) is None, (knob.name, value)


def test_range_wording():
    assert knobs.BY_NAME["learning_rate"].range_es() == "un número > 0"
    assert knobs.BY_NAME["beta"].range_es() == "un número >= 0"
    assert knobs.BY_NAME["max_steps"].range_es() == "un entero >= 1"
    assert knobs.BY_NAME["vllm_gpu_memory_utilization"].range_es() == "un número en (0, 1)"
    assert knobs.BY_NAME["vllm_server_port"].range_es() == "un entero en [1, 65535]"
    assert "'colocate'" in knobs.BY_NAME["vllm_mode"].range_es()


def test_nan_and_infinity_are_refused():
    for value in (math.nan, math.inf, -math.inf):
        assert knobs.check_knobs(CI.replace(learning_rate=value))


LAB_SCRIPT = textwrap.dedent(
    """
    import json, math, os, sys
    from labs.l71.lab import Lab
    from labs.training import knobs
    from labs.training.preflight import PreflightError

    refused, passed = 0, []
    for knob in knobs.KNOBS:
        for bad in knob.bad_values():
            try:
                Lab("ci", **{knob.name: bad})
            except PreflightError as exc:
                refused += knob.name in str(exc)
            else:
                passed.append(f"{knob.name}={bad!r}")
    # vLLM, or the module of the ci model's class (SmolLM2 is a LlamaForCausalLM): imported only to load it
    loaded = sorted(m for m in sys.modules if m.startswith("vllm") or m == "transformers.models.llama.modeling_llama")
    print(json.dumps({"refused": refused, "passed": passed, "loaded": loaded,
                      "runs": os.listdir(os.environ["COURSE_RUNS"])}))
    """
)


def test_a_lab_refuses_every_bad_knob_before_any_folder_or_model(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    env = dict(os.environ, COURSE_RUNS=str(runs))
    result = subprocess.run([sys.executable, "-c", LAB_SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["passed"] == [] and out["refused"] == len(CASES)
    assert out["runs"] == [] and out["loaded"] == []


def test_command_line_refuses_a_negative_learning_rate_before_loading_anything(tmp_path):
    env = dict(os.environ, COURSE_RUNS=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-m", "labs", "l71", "--profile", "ci", "--set", "learning_rate=-1"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert "learning_rate=-1.0 no es válido: debe ser un número > 0" in result.stderr
    assert list(tmp_path.iterdir()) == []
    assert "eval" not in result.stdout and "Invalid learning rate" not in result.stderr
