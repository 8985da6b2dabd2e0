"""Where the harness keeps caches and generated files.

Output never goes next to the installed package (that may be site-packages): run artifacts land under
the project being tested (pytest's rootdir, or the current directory for the ``chaos`` command) unless
``$CHAOS_REPORT_DIR`` or ``--chaos-report-dir`` says otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The source checkout holding this package, when it runs from one (an editable install); inside an
installed wheel it is site-packages. Only for reading the checkout's own files, never for output."""


def cache_dir() -> Path:
    """Root of every cache (build contexts, jars): ``$CHAOS_CACHE_DIR`` or ~/.cache/chaos-harness."""
    root = os.environ.get("CHAOS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chaos-harness"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def reports_dir(project: Path | None = None) -> Path:
    """Directory for run artifacts, absolute: ``$CHAOS_REPORT_DIR``, else ``reports/`` under ``project``
    (the pytest plugin passes its rootdir), else under the current directory."""
    chosen = os.environ.get("CHAOS_REPORT_DIR")
    path = Path(chosen).expanduser() if chosen else (project or Path.cwd()) / "reports"
    return path.absolute()
