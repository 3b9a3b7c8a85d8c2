"""The GPU path's statement coverage from both CI legs: what the GPU stack's leg ran, and what either leg ran.

    .venv-gpu/bin/python tools/gpu_path_coverage.py [--gpu-leg .coverage] [--cpu-leg .coverage-cpu-leg]
                                                    [--fail-under PERCENT] [--missed [--under labs/l72 ...]]

``make test-gpu-stack`` calls it after its tests. The GPU-path modules (pyproject.toml ``[tool.coverage.run]``) hold
code of two stacks: what a card runs, measured by the GPU leg on the faked card, and the CPU path beside it (L7.2's
fallback, the format pass on a CPU, the rehearsal's CPU part), which only the CPU stack can train (TRL 1.15, the GPU
stack's, has no CPU loss; the doctor refuses a CPU profile there). ``make test CPU_LEG_COVERAGE=<file>`` (CI's first
leg, .ci/run) measures the same modules on the CPU stack. This prints, per module, the statements and how many each
leg left, and the union: a statement counts once either leg ran it. Without the CPU leg's file it prints the GPU
leg alone and says how to get the other. ``--fail-under`` fails (exit 2) when the union is below it.
``--missed`` lists, per module (``--under`` keeps those under the given folders or files), the line ranges neither
leg ran with the start of each range's first line: docs/testing.md's list of what stays uncovered comes from it.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def executed(data_file: Path) -> dict[str, set[int]]:
    """{module path relative to the repository: lines run} from a coverage data file."""
    from coverage import CoverageData

    data = CoverageData(basename=str(data_file))
    data.read()
    return {os.path.relpath(f, REPO): set(data.lines(f) or ()) for f in data.measured_files()}


@functools.cache
def _analyser():
    """One coverage object with pyproject.toml's settings, for every module's analysis."""
    import coverage

    return coverage.Coverage(data_file=None, config_file=str(REPO / "pyproject.toml"))


def statements(rel: str) -> set[int]:
    """The module's executable statements, as coverage counts them (pyproject.toml's exclusions applied)."""
    _, stmts, excluded, _, _ = _analyser().analysis2(str(REPO / rel))
    return set(stmts) - set(excluded)


def ranges(lines) -> list[tuple[int, int]]:
    """Consecutive line numbers folded into (first, last) pairs: [3, 4, 5, 9] -> [(3, 5), (9, 9)]."""
    out: list[tuple[int, int]] = []
    for n in sorted(lines):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def missed_ranges(gpu: dict[str, set[int]], cpu: dict[str, set[int]] | None, under: list[str]) -> list[str]:
    """For each module under ``under`` (all when empty), the ranges of statements neither leg ran."""
    lines = []
    for rel in sorted(set(gpu) | set(cpu or {})):
        if not (REPO / rel).exists() or (under and not any(
                rel == u or rel.startswith(u.rstrip("/") + "/") for u in under)):
            continue
        left = statements(rel) - gpu.get(rel, set()) - (cpu or {}).get(rel, set())
        if not left:
            continue
        lines.append(f"{rel}: {len(left)} missed")
        source = (REPO / rel).read_text(encoding="utf-8").splitlines()
        for first, last in ranges(left):
            span = f"{first}" if first == last else f"{first}-{last}"
            lines.append(f"    {span:>9}  {source[first - 1].strip()[:90]}")
    return lines


def table(gpu: dict[str, set[int]], cpu: dict[str, set[int]] | None) -> tuple[list[str], float]:
    """Lines of the report and the union's coverage in percent (the GPU leg's when ``cpu`` is None)."""
    rows, total, missed_both = [], 0, 0
    header = f"{'module':40} {'stmts':>6} {'GPU leg':>8} {'CPU leg':>8} {'both':>6} {'cover':>7}"
    rows.append(header)
    rows.append("-" * len(header))
    total_gpu = total_cpu = 0
    for rel in sorted(set(gpu) | set(cpu or {})):
        if not (REPO / rel).exists():
            continue
        stmts = statements(rel)
        left_gpu = stmts - gpu.get(rel, set())
        left_cpu = stmts - cpu.get(rel, set()) if cpu is not None else stmts
        left = left_gpu & left_cpu if cpu is not None else left_gpu
        total += len(stmts)
        missed_both += len(left)
        total_gpu += len(left_gpu)
        total_cpu += len(left_cpu)
        share = 100.0 * (len(stmts) - len(left)) / len(stmts) if stmts else 100.0
        cpu_text = f"{len(left_cpu):8d}" if cpu is not None else f"{'-':>8}"
        rows.append(f"{rel:40} {len(stmts):6d} {len(left_gpu):8d} {cpu_text} {len(left):6d} {share:6.1f}%")
    rows.append("-" * len(header))
    share = 100.0 * (total - missed_both) / total if total else 100.0
    cpu_total = f"{total_cpu:8d}" if cpu is not None else f"{'-':>8}"
    rows.append(f"{'TOTAL':40} {total:6d} {total_gpu:8d} {cpu_total} {missed_both:6d} {share:6.1f}%")
    return rows, share


def _written(path: Path) -> str:
    return datetime.datetime.fromtimestamp(path.stat().st_mtime).strftime("%Y-%m-%d %H:%M")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu-leg", type=Path, default=REPO / ".coverage")
    parser.add_argument("--cpu-leg", type=Path, default=REPO / ".coverage-cpu-leg")
    parser.add_argument("--fail-under", type=float, default=None)
    parser.add_argument("--missed", action="store_true", help="list the line ranges neither leg ran")
    parser.add_argument("--under", nargs="*", default=[])
    args = parser.parse_args(argv)
    if not args.gpu_leg.exists():
        print(f"No coverage data from the GPU leg at {args.gpu_leg}: run make test-gpu-stack.", file=sys.stderr)
        return 1
    cpu = executed(args.cpu_leg) if args.cpu_leg.exists() else None
    gpu = executed(args.gpu_leg)
    if args.missed:
        print("\n".join(missed_ranges(gpu, cpu, args.under)))
        return 0
    rows, share = table(gpu, cpu)
    print("GPU-path coverage: statements each leg left unrun ('missed'), and those neither ran ('both')")
    # a CPU leg's file left from an earlier `make test` measured older code: the dates show it
    legs = [("GPU leg", args.gpu_leg)] + ([("CPU leg", args.cpu_leg)] if cpu is not None else [])
    print("Data: " + "; ".join(f"{name} {path} (written {_written(path)})" for name, path in legs))
    print("\n".join(rows))
    if cpu is None:
        print(f"No data from the CPU leg at {args.cpu_leg}: 'both' is the GPU leg alone. CI's first leg writes it "
              f"(make test CPU_LEG_COVERAGE={args.cpu_leg.name}).")
    if args.fail_under is not None and cpu is not None and share < args.fail_under:
        print(f"GPU-path coverage {share:.1f} % is under {args.fail_under} %.", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
