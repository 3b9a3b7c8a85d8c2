"""Peak resident memory and wall time of an L7.1 run, phase by phase (the default ``make``'s footprint).

    python benchmarks/bench_footprint.py                       # the cpu profile's whole lab, in phases
    python benchmarks/bench_footprint.py --set max_steps=3     # a short diagnostic run
    python benchmarks/bench_footprint.py --env MALLOC_ARENA_MAX=2 --set beta=0.0   # try a lever
    python benchmarks/bench_footprint.py --format-pass 16      # the format pass alone (uncached), 16 examples
    python benchmarks/bench_footprint.py --command             # `make`'s own command, as a student runs it

Phases mode (the default) runs the lab's own steps (``labs.l71.lab.Lab``: data, format pass, trainer with
its vLLM engine and reference model, base evaluation, training, trained evaluation, report) in a child
process that writes a mark after each step and after every optimizer step. The parent samples the
resident memory (RSS) of the child and its descendants every ``--interval`` seconds from /proc (psutil),
with the thread count, CPU time and involuntary context switches, and prints per phase: wall time, peak
RSS, CPU cores busy (CPU seconds / wall seconds) and involuntary switches per second (a symptom of
oversubscribed threads). After the trainer is built the child reports what the big blocks should take:
the trainer's weights, the reference model, vLLM's copy of the weights and its KV cache; after training,
the optimizer state. ``--command`` runs what ``make`` runs (``python -m labs l71``, wandb offline) instead
and measures its whole process tree the same way (no phases: the figure a student gets).

Every run gets a fresh run folder under runs/ and is deleted afterwards unless ``--keep``. It ends with
the format-reward trend of the run (Kendall tau and p on the logged ``rewards/format_reward/mean``,
``labs.core.stats.trend``), since a cheaper run is only worth having if the lab still shows it. Results
go to stdout and, with ``--out``, to a JSON file. Heavy: run it under ``flock /tmp/course-heavy.lock``
on a shared machine, and on an otherwise idle one for times that mean something. A warm format-pass
cache (~/.cache/grpo-course/primed) is what `make` sees from its second run on; the phases mode shows
the format pass's own cost when the cache is cold.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GIB = 2**30


# ----------------------------------------------------------------------------------------------- child


def _mark(path: str, phase: str, **extra) -> None:
    import psutil

    record = {"phase": phase, "t": time.time(), "rss_gib": psutil.Process().memory_info().rss / GIB, **extra}
    with open(path, "a") as fh:
        fh.write(json.dumps(record) + "\n")


def _tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _blocks(trainer) -> dict:
    """What the big blocks of memory should take, from the objects themselves."""
    import torch

    sizes: dict = {"torch_threads": torch.get_num_threads()}
    sizes["trainer_weights_gib"] = _tensor_bytes(trainer.model.parameters()) / GIB
    ref = getattr(trainer, "ref_model", None)
    sizes["reference_model_gib"] = _tensor_bytes(ref.parameters()) / GIB if ref is not None else 0.0
    try:
        from labs.training import vllm_cpu_shim

        llm = trainer.vllm_generation.llm
        runner = llm.llm_engine.model_executor.driver_worker.model_runner
        sizes["vllm_weights_gib"] = _tensor_bytes(vllm_cpu_shim.vllm_model(trainer).parameters()) / GIB
        caches = runner.kv_caches
        flat = []
        for c in caches:
            flat.extend(c if isinstance(c, (list, tuple)) else [c])
        sizes["vllm_kv_cache_gib"] = _tensor_bytes(flat) / GIB
    except Exception as exc:  # noqa: BLE001 - no engine (use_vllm=False) or another vLLM layout
        sizes["vllm"] = f"not measured: {type(exc).__name__}: {exc}"
    return sizes


def _optimizer_gib(trainer) -> float:
    import torch

    opt = getattr(trainer, "optimizer", None)
    if opt is None:
        return 0.0
    tensors = [v for state in opt.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
    return _tensor_bytes(tensors) / GIB


def child(marks: str, profile_name: str, run_name: str, sets: list[str], format_pass_examples: int = 0) -> None:
    _mark(marks, "start")
    from transformers import TrainerCallback

    from labs.core.profiles import get_profile
    from labs.l71.lab import Lab
    from labs.training.options import overrides_from_cli

    profile = get_profile(profile_name)
    lab = Lab(profile, run_name=run_name, **overrides_from_cli(sets, profile))
    _mark(marks, "imports")
    try:
        lab.load_data()
        _mark(marks, "data")
        if format_pass_examples:  # the format pass alone, uncached, into a folder that is then removed
            from labs.training import format_pass

            with tempfile.TemporaryDirectory(prefix="bench-format-pass-") as tmp:
                rows = lab.splits["format"][:format_pass_examples]
                format_pass._train(lab.start_model, lab.profile, rows, Path(tmp) / "primed")
            _mark(marks, "format_pass")
            return
        lab.format_pass()
        _mark(marks, "format_pass")
        trainer = lab.build_trainer()
        _mark(marks, "trainer_and_vllm", **_blocks(trainer))

        class StepMark(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                _mark(marks, f"step_{state.global_step}")

            def on_save(self, args, state, control, **kwargs):
                _mark(marks, f"save_{state.global_step}")

        trainer.add_callback(StepMark())
        lab.evaluate_base()
        _mark(marks, "eval_base")
        lab.train()
        _mark(marks, "train", optimizer_gib=_optimizer_gib(trainer))
        lab.evaluate_trained()
        _mark(marks, "eval_trained")
        lab.finish()
        _mark(marks, "report")
    finally:
        lab.close()


# ---------------------------------------------------------------------------------------------- parent


class TreeSampler:
    """RSS (sum over the process and its descendants), threads, CPU time and involuntary switches."""

    def __init__(self, pid: int, interval: float):
        self.pid, self.interval = pid, interval
        self.samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        rss = threads = cpu = invol = 0.0
        for p in procs:
            try:
                with p.oneshot():
                    rss += p.memory_info().rss
                    threads += p.num_threads()
                    t = p.cpu_times()
                    cpu += t.user + t.system + t.children_user + t.children_system
                    invol += p.num_ctx_switches().involuntary
            except psutil.Error:
                continue
        self.samples.append({"t": time.time(), "rss_gib": rss / GIB, "threads": threads, "cpu_s": cpu,
                             "invol": invol, "procs": len(procs)})

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> "TreeSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def read_marks(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def phase_table(t0: float, marks: list[dict], samples: list[dict]) -> list[dict]:
    """One row per phase: the samples between the previous mark and this one. Steps are grouped."""
    bounds = [("launch", t0)] + [(m["phase"], m["t"]) for m in marks]
    rows = []
    for (_, start), (name, end) in zip(bounds, bounds[1:]):
        inside = [s for s in samples if start <= s["t"] <= end]
        rows.append({"phase": name, "start": start, "end": end, "seconds": end - start,
                     "peak_rss_gib": max((s["rss_gib"] for s in inside), default=None),
                     "max_threads": max((s["threads"] for s in inside), default=None),
                     "cpu_s": (inside[-1]["cpu_s"] - inside[0]["cpu_s"]) if len(inside) > 1 else None,
                     "invol": (inside[-1]["invol"] - inside[0]["invol"]) if len(inside) > 1 else None})
    return rows


def _is_step(row: dict) -> bool:
    return row["phase"].startswith(("step_", "save_"))


def step_rows(rows: list[dict]) -> list[dict]:
    """Each optimizer step and each checkpoint save on its own: where in the run the peak comes."""
    return [{"phase": r["phase"], "seconds": round(r["seconds"], 1), "peak_rss_gib": r["peak_rss_gib"]}
            for r in rows if _is_step(r)]


def group_steps(rows: list[dict]) -> list[dict]:
    """Fold step_N and save_N rows into 'first step' and 'other steps'; eval_base precedes them, train follows."""
    out, steps = [], [r for r in rows if _is_step(r)]
    for r in rows:
        if _is_step(r):
            continue
        if r["phase"] == "train" and steps:
            first, rest = steps[0], steps[1:] + [r]
            out.append({**first, "phase": "train: step 1"})
            optimizer_steps = sum(1 for s in steps if s["phase"].startswith("step_"))  # not the save_N rows
            out.append(_merge(rest, f"train: steps 2-{optimizer_steps} and saving"))
            continue
        out.append(r)
    return out


def _merge(rows: list[dict], name: str) -> dict:
    peaks = [r["peak_rss_gib"] for r in rows if r["peak_rss_gib"] is not None]
    cpu = [r["cpu_s"] for r in rows if r["cpu_s"] is not None]
    invol = [r["invol"] for r in rows if r["invol"] is not None]
    return {"phase": name, "start": rows[0]["start"], "end": rows[-1]["end"],
            "seconds": rows[-1]["end"] - rows[0]["start"], "peak_rss_gib": max(peaks, default=None),
            "max_threads": max((r["max_threads"] or 0 for r in rows), default=None),
            "cpu_s": sum(cpu) if cpu else None, "invol": sum(invol) if invol else None}


def format_trend(run_root: Path) -> dict | None:
    from labs.core import stats
    from labs.core.metrics import format_series
    from labs.core.runfolder import read_jsonl

    path = run_root / "metrics.jsonl"
    if not path.exists():
        return None
    metrics = read_jsonl(path)
    series = format_series(metrics)
    if series is None:
        return None
    t = stats.trend(series.values, series.steps)
    step_times = [r["step_time"] for r in metrics if isinstance(r.get("step_time"), (int, float))]
    gen = [r["course/generation_seconds"] for r in metrics if isinstance(r.get("course/generation_seconds"), (int, float))]
    return {"steps": len(metrics), "tau": t["tau"], "p_value": t["p_value"], "first_mean": t["first_mean"],
            "last_mean": t["last_mean"], "rising": stats.is_rising(t),
            "mean_step_s": sum(step_times) / len(step_times) if step_times else None,
            "mean_generation_s": sum(gen) / len(gen) if gen else None}


def print_report(result: dict) -> None:
    print(f"\n== {result['mode']} · profile {result['profile']} · sets {result['sets'] or '-'} · "
          f"env {result['env'] or '-'} · {result['cpus']} CPUs")
    rows = result.get("phases") or []
    if rows:
        print(f"{'phase':34s} {'seconds':>8s} {'peak RSS GiB':>13s} {'cores busy':>11s} {'invol/s':>8s} {'threads':>8s}")
        for r in rows:
            busy = r["cpu_s"] / r["seconds"] if r["cpu_s"] is not None and r["seconds"] > 0 else None
            invol = r["invol"] / r["seconds"] if r["invol"] is not None and r["seconds"] > 0 else None
            print(f"{r['phase']:34s} {r['seconds']:8.1f} {_num(r['peak_rss_gib'], 13, 2)} {_num(busy, 11, 2)} "
                  f"{_num(invol, 8, 0)} {_num(r['max_threads'], 8, 0)}")
    if result.get("steps"):
        print("by step (seconds / peak RSS GiB; save_N is checkpoint N being written):")
        print("  " + "  ".join(f"{r['phase']} {r['seconds']:.0f}s/{_num(r['peak_rss_gib'], 0, 2).strip()}"
                               for r in result["steps"]))
    for key in ("blocks", "optimizer_gib"):
        if result.get(key) is not None:
            print(f"{key}: {json.dumps(result[key], default=lambda x: round(x, 3))}")
    print(f"TOTAL wall {result['wall_s']:.1f} s ({result['wall_s'] / 60:.1f} min), peak RSS of the process tree "
          f"{result['peak_rss_gib']:.2f} GiB ({result['peak_rss_gib'] * GIB / 1e9:.2f} GB); "
          f"run's own resources.json: {result.get('resources_peak_rss_gib')} GiB")
    if result.get("warm_wall_s") is not None:
        print(f"without the format pass (what a warm cache costs): {result['warm_wall_s']:.1f} s "
              f"({result['warm_wall_s'] / 60:.1f} min), peak RSS {result['warm_peak_rss_gib']:.2f} GiB")
    t = result.get("format_trend")
    if t:
        print(f"format reward: {t['steps']} steps, Kendall tau {_num(t['tau'], 0, 3).strip()}, "
              f"p {_num(t['p_value'], 0, 4).strip()}, first {t['first_mean']:.3f} -> last {t['last_mean']:.3f}, "
              f"rising={t['rising']}; mean step {_num(t['mean_step_s'], 0, 1).strip()} s "
              f"(generation {_num(t['mean_generation_s'], 0, 1).strip()} s)")


def _num(x, width: int, digits: int) -> str:
    return f"{x:{width}.{digits}f}" if isinstance(x, (int, float)) else f"{'-':>{width}s}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="profile override")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="environment for the run")
    parser.add_argument("--command", action="store_true", help="run `python -m labs l71` as `make` does, no phases")
    parser.add_argument("--format-pass", type=int, default=0, metavar="N",
                        help="measure only the format pass, uncached, on its first N examples")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between memory samples")
    parser.add_argument("--keep", action="store_true", help="keep the run folder")
    parser.add_argument("--out", help="also write the result as JSON here")
    parser.add_argument("--child", nargs=3, metavar=("MARKS", "PROFILE", "RUN_NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child, args.set, args.format_pass)
        return 0

    env = dict(os.environ)
    env.setdefault("WANDB_MODE", "offline")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(dict(kv.split("=", 1) for kv in args.env))
    run_name = f"bench-footprint-{time.strftime('%Y%m%d-%H%M%S')}"
    tmp = Path(tempfile.mkdtemp(prefix="bench-footprint-"))
    marks_path = tmp / "marks.jsonl"
    if args.command:
        cmd = [sys.executable, "-m", "labs", "l71", "--profile", args.profile, "--run-name", run_name,
               *(f"--set={s}" for s in args.set)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(marks_path), args.profile, run_name,
               *(f"--set={s}" for s in args.set), f"--format-pass={args.format_pass}"]
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    sampler = TreeSampler(proc.pid, args.interval).start()
    rc = proc.wait()
    sampler.stop()
    wall = time.time() - t0
    marks = read_marks(marks_path)
    from labs.core.paths import runs_dir

    run_root = runs_dir() / run_name
    samples = sampler.samples
    result = {"mode": "command" if args.command else "phases", "profile": args.profile, "sets": args.set,
              "env": args.env, "cpus": os.cpu_count(), "rc": rc, "wall_s": wall,
              "peak_rss_gib": max((s["rss_gib"] for s in samples), default=0.0), "samples": len(samples)}
    resources = run_root / "resources.json"
    if resources.exists():
        result["resources_peak_rss_gib"] = json.loads(resources.read_text()).get("peak_rss_gib")
    if marks:
        table = phase_table(t0, marks, samples)
        result["phases"] = group_steps(table)
        result["steps"] = step_rows(table)
        blocks = next((m for m in marks if m["phase"] == "trainer_and_vllm"), None)
        if blocks:
            result["blocks"] = {k: v for k, v in blocks.items() if k not in ("phase", "t")}
        trained = next((m for m in marks if m["phase"] == "train"), None)
        result["optimizer_gib"] = trained.get("optimizer_gib") if trained else None
        fp = next((r for r in result["phases"] if r["phase"] == "format_pass"), None)
        if fp is not None and not args.format_pass:
            rest = [s["rss_gib"] for s in samples if not fp["start"] <= s["t"] <= fp["end"]]
            result["warm_wall_s"] = wall - fp["seconds"]
            result["warm_peak_rss_gib"] = max(rest, default=0.0)
    result["format_trend"] = format_trend(run_root)
    print_report(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    if not args.keep:
        shutil.rmtree(run_root, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
