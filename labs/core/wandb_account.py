"""Whether wandb would log online: its mode and whether it would find an API key (reads files, never prompts).

Below the doctor (which reports it) and the training recipe (which logs offline when no key is found).
"""

from __future__ import annotations

import importlib.metadata
import netrc
import os
from pathlib import Path
from urllib.parse import urlparse

TRUE_VALUES = {"1", "true", "yes", "on"}


def wandb_facts() -> dict:
    """wandb's mode and whether it would find a key; reads files, never prompts."""
    mode = os.environ.get("WANDB_MODE", "").strip().lower() or None
    if os.environ.get("WANDB_DISABLED", "").strip().lower() in TRUE_VALUES:
        mode = "disabled"
    source = None
    if os.environ.get("WANDB_API_KEY", "").strip():
        source = "WANDB_API_KEY"
    else:
        host = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname
        path = Path(os.environ.get("NETRC") or os.path.expanduser("~/.netrc"))
        try:
            if path.exists() and netrc.netrc(str(path)).authenticators(host):
                source = str(path)
        except (netrc.NetrcParseError, OSError):
            pass  # an unreadable netrc means "not logged in", which is what wandb would conclude
    try:
        installed = importlib.metadata.version("wandb") is not None
    except importlib.metadata.PackageNotFoundError:
        installed = False
    return {"installed": installed, "mode": mode, "logged_in": source is not None, "key_source": source}
