"""The words every stage shares: the guarantees a client configuration can claim and the verdicts a run
can reach. Defined once here, below every stage of the pipeline."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal, get_args

Guarantee = Literal["at_most_once", "at_least_once", "idempotent", "exactly_once"]
GUARANTEES: Final[tuple[str, ...]] = get_args(Guarantee)

Verdict = Literal["pass", "fail", "unknown"]
"""``unknown``: inconclusive — the facts could not be established, or a precondition of the case (the fault
landed) did not hold. Never a pass."""
VERDICTS: Final[tuple[str, ...]] = get_args(Verdict)

VERDICT_EXIT: Final[Mapping[str, int]] = MappingProxyType({"pass": 0, "fail": 1, "unknown": 3})
"""A verdict's exit code; 2 is a harness error or bad input (never a verdict) in every command."""
HARNESS_ERROR_EXIT: Final = 2
