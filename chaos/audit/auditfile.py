"""``<run_dir>/audit.json``: the :class:`~chaos.audit.verdict.AuditResult` of a run, written by
:func:`chaos.audit.run.audit_run` and read back by the report. The one owner of the file."""

from __future__ import annotations

import os
from pathlib import Path

from chaos.audit.verdict import AuditResult
from chaos.errors import ChaosError
from chaos.run.files import RunFileError, read_json_object, write_atomic
from chaos.run.layout import AUDIT_NAME


def audit_path(run_dir: str | os.PathLike[str]) -> Path:
    """``<run_dir>/audit.json``."""
    return Path(run_dir) / AUDIT_NAME


def write_audit(run_dir: str | os.PathLike[str], result: AuditResult, *, path: Path | None = None) -> Path:
    """Write ``audit.json`` atomically (``AuditResult.to_json()``) into ``run_dir``, or to ``path``;
    returns where."""
    return write_atomic(path if path is not None else audit_path(run_dir), result.to_json())


def read_audit(run_dir: str | os.PathLike[str]) -> AuditResult | None:
    """The run's audit result, ``None`` if there is no ``audit.json``; a malformed one raises
    :class:`~chaos.run.files.RunFileError`."""
    path = audit_path(run_dir)
    data = read_json_object(path)
    if data is None:
        return None
    try:
        return AuditResult.from_dict(data)
    except (KeyError, TypeError, ValueError, ChaosError) as exc:
        raise RunFileError(
            f"{path}: not an audit result written by `chaos audit` ({exc!r}); re-run `chaos audit {run_dir}`"
        ) from None
