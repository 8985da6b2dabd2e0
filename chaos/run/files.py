"""The run directory's JSON files: written atomically, read back with errors that name the file.

Each format has one owning module (``scenario.json``: :mod:`chaos.run.manifest`; ``audit.json``:
:mod:`chaos.audit.auditfile`); they share these helpers and :class:`RunFileError`.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from chaos.errors import ChaosError


class RunFileError(ChaosError, ValueError):
    """A file of the run directory is malformed; the message names the file or field and the fix."""


def write_atomic(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename: a reader never sees half a file,
    and two writers in one process never share a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_json_object(path: Path) -> dict[str, Any] | None:
    """``path``'s JSON object, ``None`` when there is no such file; unreadable JSON, or JSON that is not an
    object, raises :class:`RunFileError`."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFileError(f"{path}: not readable JSON ({exc}); delete it or re-run the scenario") from None
    if not isinstance(data, dict):
        raise RunFileError(f"{path}: expected a JSON object; got {type(data).__name__}")
    return data
