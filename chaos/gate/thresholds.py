"""The gate's thresholds measured on one run: the audit's availability facts (the longest produce outage,
each fault window's ack latency and recovery times; on the consumer side the group's longest stall, the
end-to-end latency and the longest partition handover) and its duplicate counts against the gate file's
limits (:class:`~chaos.gate.gatefile.Thresholds`).

Per fault window, the worst window counts. A threshold the case does not exercise — no fault window (a
client crash or a timing case), or a producer idle during and after its faults — is *not applicable*
and listed as such. One the case exercises but whose value the run does not show (sends after a heal, none
acknowledged before the run ended) is *unmeasured*: ``observed`` ``None``, never a pass — the case is
inconclusive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from chaos.audit.facts import AuditFacts, FaultWindow
from chaos.gate.gatefile import THRESHOLD_KEYS, Thresholds
from chaos.history import Delivery, Event, SendInvoke, SendOutcome
from chaos.run.manifest import ThresholdResult

UNITS: Final = {
    "longest_outage_s": "s",
    "p99_ack_latency_ms": "ms",
    "heal_to_first_ack_s": "s",
    "heal_to_first_delivery_s": "s",
    "duplicates": "",
    "duplicate_rate": "",
    "max_consume_gap_s": "s",
    "p99_e2e_latency_ms": "ms",
    "max_handover_s": "s",
}
DUPLICATE_ANOMALIES: Final = (
    "duplicate_in_log",
    "duplicate_delivery_after_rebalance",
    "duplicate_delivery_other",
)
"""What the ``duplicates`` threshold counts: every copy beyond the first, in the log or delivered."""


@dataclass(frozen=True)
class Measurement:
    """One threshold on one run. ``observed`` ``None``: the case exercises it but the run does not show
    its value (``note`` says why). ``window``: the fault window the (worst) value comes from."""

    name: str
    limit: float
    observed: float | None
    window: str | None = None
    note: str = ""

    @property
    def unit(self) -> str:
        return UNITS[self.name]

    @property
    def measured(self) -> bool:
        return self.observed is not None

    @property
    def passed(self) -> bool:
        return self.observed is not None and self.observed <= self.limit

    def result(self) -> ThresholdResult:
        """As ``scenario.json`` records it (:class:`~chaos.run.manifest.ThresholdResult`)."""
        return ThresholdResult(self.name, self.limit, self.observed, self.passed, self.unit)

    def describe(self) -> str:
        """``p99_ack_latency_ms 5750 ms > 5000 ms (crash broker-1)`` — for messages."""
        unit = f" {self.unit}" if self.unit else ""
        where = f" ({self.window})" if self.window else ""
        if self.observed is None:
            return f"{self.name} not measured (limit {_num(self.limit)}{unit}){where}: {self.note}"
        sign = "<=" if self.passed else ">"
        return f"{self.name} {_num(self.observed)}{unit} {sign} {_num(self.limit)}{unit}{where}"


@dataclass(frozen=True)
class Measured:
    """Every threshold of a case on one run: the measurements, and the ones that do not apply (with why)."""

    measurements: tuple[Measurement, ...] = ()
    not_applicable: tuple[str, ...] = ()

    @property
    def broken(self) -> tuple[Measurement, ...]:
        return tuple(m for m in self.measurements if m.measured and not m.passed)

    @property
    def unmeasured(self) -> tuple[Measurement, ...]:
        return tuple(m for m in self.measurements if not m.measured)

    def results(self) -> tuple[ThresholdResult, ...]:
        return tuple(m.result() for m in self.measurements)


def _num(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def window_label(window: FaultWindow, windows: Sequence[FaultWindow]) -> str:
    """``crash broker-1``, numbered when the run has several windows of that fault and target."""
    label = f"{window.fault} {window.target}"
    same = [w for w in windows if w.fault == window.fault and w.target == window.target]
    return label if len(same) == 1 else f"{label} #{same.index(window) + 1}"


def _between(monos: Sequence[float], start: float, end: float | None) -> bool:
    return any(start <= m and (end is None or m <= end) for m in monos)


def _worst(
    name: str,
    limit: float,
    values: Sequence[tuple[float | None, str]],
    missing: str,
) -> Measurement:
    """The worst of per-window values; unmeasured if any applicable window has no value."""
    for value, where in values:
        if value is None:
            return Measurement(name, limit, None, where, missing)
    value, where = max(values, key=lambda v: v[0] or 0.0)
    return Measurement(name, limit, value, where)


CONSUMER_THRESHOLDS: Final = ("max_consume_gap_s", "p99_e2e_latency_ms", "max_handover_s")
"""The thresholds judged on the audit's consumer side (``availability.consumer``), over the whole run."""


def _consumer_side(name: str, limit: float, facts: AuditFacts, delivered: bool) -> Measurement | str:
    """One consumer-side threshold on the run, or why it does not apply."""
    consumer = facts.availability.consumer
    if not delivered:
        return "no consumer group consumes in the case (no delivery)"
    if name == "max_consume_gap_s":  # the group's own stalls, and a service's input's (docs/audit.md)
        gap = consumer.longest_stall()
        if gap is None:  # the group delivered, and no record ever waited beyond its position
            return Measurement(name, limit, 0.0, "whole run")
        where = f"{gap.topic}-{gap.partition}" + ("" if gap.resumed else ", never resumed")
        return Measurement(name, limit, gap.gap_s, where)
    if name == "p99_e2e_latency_ms":
        return Measurement(
            name,
            limit,
            consumer.e2e.p99_ms,
            "whole run",
            "no delivered value has a time it became readable (no acknowledged send, or at read_committed "
            "no recorded commit of its transaction)",
        )
    handover = consumer.longest_handover()
    if handover is None:
        return (
            "no partition changed owner (one that was never consumed again is judged by max_consume_gap_s: "
            "its stall lasts to the group's last event)"
        )
    where = f"{handover.topic}-{handover.partition} {handover.from_process} → {handover.to_process}"
    return Measurement(name, limit, handover.handover_s, where)


def measure(limits: Thresholds, facts: AuditFacts, events: Iterable[Event]) -> Measured:
    """Judge ``limits`` on one run: its audit facts and its history (for what the workload did when)."""
    history = list(events)
    invokes = [e.mono for e in history if isinstance(e, SendInvoke)]
    sends = sorted([*invokes, *(e.mono for e in history if isinstance(e, SendOutcome))])
    deliveries = [e.mono for e in history if isinstance(e, Delivery)]
    windows = facts.availability.windows
    labels = [window_label(w, windows) for w in windows]
    found: list[Measurement] = []
    skipped: list[str] = []

    def skip(name: str, why: str) -> None:
        skipped.append(f"{name}: {why}")

    no_window = "the case injects no fault (a client crash or a timing case): no fault window to judge"
    for name in THRESHOLD_KEYS:
        limit = getattr(limits, name)
        if limit is None:
            continue
        if name in CONSUMER_THRESHOLDS:
            judged = _consumer_side(name, limit, facts, bool(deliveries))
            if isinstance(judged, str):
                skip(name, judged)
            else:
                found.append(judged)
        elif name == "longest_outage_s":
            if not invokes:
                skip(name, "the case sends nothing")
            else:
                outage = facts.availability.longest_outage_s
                found.append(
                    Measurement(name, limit, outage, "whole run", "the audit could not compute the outage")
                )
        elif name in ("duplicates", "duplicate_rate"):
            counts = facts.counts()
            copies = sum(counts[a] for a in DUPLICATE_ANOMALIES)
            if name == "duplicates":
                found.append(Measurement(name, limit, float(copies), "whole run"))
            elif facts.totals.sends == 0:
                skip(name, "the case sends nothing: no rate")
            else:
                found.append(Measurement(name, limit, copies / facts.totals.sends, "whole run"))
        elif not windows:
            skip(name, no_window)
        elif name == "p99_ack_latency_ms":
            active = [
                (w, label)
                for w, label in zip(windows, labels, strict=True)
                if _between(sends, w.inject_mono, w.heal_mono)
            ]
            acked = [(w.during.p99_ms, label) for w, label in active if w.during.count]
            if not active:
                skip(name, "the case's producer sends nothing during its fault windows")
            elif not acked:
                found.append(
                    Measurement(
                        name,
                        limit,
                        None,
                        ", ".join(label for _, label in active),
                        "no send was acknowledged during any fault window (longest_outage_s judges the gap)",
                    )
                )
            else:
                found.append(_worst(name, limit, acked, ""))
        else:
            after = sends if name == "heal_to_first_ack_s" else [*invokes, *deliveries]
            healed = [
                (w, label)
                for w, label in zip(windows, labels, strict=True)
                if w.heal_mono is not None
                and any(m > w.heal_mono for m in after)
                and (name == "heal_to_first_ack_s" or bool(deliveries))
            ]
            if not healed:
                skip(
                    name,
                    "the case's producer sends nothing after its faults heal"
                    if name == "heal_to_first_ack_s"
                    else "no consumer group consumes in the case, or nothing is sent or delivered after its "
                    "faults heal",
                )
                continue
            what = "acknowledged" if name == "heal_to_first_ack_s" else "delivered"
            values = [(getattr(w, name), label) for w, label in healed]
            found.append(
                _worst(name, limit, values, f"nothing was {what} after the heal before the run ended")
            )
    return Measured(tuple(found), tuple(skipped))
