"""benchmarks/bench_soak.py's slope and benchmarks/bench_plain_trl.py's comparison, on recorded rows (the benchmarks
themselves train for tens of minutes and are run by hand); and the plain script's GRPOConfig against the course's."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from labs.core import resources

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


soak = _load("bench_soak")
plain = _load("bench_plain_trl")


def test_the_soak_slope_leaves_the_warm_up_out_and_judges_against_one_mib_per_step():
    # 400 MiB over the first 5 steps (caches filling), then flat with noise: met
    flat = [{"step": s, resources.RSS_KEY: 5.0 + min(s, 5) * 0.08 + (0.002 if s % 2 else 0.0)} for s in range(1, 41)]
    result = soak.analyse(flat, warmup=5)
    assert abs(result["slope_mib_per_step"]) < 0.2 and result["goal_met"] is True
    assert result["rss_first_gib"] == 5.082 and result["steps_logged"] == 40
    # 3 MiB a step that never stops: not met
    leak = [{"step": s, resources.RSS_KEY: 5.0 + 3 * s / 1024} for s in range(1, 41)]
    assert soak.analyse(leak, warmup=5)["slope_mib_per_step"] == 3.0
    assert soak.analyse(leak, warmup=5)["goal_met"] is False
    assert soak.warmup_for(200) == 20 and soak.warmup_for(30) == 5


def _steps(rewards, step_time):
    return [{"step": i + 1, "loss": 0.1, "reward": r, "step_time": step_time} for i, r in enumerate(rewards)]


def test_the_side_by_side_ratios_and_rewards():
    p = {"steps": _steps([0.1, 0.2, 0.3], 20.0), "wall_s": 400.0, "peak_rss_gib": 5.0}
    lab = {"steps": _steps([0.1, 0.2, 0.3], 21.5), "wall_s": 480.0, "peak_rss_gib": 5.4}
    c = plain.compare(p, lab)
    assert (c["step_time_ratio"], c["wall_ratio"], c["peak_rss_ratio"]) == (1.075, 1.2, 1.08)
    assert c["goals"] == {"step_time_ratio <= 1.05": False, "wall_ratio <= 1.15": False, "peak_rss_ratio <= 1.1": True}
    assert c["rewards_per_step"]["same"] is True
    lab["steps"][2]["reward"] = 0.35
    assert plain.compare(p, lab)["rewards_per_step"] == {"plain": [0.1, 0.2, 0.3], "lab": [0.1, 0.2, 0.35],
                                                         "max_abs_diff": 0.04999999999999999, "same": False}


def _plain_config_keywords() -> dict:
    tree = ast.parse((ROOT / "benchmarks" / "plain_l71.py").read_text())
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "GRPOConfig")
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg != "output_dir"}


def test_the_plain_script_trains_with_the_cpu_profiles_knobs():
    """Its GRPOConfig is written out by hand, as a student writes it: it must stay the course's, key by key."""
    from labs.core.profiles import get_profile
    from labs.training import recipe

    course = recipe.grpo_config_kwargs(get_profile("cpu"), "out")
    written = _plain_config_keywords()
    differing = {k: (written.get(k), course.get(k)) for k in set(written) | set(course)
                 if k not in plain.BOOKKEEPING_KEYS and written.get(k) != course.get(k)}
    assert differing == {}
    assert plain.config_differences({"output_dir": "a", "beta": 0.04}, {"output_dir": "b", "beta": 0.0}) == {
        "beta": {"plain": 0.04, "lab": 0.0}}
