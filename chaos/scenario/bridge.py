"""The bridge from :mod:`chaos.faults` to the history: a fault record becomes a ``FaultEvent``."""

from __future__ import annotations

from typing import Any, Final

from chaos.faults.base import FaultRecord
from chaos.history import FaultEvent, json_text

FAULT_PROCESS: Final = "nemesis"


def event_target(record: FaultRecord) -> str:
    """A fault's ``target`` as its history events say it: the brokers it hit (``broker-2``,
    ``broker-1,broker-3``), else the target as asked."""
    return ",".join(f"broker-{b}" for b in record.brokers) or record.target


def fault_event(run_id: str, action: str, record: FaultRecord) -> FaultEvent:
    """A fault record of :mod:`chaos.faults` as a history event (``inject`` or ``heal``).

    ``target`` is what was hit (``broker-2``, ``broker-1,broker-3``), ``params`` the fault's parameters
    plus the target as asked (``leader of t-0``) and, on a heal, the fault's measured ``effect`` and its
    ``notes`` (why no effect was measured, a failed heal attempt). A heal's
    ``message`` is the record's error: the inject's failure (a fault undone after its inject raised);
    ``error`` (``FaultError``) marks a heal not done.
    """
    params: dict[str, Any] = {k: list(v) if isinstance(v, tuple) else v for k, v in record.params}
    params["asked"] = record.target
    params["seq"] = record.seq
    if action == "heal" and record.effect is not None:
        params["effect"] = {
            "observed": record.effect.observed,
            "evidence": record.effect.evidence,
            "required": record.effect.required,
        }
    if action == "heal" and record.notes:  # why an effect was not measured, a failed attempt, what it left
        params["notes"] = list(record.notes)
    target = event_target(record)
    # Listeners hear successful heals only, so a heal event's record has ``healed_at``; an error on it is the
    # inject's failure (the fault was undone all the same): evidence in ``message``, not a failed heal.
    failed = action == "heal" and record.healed_at is None and record.error is not None
    note = record.error if action == "heal" else None
    return FaultEvent(
        run_id=run_id,
        process=FAULT_PROCESS,
        ts=record.healed_at if action == "heal" and record.healed_at is not None else record.injected_at,
        action="heal" if action == "heal" else "inject",
        fault=record.kind,
        target=target,
        params=json_text(params),
        error="FaultError" if failed else None,
        message=note,
    )
