"""Which catalog cases a full gate run replays: the gate file's ``cases``, else the default set.

The default set is one case per failure family, chosen so a warm gate run fits in about 8 minutes on a
2-core machine (docs/gate.md, "The default case set"); ``cases = [...]`` in the gate file picks any others.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from chaos.gate.gatefile import GateFile, applies, resolve_cases

DEFAULT_CASES: Final[tuple[str, ...]] = ("PB1", "ISR2", "L2", "D1", "MPI1")
"""A broker cut off (PB1), the ISR lost under a leader crash (ISR2 / L4), a leader crash with lagging
followers (L2), lost acks and retries (D1), a consumer slower than its poll interval (MPI1, only with a
``[consumer]``)."""


def gate_cases(gate: GateFile, catalog: Iterable[str]) -> tuple[str, ...]:
    """The cases the full run replays, in catalog order: the gate file's ``cases`` (validated by
    :func:`~chaos.gate.gatefile.resolve_cases`: known, applicable), else the :data:`DEFAULT_CASES` the
    catalog has that apply to the configuration."""
    known = tuple(catalog)
    chosen = resolve_cases(gate, known)
    if gate.cases is not None:
        return tuple(case for case in known if case in chosen)
    return tuple(case for case in known if case in DEFAULT_CASES and applies(case, gate))
