"""Memory over a long run: does resident memory stop growing once the first steps have filled the caches?

    python benchmarks/bench_soak.py                        # ci, 200 steps, one thread
    python benchmarks/bench_soak.py --profile cpu --steps 100
    python benchmarks/bench_soak.py --steps 20 --no-write   # a short look, nothing written to docs/
    python benchmarks/bench_soak.py --steps 20 --no-write --probe /tmp/probe.jsonl   # what grows (soak_probe.py)

Runs the lab exactly as a student does (`python -m labs l71 --profile P`, course rewards, no saved notebook
settings) in a child process with its runs in a temporary folder, ``max_steps`` set to ``--steps`` and one checkpoint
(at the end: a save per step would measure the disk, not the process). Each logged step of ``metrics.jsonl`` holds
the process's resident memory (``course/rss_gib``, labs.core.resources.step_memory); the result is the least-squares
slope of that series in MiB per step over the steps after the warm-up (``--warmup``, default a tenth of the steps,
at least 5), against the goal of at most 1 MiB per step (issue 53: a 500-step run on a 5090 must not creep into the
host's RAM). Memory is not slowed by other jobs on the machine, so one thread (``--threads``) is enough and leaves
the other cores free. The record (date, machine, commit, command, the RSS series, slope, verdict) is appended to
docs/benchmarks/soak.json and docs/benchmarks/soak.md is rewritten from all records.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labs.core import resources  # noqa: E402

RESULTS = ROOT / "docs" / "benchmarks" / "soak.json"
GOAL_MIB_PER_STEP = 1.0


def warmup_for(steps: int) -> int:
    return max(5, steps // 10)


def analyse(metrics: list[dict], warmup: int) -> dict:
    """The RSS series of a run's metrics.jsonl rows and its slope after ``warmup`` steps."""
    rows = [(int(m["step"]), float(m[resources.RSS_KEY])) for m in metrics if resources.RSS_KEY in m]
    steps = [s for s, _ in rows]
    rss = [r for _, r in rows]
    slope = resources.slope_mib_per_step(steps, rss, warmup)
    after = [r for s, r in rows if s > warmup]
    return {"steps_logged": len(rows), "warmup_steps": warmup, "rss_gib": dict(zip(map(str, steps), rss)),
            "rss_first_gib": rss[0] if rss else None, "rss_after_warmup_gib": after[0] if after else None,
            "rss_last_gib": rss[-1] if rss else None, "rss_max_gib": max(rss) if rss else None,
            "slope_mib_per_step": slope,
            "goal": f"slope <= {GOAL_MIB_PER_STEP} MiB/step",
            "goal_met": None if slope is None else slope <= GOAL_MIB_PER_STEP}


def run_lab(profile: str, steps: int, threads: int, runs: Path, probe: Path | None = None):
    """The lab's metrics.jsonl rows, its resources.json, its wall time and the command that ran it."""
    launcher = ["-m", "labs"] if probe is None else [str(ROOT / "benchmarks" / "soak_probe.py"), str(probe)]
    command = [sys.executable, *launcher, "l71", "--profile", profile, "--run-name", "soak", "--sin-ajustes",
               "--recompensas-del-curso", "--set", f"max_steps={steps}", "--set", f"save_steps={steps}"]
    env = {**os.environ, "COURSE_RUNS": str(runs), "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    env.pop("COURSE_PROFILE", None)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"the lab failed (exit {done.returncode})")
    run = runs / "soak"
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    record = resources.read_resources(run) or {}
    return metrics, record, wall, command


def machine() -> dict:
    """front_door's record of the machine: CPU model, cores, memory, bf16 flags, load average."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from front_door import machine as front_door_machine

    return front_door_machine()


def render_markdown(records: list[dict]) -> str:
    # the CPU kind decides the `ci` profile's precision (bf16 or float32), and so how much memory a step holds
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from front_door import kind_label

    lines = ["# Resident memory over a long run", "",
             f"Written by `benchmarks/bench_soak.py` from `{RESULTS.name}`; do not edit by hand. Slope: least squares "
             "over the steps after the warm-up; goal at most 1 MiB per step.", "",
             "| date (UTC) | commit | CPU kind | profile | steps | threads | warm-up | RSS after step 1 | after warm-up | last | "
             "peak (resources.json) | slope | goal met |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        a = r["analysis"]
        lines.append(f"| {r['date'][:16].replace('T', ' ')} | {r['commit'][:9]} | {kind_label(r['machine'].get('bf16_flags'))} | {r['profile']} | {r['steps']} "
                     f"| {r['threads']} | {a['warmup_steps']} | {a['rss_first_gib']} GiB | {a['rss_after_warmup_gib']} GiB "
                     f"| {a['rss_last_gib']} GiB | {r.get('peak_rss_gib')} GiB | {a['slope_mib_per_step']} MiB/step "
                     f"| {'yes' if a['goal_met'] else 'no'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="ci", choices=("ci", "cpu"))
    parser.add_argument("--steps", type=int, default=None, help="default: 200 on ci, 100 on cpu")
    parser.add_argument("--warmup", type=int, default=None, help="steps left out of the slope")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-write", action="store_true", help="print the result only")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--probe", type=Path, default=None,
                        help="also record, per step, malloc's heap, Python's objects and torch's tensors to this "
                             "file (benchmarks/soak_probe.py)")
    args = parser.parse_args(argv)
    steps = args.steps or (200 if args.profile == "ci" else 100)
    warmup = args.warmup if args.warmup is not None else warmup_for(steps)
    here = machine()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        metrics, record, wall, command = run_lab(args.profile, steps, args.threads, Path(tmp), args.probe)
    result = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": commit,
              "uncommitted_changes": dirty, "machine": here, "profile": args.profile, "steps": steps,
              "threads": args.threads, "command": " ".join(command[1:]), "wall_s": round(wall, 1),
              "peak_rss_gib": record.get("peak_rss_gib"), "analysis": analyse(metrics, warmup)}
    a = result["analysis"]
    print(f"{args.profile}, {steps} steps: RSS {a['rss_first_gib']} GiB after step 1, {a['rss_after_warmup_gib']} GiB "
          f"after the warm-up ({warmup} steps), {a['rss_last_gib']} GiB at the end; slope {a['slope_mib_per_step']} "
          f"MiB/step (goal <= {GOAL_MIB_PER_STEP}); peak {result['peak_rss_gib']} GiB; {wall:.0f} s", flush=True)
    if not args.no_write:
        records = json.loads(args.out.read_text()) if args.out.exists() else []
        records.append(result)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(records, indent=2) + "\n")
        args.out.with_suffix(".md").write_text(render_markdown(records))
        print(f"written: {args.out} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
