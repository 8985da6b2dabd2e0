"""Where the harness keeps caches and generated files."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    """Root of every cache (build contexts, jars): ``$CHAOS_CACHE_DIR`` or ~/.cache/chaos-harness."""
    root = os.environ.get("CHAOS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chaos-harness"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def reports_dir() -> Path:
    """Default directory for run artifacts: ``$CHAOS_REPORT_DIR`` or reports/ in the repo."""
    return Path(os.environ.get("CHAOS_REPORT_DIR") or REPO_ROOT / "reports")
