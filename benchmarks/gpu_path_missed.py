"""The GPU path's uncovered statements, per module, from a coverage data file (docs/testing.md's list comes from it).

    .venv-gpu/bin/python benchmarks/gpu_path_missed.py [.coverage] [--under labs/l72 labs/rehearsal ...]

Reads the combined data file that ``make test-gpu-stack`` (pytest-cov) leaves, with pyproject.toml's
``[tool.coverage]`` settings, and prints for each measured module its statements, how many are missed, the
percentage, and the missed line ranges with the first words of each range's first line, so the reasons in
docs/testing.md can be checked against the code they name. ``--under`` keeps the modules under those folders
or files.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def ranges(lines: list[int]) -> list[tuple[int, int]]:
    """Consecutive line numbers folded into (first, last) pairs: [3, 4, 5, 9] -> [(3, 5), (9, 9)]."""
    out: list[tuple[int, int]] = []
    for n in sorted(lines):
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def missed(data_file: Path, under: list[str]) -> list[tuple[str, int, list[int]]]:
    """(module path, statements, missed lines) for each measured file under ``under`` (all when empty)."""
    import coverage

    cov = coverage.Coverage(data_file=str(data_file), config_file=str(REPO / "pyproject.toml"))
    cov.load()
    rows = []
    for filename in sorted(cov.get_data().measured_files()):
        rel = os.path.relpath(filename, REPO)
        if under and not any(rel == u or rel.startswith(u.rstrip("/") + "/") for u in under):
            continue
        _, statements, _, missing, _ = cov.analysis2(filename)
        rows.append((rel, len(statements), list(missing)))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_file", nargs="?", default=str(REPO / ".coverage"))
    parser.add_argument("--under", nargs="*", default=[])
    args = parser.parse_args(argv)
    total = total_missed = 0
    for rel, statements, missing in missed(Path(args.data_file), args.under):
        total, total_missed = total + statements, total_missed + len(missing)
        share = 100.0 * (statements - len(missing)) / statements if statements else 100.0
        print(f"{rel}: {statements} statements, {len(missing)} missed, {share:.1f} %")
        source = (REPO / rel).read_text(encoding="utf-8").splitlines()
        for first, last in ranges(missing):
            span = f"{first}" if first == last else f"{first}-{last}"
            print(f"    {span:>9}  {source[first - 1].strip()[:90]}")
    if total:
        print(f"TOTAL: {total} statements, {total_missed} missed, {100.0 * (total - total_missed) / total:.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
