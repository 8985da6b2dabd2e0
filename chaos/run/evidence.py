"""A run's evidence: the symptoms it showed or not, and the preconditions of its case (``evidence.json``).

Two kinds of check, kept apart (docs/scenarios.md, "Verdict and evidence"):

- a **symptom** (a client log line, an error code, a timer's value) is evidence: recorded as observed or
  not observed, shown in the report, and a failure only in strict mode (``--chaos-strict-symptoms``, on by
  default in the ``faithful`` profile), which is meant for studying a client version;
- a **precondition** is something the case needs to *be* the case (the fault cut the leader, the member
  really left its group). One that did not hold makes the run inconclusive: its verdict is ``unknown``
  with the precondition as the reason, never a pass.

This module is the one owner of ``evidence.json``.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args

from chaos.errors import ChaosError
from chaos.run.files import RunFileError, read_json_object, write_atomic
from chaos.run.layout import EVIDENCE_NAME
from chaos.run.terms import Verdict

EVIDENCE_FORMAT: Final = 1
CheckKind = Literal["symptom", "precondition"]
CHECK_KINDS: Final[tuple[str, ...]] = get_args(CheckKind)
MAX_DETAIL_CHARS: Final = 2000


class EvidenceError(ChaosError, ValueError):
    """A check or ``evidence.json`` is malformed; the message names the field."""


@dataclass(frozen=True)
class Check:
    """One check of a run: what was looked for, whether it was seen, and what was seen instead."""

    kind: CheckKind
    description: str
    observed: bool
    detail: str = ""

    def __post_init__(self) -> None:
        if self.kind not in CHECK_KINDS:
            raise EvidenceError(f"Check.kind: expected one of {', '.join(CHECK_KINDS)}; got {self.kind!r}")
        if type(self.description) is not str or not self.description.strip():
            raise EvidenceError(f"Check.description: expected a non-empty str; got {self.description!r}")
        if type(self.observed) is not bool:
            raise EvidenceError(f"Check.observed: expected a bool; got {self.observed!r}")
        if type(self.detail) is not str:
            raise EvidenceError(f"Check.detail: expected a str; got {self.detail!r}")
        if len(self.detail) > MAX_DETAIL_CHARS:
            object.__setattr__(self, "detail", self.detail[:MAX_DETAIL_CHARS] + " …")

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "description": self.description,
            "observed": self.observed,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: object) -> Check:
        if not isinstance(data, dict):
            raise EvidenceError(f"a check: expected an object; got {data!r}")
        return cls(
            kind=data.get("kind"),  # type: ignore[arg-type]  # validated by __post_init__
            description=data.get("description"),  # type: ignore[arg-type]
            observed=data.get("observed"),  # type: ignore[arg-type]
            detail=data.get("detail", ""),
        )


@dataclass(frozen=True)
class Evidence:
    """Every check of one run, in the order they were made, and whether the run was strict about symptoms."""

    checks: tuple[Check, ...] = ()
    strict: bool = False

    @property
    def symptoms(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.kind == "symptom")

    @property
    def preconditions(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.kind == "precondition")

    def missing_symptoms(self) -> tuple[Check, ...]:
        """Symptoms looked for and not observed (a failure only in strict mode)."""
        return tuple(c for c in self.symptoms if not c.observed)

    def unmet_preconditions(self) -> tuple[Check, ...]:
        """Preconditions that did not hold: each makes the run inconclusive."""
        return tuple(c for c in self.preconditions if not c.observed)

    def verdict(self, audit_verdict: Verdict) -> Verdict:
        """The run's verdict: the audit's, unless a precondition did not hold (then ``unknown``)."""
        return "unknown" if self.unmet_preconditions() else audit_verdict

    def reasons(self) -> tuple[str, ...]:
        """Why the run is inconclusive (empty when every precondition held)."""
        return tuple(
            f"precondition not met: {c.description}" + (f" ({c.detail})" if c.detail else "")
            for c in self.unmet_preconditions()
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": EVIDENCE_FORMAT,
            "strict": self.strict,
            "checks": [c.to_dict() for c in self.checks],
        }

    @classmethod
    def from_dict(cls, data: object) -> Evidence:
        if not isinstance(data, dict) or data.get("format") != EVIDENCE_FORMAT:
            raise EvidenceError(f"{EVIDENCE_NAME}: expected an object with format {EVIDENCE_FORMAT}")
        checks = data.get("checks")
        if not isinstance(checks, list):
            raise EvidenceError(f"{EVIDENCE_NAME}: checks must be a list; got {checks!r}")
        strict = data.get("strict", False)
        if type(strict) is not bool:
            raise EvidenceError(f"{EVIDENCE_NAME}: strict must be a bool; got {strict!r}")
        return cls(tuple(Check.from_dict(c) for c in checks), strict)


class EvidenceLog:
    """The checks of a run as they are made (thread-safe); :meth:`snapshot` freezes them."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self._checks: list[Check] = []
        self._lock = threading.Lock()

    def add(self, kind: CheckKind, description: str, observed: bool, detail: object = "") -> bool:
        """Record one check; returns ``observed`` so a scenario can branch on it."""
        check = Check(kind, description, bool(observed), detail if isinstance(detail, str) else repr(detail))
        with self._lock:
            self._checks.append(check)
        return check.observed

    def snapshot(self) -> Evidence:
        with self._lock:
            return Evidence(tuple(self._checks), self.strict)


def write_evidence(run_dir: Path, evidence: Evidence) -> Path:
    """Write ``<run_dir>/evidence.json`` atomically."""
    return write_atomic(
        run_dir / EVIDENCE_NAME, json.dumps(evidence.to_dict(), indent=2, sort_keys=True) + "\n"
    )


def read_evidence(run_dir: Path) -> Evidence | None:
    """The run's evidence, or ``None`` when the run wrote none (a run from before evidence, or a torn one).
    A malformed file raises :class:`EvidenceError` naming it."""
    try:
        data = read_json_object(run_dir / EVIDENCE_NAME)
    except RunFileError as exc:
        raise EvidenceError(str(exc)) from exc
    return None if data is None else Evidence.from_dict(data)
