"""tools/gpu_path_coverage.py: the GPU path's coverage from both CI legs, on data files written here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import gpu_path_coverage as tool  # noqa: E402

pytest.importorskip("coverage")
MODULE = "labs/l72/lab.py"


def _data(path: Path, lines) -> Path:
    from coverage import CoverageData

    data = CoverageData(basename=str(path))
    data.add_lines({str(REPO / MODULE): sorted(lines)})
    data.write()
    return path


def test_a_statement_counts_once_whichever_leg_ran_it(tmp_path, capsys):
    stmts = sorted(tool.statements(MODULE))
    gpu = _data(tmp_path / "gpu", stmts[:3])  # the GPU leg stops early, the CPU leg runs the rest
    cpu = _data(tmp_path / "cpu", stmts[3:])
    assert tool.main(["--gpu-leg", str(gpu), "--cpu-leg", str(cpu), "--fail-under", "100"]) == 0
    out = capsys.readouterr().out.splitlines()
    total = out[-1].split()
    assert total == ["TOTAL", str(len(stmts)), str(len(stmts) - 3), "3", "0", "100.0%"], total
    assert out[1].startswith(f"Data: GPU leg {gpu} (written ") and f"; CPU leg {cpu} (written " in out[1]


def test_a_statement_neither_leg_ran_is_listed_and_fails_the_floor(tmp_path, capsys):
    stmts = sorted(tool.statements(MODULE))
    gpu = _data(tmp_path / "gpu", stmts[:3])
    cpu = _data(tmp_path / "cpu", stmts[3:-1])
    assert tool.main(["--gpu-leg", str(gpu), "--cpu-leg", str(cpu), "--fail-under", "100"]) == 2
    assert "under 100.0 %" in capsys.readouterr().err
    assert tool.main(["--gpu-leg", str(gpu), "--cpu-leg", str(cpu), "--missed"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == f"{MODULE}: 1 missed" and listed[1].split()[0] == str(stmts[-1]), listed


def test_without_the_cpu_legs_data_the_report_is_the_gpu_leg_alone_and_says_so(tmp_path, capsys):
    stmts = sorted(tool.statements(MODULE))
    gpu = _data(tmp_path / "gpu", stmts[:3])
    assert tool.main(["--gpu-leg", str(gpu), "--cpu-leg", str(tmp_path / "none"), "--fail-under", "100"]) == 0
    out = capsys.readouterr().out
    assert "No data from the CPU leg" in out and "CPU_LEG_COVERAGE=" in out
    assert out.splitlines()[-2].split()[-2:] == [str(len(stmts) - 3), f"{100 * 3 / len(stmts):.1f}%"]
