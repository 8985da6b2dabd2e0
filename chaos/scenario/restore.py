"""Evidence of the seed's restore reader (end offsets → assign → seek → poll), shared by the cases that
fault one partition leader while a client restores (PB1, MD1): which call was the faulted leader's, and
the checks every such case makes of it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chaos.run.events import Event, ProbeCall
from chaos.scenario import views
from chaos.scenario.result import ScenarioResult
from chaos.workload import RestoreResult


@dataclass(frozen=True)
class RestoreCalls:
    """The end-offsets calls of one restore: the faulted leader's partition's, and the others' (in order)."""

    led: int
    mine: ProbeCall
    others: tuple[ProbeCall, ...]


def restore_calls(result: ScenarioResult, order: Sequence[int], led: int) -> RestoreCalls | None:
    """The restore's calls, after the precondition that it asked each partition's end offsets once
    (``None`` when it did not: the run is then inconclusive)."""
    calls = views.probe_calls(list(result.events), "list_offsets")
    by_partition = {p.partition: p for p in calls if p.partition is not None}
    if not result.precondition(
        f"the restore asked the end offsets of each of the {len(order)} partitions once",
        len(calls) == len(order) and set(by_partition) == set(order),
        [(p.partition, p.error, round(p.duration_ms)) for p in calls],
    ):
        return None
    return RestoreCalls(led, by_partition[led], tuple(by_partition[p] for p in order if p != led))


def restored_everything(
    result: ScenarioResult,
    calls: RestoreCalls,
    restored: Sequence[RestoreResult],
    broker: int,
    timeout_s: float,
) -> None:
    """The remedy worked: every partition restored, the faulted leader's end offsets without error, in T."""
    result.symptom(
        "every partition was restored",
        all(r.ok for r in restored),
        [(r.partition, r.error) for r in restored],
    )
    mine = calls.mine
    result.symptom(
        f"the end offsets of broker {broker}'s partition p{calls.led} came without error",
        mine.error is None,
        mine,
    )
    result.symptom(
        f"the end offsets of p{calls.led} came within T = {timeout_s:.1f} s",
        mine.duration_ms < timeout_s * 1000,
        f"{mine.duration_ms:.0f} ms",
    )


def timed_out_at_t(result: ScenarioResult, calls: RestoreCalls, broker: int, timeout_s: float) -> None:
    """The case: the faulted leader's end-offsets call waited for its whole timeout T, then ``_TIMED_OUT``."""
    mine = calls.mine
    result.symptom(
        f"the end offsets of broker {broker}'s partition p{calls.led} failed with _TIMED_OUT",
        mine.error == "_TIMED_OUT",
        mine,
    )
    result.symptom(
        f"the call failed after ≈ T ({timeout_s:.1f} s: ≥ 0.95 T, ≤ T + 1.5 s)",
        0.95 * timeout_s * 1000 <= mine.duration_ms <= timeout_s * 1000 + 1500,
        f"{mine.duration_ms:.0f} ms",
    )


def given_t(result: ScenarioResult, calls: RestoreCalls, timeout_s: float) -> None:
    """The faulted leader's end-offsets call was given the timeout the variant asked for."""
    result.symptom(
        f"the end-offsets call of p{calls.led} was given T = {timeout_s:.1f} s",
        calls.mine.timeout_ms is not None and abs(calls.mine.timeout_ms - timeout_s * 1000) < 1.0,
        calls.mine.timeout_ms,
    )


def restore_logs(events: Sequence[Event]) -> list[tuple[str | None, str]]:
    """The restore client's librdkafka log lines (facility, last 90 characters), for the test output."""
    return [
        (e.facility, (e.message or "")[-90:])
        for e in views.client_logs(list(events))
        if e.process == "restore"
    ]
