"""benchmarks/front_door.py's reading of GNU time and its result files (the benchmark itself is run by hand).

The timing input is GNU time's own report of a real child process that holds a known amount of memory, so a change in
GNU time's format, or a unit slip (kbytes to GiB), fails here rather than in a figure written to docs/.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("front_door", ROOT / "benchmarks" / "front_door.py")
front_door = importlib.util.module_from_spec(spec)
spec.loader.exec_module(front_door)

pytestmark = pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="needs GNU time at /usr/bin/time")


def _timed(code: str) -> str:
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", code], capture_output=True, text=True)
    return done.stdout + done.stderr


def test_gnu_time_report_gives_wall_time_peak_rss_and_exit_status():
    figures = front_door.parse_time_v(_timed("import time; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.2)"))
    assert 0.29 < figures["peak_rss_gib"] < 1.0  # 300 MiB touched, plus the interpreter
    assert 1.2 <= figures["wall_s"] < 30 and figures["exit_status"] == 0
    assert front_door.parse_time_v(_timed("import sys; sys.exit(3)"))["exit_status"] == 3
    with pytest.raises(ValueError):
        front_door.parse_time_v("no report here")


def test_each_cpu_kind_gets_its_own_budget():
    assert front_door.cpu_kind({"avx512_bf16": True, "amx_bf16": True, "amx_tile": True}) == "amx"
    assert front_door.cpu_kind({"avx512_bf16": True, "amx_bf16": False, "amx_tile": False}) == "avx512_bf16"
    assert front_door.cpu_kind({"avx512_bf16": False, "amx_bf16": False, "amx_tile": False}) == "no_bf16"


def test_the_other_benchmarks_tables_name_the_kind_or_say_it_was_not_recorded():
    assert front_door.kind_label({"avx512_bf16": False, "amx_bf16": False, "amx_tile": False}) == "no bf16 units"
    assert front_door.kind_label({"avx512_bf16": True, "amx_bf16": False, "amx_tile": False}) == front_door.KINDS["avx512_bf16"]
    assert front_door.kind_label(None) == "not recorded"  # a record from before the flags were kept: no kind guessed
    make = {"wall_s": 9 * 60 + 4.0, "peak_rss_gib": 6.0}
    # 9 min 4 s: over AMX's 8.5 minutes, within the 11 minutes of bf16 units without AMX; 6.0 GiB is within 6.0
    assert front_door.verdicts("make", make, "amx") == {"wall_s <= 510": False, "peak_rss_gib <= 6": True}
    assert front_door.verdicts("make", make, "avx512_bf16") == {"wall_s <= 660": True, "peak_rss_gib <= 6": True}
    assert front_door.verdicts("make", {"wall_s": 600.0, "peak_rss_gib": 6.02}, "avx512_bf16")["peak_rss_gib <= 6"] is False
    test = {"wall_s": 14 * 60 + 43.0, "peak_rss_gib": 6.64}  # make test's peak has no budget
    assert front_door.verdicts("make test", test, "amx") == {"wall_s <= 720": False}
    assert front_door.verdicts("make test", test, "avx512_bf16") == {"wall_s <= 900": True}
    assert front_door.verdicts("make", make, "no_bf16") == {}


def test_the_dry_run_says_this_machines_kind_and_measures_nothing(tmp_path, capsys):
    out = tmp_path / "front-door.json"
    assert front_door.main(["--dry-run", "--out", str(out)]) == 0
    assert not out.exists()
    kind = front_door.cpu_kind(front_door.machine()["bf16_flags"])
    assert f"CPU kind: {front_door.KINDS[kind]}" in capsys.readouterr().out


def test_verdicts_and_the_table_come_from_the_figures(tmp_path):
    make = {"command": "make", "wall_s": 11 * 60 + 4.0, "peak_rss_gib": 5.91, "exit_status": 0}
    make["goals"] = front_door.verdicts("make", make, "avx512_bf16")
    test = {"command": "make test", "wall_s": 700.0, "peak_rss_gib": 3.2, "exit_status": 0}
    test["goals"] = front_door.verdicts("make test", test, "avx512_bf16")
    flags = {"avx512_bf16": True, "amx_bf16": False, "amx_tile": False}
    record = {"date": "2026-12-04T15:00:00+00:00", "commit": "0123456789abcdef", "runs": [make, test],
              "machine": {"cpu": "AMD EPYC", "cores": 2, "bf16_flags": flags}}
    records = front_door.append_result(record, tmp_path / "front-door.json")
    assert front_door.append_result(record, tmp_path / "front-door.json") == records + [record]
    plain = {**record, "machine": {**record["machine"], "bf16_flags": dict.fromkeys(flags, False)},
             "runs": [{**make, "goals": front_door.verdicts("make", make, "no_bf16")}]}
    table = front_door.render_markdown(records + [plain])
    assert "| avx512_bf16 | avx512_bf16 | `make` | 11 min 4 s | 5.91 GiB | 0 | no: wall_s <= 660 |" in table
    assert "| avx512_bf16 | `make test` | 11 min 40 s | 3.20 GiB | 0 | yes |" in table
    assert "| none | no_bf16 | `make` | 11 min 4 s | 5.91 GiB | 0 | no budget for this CPU kind |" in table


def test_pytest_summary_line():
    out = "...\n===== 1802 passed, 3 skipped, 2 warnings in 799.10s (0:13:19) =====\n"
    assert front_door.pytest_summary(out) == "1802 passed, 3 skipped, 2 warnings in 799.10s (0:13:19)"
