"""plotly.js, written once per report tree and loaded by every page through a relative path.

A report tree — the pytest plugin's report directory (so ``chaos run`` and a gate's ``--out`` too), or the
directory ``chaos report`` renders — holds one copy, ``<root>/assets/plotly-<version>.min.js``. Pages
reference it by a relative URL, so they open from ``file://`` without a network and a tree copied whole
keeps working. A page rendered with no root given uses the copy of the nearest directory above it that
has one (a run inside a report tree), else writes one beside itself (a lone run directory).
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from urllib.parse import quote

from chaos.run.files import write_atomic
from chaos.run.layout import ASSETS_DIR


@cache
def plotly_js() -> str:
    """plotly.js (minified) from the installed ``plotly`` package."""
    from plotly.offline import get_plotlyjs  # type: ignore[import-untyped,unused-ignore]

    return str(get_plotlyjs())


@cache
def plotly_version() -> str:
    from plotly.offline import get_plotlyjs_version  # type: ignore[import-untyped,unused-ignore]

    return str(get_plotlyjs_version())


def plotly_path(root: Path) -> Path:
    """Where a report tree rooted at ``root`` keeps plotly.js (the version is in the name, so pages rendered
    by an older harness keep theirs)."""
    return root / ASSETS_DIR / f"plotly-{plotly_version()}.min.js"


def asset_root(start: Path) -> Path:
    """The nearest of ``start`` and the directories above it that holds this version's plotly.js;
    ``start`` itself when none does."""
    start = start.absolute()
    return next((d for d in (start, *start.parents) if plotly_path(d).is_file()), start)


def ensure_plotly(root: Path) -> Path:
    """``<root>/assets/plotly-<version>.min.js``, written (atomically) only if absent or different."""
    path = plotly_path(root)
    source = plotly_js()
    try:
        data = source.encode("utf-8")
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return path
    except OSError:
        pass  # absent or unreadable: (re)write it
    return write_atomic(path, source)


def relative_url(target: Path, page_dir: Path) -> str:
    """``target`` as a URL relative to a page in ``page_dir`` (``../../assets/plotly-4.1.1.min.js``)."""
    rel = os.path.relpath(target.absolute(), page_dir.absolute())
    return "/".join(quote(part) for part in Path(rel).parts)
