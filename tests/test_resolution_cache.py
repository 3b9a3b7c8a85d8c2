"""tests/resolution_cache.py: a stored report is reused only for the same file and options, while young."""

import time

from resolution_cache import FRESH_ENV, MAX_AGE_S, ReportCache, resolution_key

REPORT = {"version": "1", "install": [{"metadata": {"name": "torch", "version": "2.13.0"}}]}


def test_the_key_follows_the_file_and_the_options():
    key = resolution_key("torch==2.13.0\n", ["--python-version", "3.12"])
    assert key == resolution_key("torch==2.13.0\n", ["--python-version", "3.12"])
    assert key != resolution_key("torch==2.13.1\n", ["--python-version", "3.12"])
    assert key != resolution_key("torch==2.13.0\n", ["--python-version", "3.11"])


def test_a_stored_report_is_reused_while_young(tmp_path, monkeypatch):
    monkeypatch.delenv(FRESH_ENV, raising=False)
    cache = ReportCache(tmp_path, "k")
    assert cache.load() is None
    cache.store(REPORT)
    assert cache.load() == REPORT and [p.name for p in tmp_path.iterdir()] == ["report-k.json"]
    assert ReportCache(tmp_path, "other").load() is None
    assert cache.load(now=time.time() + MAX_AGE_S + 60) is None  # too old: resolved again
    monkeypatch.setenv(FRESH_ENV, "1")
    assert cache.load() is None


def test_a_damaged_report_is_not_trusted(tmp_path, monkeypatch):
    monkeypatch.delenv(FRESH_ENV, raising=False)
    cache = ReportCache(tmp_path, "k")
    cache.path.write_text('{"version": "1", "inst')
    assert cache.load() is None
    cache.path.write_text('{"version": "1"}')
    assert cache.load() is None
