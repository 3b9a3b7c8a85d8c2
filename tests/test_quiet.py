"""labs.core.quiet: one call silences third-party progress bars and info lines, and nothing else.

Each case runs in a fresh interpreter (the switches are process-wide) with the libraries the notebooks load, and first
shows that the noise is real without the call.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

NOISE = textwrap.dedent(
    """
    import os, sys, warnings
    os.environ["WANDB_MODE"] = "offline"
    import huggingface_hub  # imported before the call: its switch was read at import
    if QUIET:
        from labs.core.quiet import quiet_notebook
        quiet_notebook()
        quiet_notebook()  # twice is harmless
    from tqdm.auto import tqdm
    for _ in tqdm(range(3), desc="Loading weights"):
        pass
    if QUIET:  # the import costs seconds of CPU: test_the_noise_is_real reads the line in its source instead
        import transformers.integrations.integration_utils  # prints the wandb offline line at import
    from transformers.utils import logging as hf_logging
    import datasets
    from huggingface_hub.utils import are_progress_bars_disabled
    print("bars:", hf_logging.is_progress_bar_enabled(), datasets.is_progress_bar_enabled(), not are_progress_bars_disabled())
    warnings.warn("`vllm_importance_sampling_cap` is deprecated", FutureWarning)
    print("ERROR: the course's own error line", file=sys.stderr)
    """
)


def start(quiet: bool) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS",
                                                            "HF_DATASETS_DISABLE_PROGRESS_BARS", "WANDB_SILENT")}
    return subprocess.Popen([sys.executable, "-W", "default", "-c", NOISE.replace("QUIET", str(quiet))], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def outputs():
    children = [start(False), start(True)]  # at once: each is mostly the libraries' import time
    texts = [child.communicate(timeout=300)[0] for child in children]
    assert [child.returncode for child in children] == [0, 0], texts
    return texts


def test_the_noise_is_real(outputs):
    import importlib.util
    from pathlib import Path

    from labs.core.quiet import WANDB_OFFLINE_LINE, WANDB_OFFLINE_MODULE

    loud, _ = outputs
    assert "Loading weights" in loud and "bars: True True True" in loud
    source = Path(importlib.util.find_spec(WANDB_OFFLINE_MODULE).origin).read_text(encoding="utf-8")
    assert f'print("{WANDB_OFFLINE_LINE}")' in source  # at import, under WANDB_MODE=offline


def test_the_call_removes_bars_and_the_wandb_line_and_keeps_warnings_and_errors(outputs):
    _, quiet = outputs
    assert "Loading weights" not in quiet and "it/s]" not in quiet and "[INFO]" not in quiet
    assert "bars: False False False" in quiet
    assert "FutureWarning: `vllm_importance_sampling_cap` is deprecated" in quiet
    assert "ERROR: the course's own error line" in quiet
