"""The course's cost beside the plain TRL script: `python -m labs l71 --profile cpu` against benchmarks/plain_l71.py.

    flock /tmp/course-heavy.lock python benchmarks/bench_plain_trl.py             # both, plain first, written
    python benchmarks/bench_plain_trl.py --order lab-first --no-write              # the other order, printed only

Both train the `cpu` profile's L7.1 run from the same start weights (the format pass's model, primed once before
either is timed, so neither pays for it), on the same prompts and holdout, with the same knobs, seed and steps; the
lab with the course's rewards (`--recompensas-del-curso`) and without saved notebook settings (`--sin-ajustes`), in a
temporary run area. Each runs in its own process under GNU time (`/usr/bin/time -v`: wall time and peak resident
memory). Reported, against issue 53's goals: the per-step time ratio (median of TRL's `step_time` over the steps after
the first, lab / plain; goal <= 1.05), the whole-lab ratio (wall time of the process; <= 1.15) and the peak-memory
ratio (<= 1.10); whether the two GRPOConfigs differ (any key but where the files go); and whether both reached the same
rewards (the logged mean reward of every step, and the holdout accuracies). Timings need an otherwise idle machine:
the load average at the start is recorded beside them. The record is appended to docs/benchmarks/plain-trl.json and
docs/benchmarks/plain-trl.md is rewritten from all records.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "docs" / "benchmarks" / "plain-trl.json"
GOALS = {"step_time_ratio": 1.05, "wall_ratio": 1.15, "peak_rss_ratio": 1.10}
# GRPOConfig keys that only say where files go or what the run folder keeps: not a difference in training.
BOOKKEEPING_KEYS = {"output_dir", "logging_dir", "log_completions", "num_completions_to_print", "run_name"}

PRIME = r"""
import sys
from labs.core.profiles import get_profile
from labs.l71.lab import base_model_for
from labs.training import data, models
p = get_profile("cpu")
start = models.model_path(p)
print(base_model_for(p, start, data.course_splits(p))[0])
"""


def env_for(runs: Path) -> dict:
    env = {**os.environ, "COURSE_RUNS": str(runs), "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    env.pop("COURSE_PROFILE", None)
    return env


def timed(command: list[str], env: dict, log: Path) -> dict:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from front_door import parse_time_v

    with open(log, "w", encoding="utf-8") as out:
        subprocess.run(["/usr/bin/time", "-v", *command], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    text = log.read_text(encoding="utf-8", errors="replace")
    figures = parse_time_v(text)
    if figures["exit_status"] != 0:
        sys.stderr.write("\n".join(text.splitlines()[-60:]) + "\n")
        raise SystemExit(f"{command[:4]} failed (exit {figures['exit_status']}); its log: {log}")
    return figures


def steps_of(log_history: list[dict]) -> list[dict]:
    return [e for e in log_history if "loss" in e and "train_runtime" not in e]


def compare(plain: dict, lab: dict) -> dict:
    """Ratios lab / plain and the verdicts against GOALS."""
    def median_step(rows):
        times = [r["step_time"] for r in rows[1:] if isinstance(r.get("step_time"), (int, float))]
        return statistics.median(times) if times else None

    plain_step, lab_step = median_step(plain["steps"]), median_step(lab["steps"])
    ratios = {"step_time_ratio": lab_step / plain_step if plain_step and lab_step else None,
              "wall_ratio": lab["wall_s"] / plain["wall_s"],
              "peak_rss_ratio": lab["peak_rss_gib"] / plain["peak_rss_gib"]}
    ratios = {k: None if v is None else round(v, 3) for k, v in ratios.items()}
    rewards_plain = [r.get("reward") for r in plain["steps"]]
    rewards_lab = [r.get("reward") for r in lab["steps"]]
    same_steps = len(rewards_plain) == len(rewards_lab)
    diff = max((abs(a - b) for a, b in zip(rewards_plain, rewards_lab)), default=None) if same_steps else None
    return {"median_step_s": {"plain": plain_step, "lab": lab_step}, **ratios,
            "goals": {f"{k} <= {v}": (ratios[k] is not None and ratios[k] <= v) for k, v in GOALS.items()},
            "rewards_per_step": {"plain": rewards_plain, "lab": rewards_lab, "max_abs_diff": diff,
                                 "same": diff is not None and diff < 1e-6}}


def config_differences(plain_config: dict, lab_config: dict) -> dict:
    keys = (set(plain_config) | set(lab_config)) - BOOKKEEPING_KEYS
    return {k: {"plain": plain_config.get(k), "lab": lab_config.get(k)} for k in sorted(keys)
            if str(plain_config.get(k)) != str(lab_config.get(k))}


def run_plain(start_model: str, work: Path) -> dict:
    result_file = work / "plain.json"
    figures = timed([sys.executable, str(ROOT / "benchmarks" / "plain_l71.py"), start_model, str(work / "plain-out"),
                     str(result_file)], env_for(work / "plain-runs"), work / "plain.log")
    result = json.loads(result_file.read_text())
    return {**figures, "steps": steps_of(result["log_history"]), "config": result["config"],
            "seconds": result["seconds"], "base_accuracy": result["base_accuracy"],
            "trained_accuracy": result["trained_accuracy"]}


def run_lab(work: Path) -> dict:
    runs = work / "lab-runs"
    figures = timed([sys.executable, "-m", "labs", "l71", "--profile", "cpu", "--run-name", "side-by-side",
                     "--sin-ajustes", "--recompensas-del-curso"], env_for(runs), work / "lab.log")
    run = runs / "side-by-side"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    summary = json.loads((run / "eval" / "summary.json").read_text())
    state = sorted(run.glob("checkpoints/checkpoint-*/trainer_state.json"))
    from trl import GRPOConfig  # the lab's config as GRPOConfig fills it, to compare key by key with the plain one

    from labs.core.profiles import get_profile
    from labs.training import recipe

    config = GRPOConfig(**recipe.grpo_config_kwargs(get_profile("cpu"), str(run / "checkpoints"))).to_dict()
    return {**figures, "steps": [m for m in metrics if "loss" in m], "config": config,
            "resources": json.loads((run / "resources.json").read_text()),
            "base_accuracy": summary.get("base_accuracy"), "trained_accuracy": summary.get("trained_accuracy"),
            "checkpoints_left": [str(p.parent.name) for p in state]}


def render_markdown(records: list[dict]) -> str:
    # the CPU kind decides the `cpu` profile's precision (bf16 or float32), so each row names it
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from front_door import kind_label

    lines = ["# The course beside the plain TRL script (L7.1, `cpu` profile)", "",
             f"Written by `benchmarks/bench_plain_trl.py` from `{RESULTS.name}`; do not edit by hand. Ratios are "
             "lab / plain; goals: per step <= 1.05, whole run <= 1.15, peak memory <= 1.10.", "",
             "| date (UTC) | commit | CPU | CPU kind | load at start | order | median step plain / lab | per step | wall plain / lab "
             "| whole run | peak plain / lab | peak | same rewards | holdout plain / lab |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        c, p, lab = r["comparison"], r["plain"], r["lab"]
        ms = c["median_step_s"]
        lines.append(
            f"| {r['date'][:16].replace('T', ' ')} | {r['commit'][:9]} | {r['machine']['cpu']} | "
            f"{kind_label(r['machine'].get('bf16_flags'))} | {r['machine']['load_average_at_start'][0]:.2f} | {r['order']} | {ms['plain']:.1f} s / {ms['lab']:.1f} s | "
            f"{c['step_time_ratio']}x | {p['wall_s']:.0f} s / {lab['wall_s']:.0f} s | {c['wall_ratio']}x | "
            f"{p['peak_rss_gib']:.2f} / {lab['peak_rss_gib']:.2f} GiB | {c['peak_rss_ratio']}x | "
            f"{'yes' if c['rewards_per_step']['same'] else 'no (max diff ' + str(c['rewards_per_step']['max_abs_diff']) + ')'} | "
            f"{p['base_accuracy']:.3f}->{p['trained_accuracy']:.3f} / {lab['base_accuracy']:.3f}->{lab['trained_accuracy']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--order", choices=("plain-first", "lab-first"), default="plain-first")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from front_door import machine

    start_model = subprocess.run([sys.executable, "-c", PRIME], cwd=ROOT, env=env_for(Path(tempfile.gettempdir())),
                                 capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    here = machine()  # after the priming: the load average of the timed part
    with tempfile.TemporaryDirectory(prefix="plain-trl-") as tmp:
        work = Path(tmp)
        if args.order == "plain-first":
            plain, lab = run_plain(start_model, work), run_lab(work)
        else:
            lab, plain = run_lab(work), run_plain(start_model, work)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": commit,
              "uncommitted_changes": bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                                          "--untracked-files=no"], capture_output=True,
                                                         text=True).stdout.strip()),
              "machine": here, "order": args.order, "start_model": start_model,
              "config_differences": config_differences(plain.pop("config"), lab.pop("config")),
              "comparison": compare(plain, lab), "plain": plain, "lab": lab}
    c = record["comparison"]
    print(json.dumps({k: c[k] for k in ("median_step_s", "step_time_ratio", "wall_ratio", "peak_rss_ratio", "goals")}
                     | {"same_rewards": c["rewards_per_step"]["same"], "config_differences": record["config_differences"],
                        "wall_s": {"plain": plain["wall_s"], "lab": lab["wall_s"]},
                        "peak_rss_gib": {"plain": plain["peak_rss_gib"], "lab": lab["peak_rss_gib"]}}, indent=2))
    if not args.no_write:
        records = json.loads(args.out.read_text()) if args.out.exists() else []
        records.append(record)
        args.out.write_text(json.dumps(records, indent=2, default=str) + "\n")
        args.out.with_suffix(".md").write_text(render_markdown(records))
        print(f"written: {args.out} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
