"""Transactions (docs/audit.md, "Transactions"): the attempts, the span each covers and the state each
ended in, on both engines.

Spark: the attempts are paired on the driver by the reference's :func:`~chaos.audit.facts.txn_attempts`
(:func:`attempts_by_run`); :func:`in_attempts` gives each invoke and delivery the attempt its process's span
holds it in (only those processes' rows are sorted); :func:`attempt_states` collects what the log shows of
each attempt, one row per attempt, for the per-value pass (:mod:`chaos.audit.checks.values`) to join.

Reference: :func:`transaction_view`, what the transactions say about each sent value
(:class:`Transactions`).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chaos.audit.checks.frames import DELIVERY, local_frame
from chaos.audit.facts import (
    ISOLATION_LEVELS,
    LogRecord,
    TxnAttempt,
    TxnMarkerRow,
    TxnState,
    attempt_state,
    txn_attempts,
)
from chaos.run.events import Delivery, DrainEnd, SendInvoke, SendOutcome, TxnMarker

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

RC: Final = "read_committed"
"""The isolation level at which a reader sees no record of an open or aborted transaction."""
Position = tuple[str, int, int]
"""A record's place in the log: ``(topic, partition, offset)``."""
Available = tuple[str, Position, float, int]
"""A send's record becoming readable by the group: ``(value_id, position, mono, index)``."""


# Spark


def attempts_by_run(rows: list[Any]) -> tuple[dict[str, list[TxnAttempt]], dict[tuple[str, int], float]]:
    """Each run's transaction attempts, paired on the driver by the reference's function (markers are few:
    :func:`~chaos.audit.checks.frames.driver_rows`), and the mono of every end marker:
    ``(run_id, index) -> mono``."""
    markers = [r for r in rows if r.kind == "txn"]
    by_run: dict[str, list[TxnMarkerRow]] = defaultdict(list)
    for m in markers:
        by_run[m.run_id].append((m.i, m.process, m.transactional_id, m.action, m.outcome, m.error))
    monos = {(m.run_id, m.i): m.mono for m in markers if m.action != "begin"}
    return {run: txn_attempts(of_run) for run, of_run in by_run.items()}, monos


def in_attempts(F: Any, spark: Any, rows: DataFrame, attempts: dict[str, list[TxnAttempt]]) -> DataFrame:
    """``rows`` with ``att``: for a ``send_invoke`` or a delivery the attempt whose span holds it (the latest
    ``begin`` of its process before it, if the row comes before that attempt's ``close``), else null. Only
    the invokes and deliveries of processes that began a transaction are sorted, per process."""
    spans = [
        (run, a.process, a.begin, a.close, a.att)
        for run, of_run in attempts.items()
        for a in of_run
        if a.begin is not None
    ]
    if not spans:
        return rows.withColumn("att", F.lit(None).cast("long"))
    from pyspark.sql import Window

    begins = local_frame(spark, spans, "run_id string, process string, index long, close long, att long")
    processes = F.broadcast(begins.select("run_id", "process").distinct().withColumn("tp", F.lit(True)))
    flagged = rows.join(processes, ["run_id", "process"], "left")
    candidate = ((F.col("kind") == "send_invoke") | (F.col("src") == DELIVERY)) & F.col("tp")
    at = F.coalesce(F.col("index"), F.col("di"))  # a delivery's index is in di
    plain = (
        flagged.where(~F.coalesce(candidate, F.lit(False)))
        .drop("tp")
        .withColumn("att", F.lit(None).cast("long"))
    )
    span = F.struct(F.col("close"), F.col("att"))
    ordered = Window.partitionBy("run_id", "process").orderBy(at)
    latest = F.last(F.col("span"), ignorenulls=True).over(
        ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    assigned = (
        flagged.where(candidate)
        .drop("tp")
        .withColumn("span", F.lit(None).cast("struct<close:bigint,att:bigint>"))
        .unionByName(
            begins.select("run_id", "process", "index", span.alias("span")), allowMissingColumns=True
        )
        .withColumn("open", latest)
        .where(F.col("span").isNull())  # the invokes, each with the span it falls in
        .withColumn(
            "att",
            F.when(F.col("open.close").isNull() | (at < F.col("open.close")), F.col("open.att")),
        )
        .drop("span", "open")
    )
    return plain.unionByName(assigned)


def attempt_states(
    F: Any,
    view: DataFrame,
    attempts: dict[str, list[TxnAttempt]],
    commits: dict[tuple[str, int], float],
) -> DataFrame | None:
    """``(run_id, att, state, commit_mono, commit_index, last_send_mono)`` of every attempt: its recorded end
    and what the log shows of its sends (collected on the driver; one row per attempt), its recorded commit
    marker (null unless it ended with a commit ``ok``) and the mono of its last ``send_invoke`` (null: no
    send), or ``None`` when there is no attempt."""
    if not attempts:
        return None
    seen: dict[tuple[str, int], tuple[bool, bool, float | None]] = {}
    if any(a.begin is not None for of_run in attempts.values() for a in of_run):
        acked = F.col("ack").isNotNull()
        observed = (
            view.where(F.col("att").isNotNull() & (F.col("kind") == "send_invoke"))
            .groupBy("run_id", "att")
            .agg(F.max(F.when(acked, F.col("seen_committed"))).alias("c"),
                 F.max(F.when(acked, F.col("seen_aborted"))).alias("a"), F.max("mono").alias("last"))
            .collect()
        )  # fmt: skip
        seen = {(r.run_id, r.att): (bool(r.c), bool(r.a), r.last) for r in observed}
    rows = []
    for run, of_run in attempts.items():
        for a in of_run:
            committed, aborted, last = seen.get((run, a.att), (False, False, None))
            rows.append(
                (
                    run,
                    a.att,
                    attempt_state(a.recorded, committed, aborted),
                    commits[(run, a.att)] if a.recorded == "committed" else None,
                    a.att if a.recorded == "committed" else None,
                    last,
                )
            )
    return local_frame(
        view.sparkSession,
        rows,
        "run_id string, att long, state string, commit_mono double, commit_index long, last_send_mono double",
    )


# reference


@dataclass(frozen=True, slots=True)
class Pair:
    """One send of a value: its invoke's topic, the attempt it was made in, its outcome (index, event)."""

    topic: str
    att: int | None
    outcome: tuple[int, SendOutcome] | None

    def ack_at(self) -> Position | None:
        """The position its ok outcome names, if any."""
        if self.outcome is None:
            return None
        out = self.outcome[1]
        if out.outcome != "ok" or out.partition is None or out.offset is None:
            return None
        return (self.topic, out.partition, out.offset)


@dataclass(frozen=True, slots=True)
class Transactions:
    """What the transactions say about each sent value (docs/audit.md, "Transactions")."""

    status: dict[str, str]  # acked | failed | indeterminate
    first_ack: dict[str, tuple[str, SendOutcome]]  # the earliest acked send: its topic and outcome
    acked_at: list[tuple[str, Position]]  # every acked send with an offset: (value, ack position)
    unwritten: set[str]  # every send failed by its own outcome
    pending: set[str]  # indeterminate, with a send in an indeterminate attempt
    aborted_acks: dict[str, set[Position]]  # ack positions of sends made in aborted attempts
    carried_aborted: set[str]  # listed by ends, none committed, the last one aborted
    committed_reads: set[tuple[str, int, int, str | None]]
    uncommitted_reads: set[tuple[str, int, int, str | None]]
    committed_drain: dict[tuple[str, int], DrainEnd]
    available: list[Available]  # every send's record as it became readable by the group
    rolled_back: set[int]  # indices of deliveries made inside an aborted attempt of their own process
    # (value, ack position) of a send made in an attempt -> the mono of that attempt's last send_invoke:
    # its producer had not asked to commit before then
    uncommitted_until: dict[tuple[str | None, str, int, int], float]

    def observed_aborted(self, v: str, topic: str, partition: int, offset: int) -> bool:
        """v's record at that position was read only at read_uncommitted, and the read_committed drain of
        its partition completed past it: the record is in an aborted transaction."""
        record = (topic, partition, offset, v)
        if record in self.committed_reads or record not in self.uncommitted_reads:
            return False
        end = self.committed_drain.get((topic, partition))
        return (
            end is not None
            and end.outcome == "ok"
            and end.low_offset is not None
            and end.high_offset is not None
            and end.low_offset <= offset < end.high_offset
        )

    def bad_read(self, v: str, sent_to: str, at: Position, isolation: str) -> bool:
        """Whether a reader at ``isolation`` must not have seen v at ``at`` (an aborted read)."""
        if v in self.unwritten:
            return True
        if isolation != RC:
            return False
        if self.observed_aborted(v, *at):
            return True
        if at[0] == sent_to:
            return self.status[v] == "failed" or at in self.aborted_acks.get(v, ())
        return v in self.carried_aborted


def transaction_view(
    sends: dict[str, list[tuple[int, SendInvoke]]],
    answers: dict[str, list[tuple[int, SendOutcome]]],
    markers: list[tuple[int, TxnMarker]],
    log_records: list[LogRecord],
    drain_last: dict[tuple[str, int, str], DrainEnd],
    group_isolation: str,
    deliveries: list[tuple[int, Delivery]],
) -> Transactions:
    """What the transactions say about each sent value: its sends paired with their outcomes (the k-th
    outcome answers the k-th invoke) and the attempts they were made in, each attempt's state from its
    markers and what the log shows (``log_records``; ``drain_last``: each partition's last drain end per
    isolation level)."""
    read_at: dict[str, set[tuple[str, int, int, str | None]]] = {level: set() for level in ISOLATION_LEVELS}
    for r in log_records:
        read_at[r.isolation].add((r.topic, r.partition, r.offset, r.value_id))
    view = Transactions(
        status={},
        first_ack={},
        acked_at=[],
        unwritten=set(),
        pending=set(),
        aborted_acks=defaultdict(set),
        carried_aborted=set(),
        committed_reads=read_at[RC],
        uncommitted_reads=read_at["read_uncommitted"],
        committed_drain={(t, p): end for (t, p, level), end in drain_last.items() if level == RC},
        available=[],
        rolled_back=set(),
        uncommitted_until={},
    )
    attempts = txn_attempts(
        (i, m.process, m.transactional_id, m.action, m.outcome, m.error) for i, m in markers
    )
    spans: dict[str, list[tuple[int, int | None, int]]] = defaultdict(list)  # process -> (begin, close, att)
    for attempt in attempts:
        if attempt.begin is not None:
            spans[attempt.process].append((attempt.begin, attempt.close, attempt.att))
    for of_process in spans.values():
        of_process.sort()

    def attempt_of(index: int, process: str) -> int | None:
        of_process = spans.get(process, [])
        at = bisect.bisect_left(of_process, (index,)) - 1
        if at < 0:
            return None
        begin, close, att = of_process[at]
        return att if begin < index and (close is None or index < close) else None

    last_send: dict[int, float] = {}  # attempt -> the mono of its last send_invoke
    first_index: dict[str, int] = {}
    pairs: dict[str, list[Pair]] = {}
    for v, made in sends.items():  # the k-th outcome of a value answers its k-th invoke
        given = answers.get(v, [])
        pairs[v] = [
            Pair(e.topic, attempt_of(index, e.process), given[k] if k < len(given) else None)
            for k, (index, e) in enumerate(made)
        ]
        for pair, (_, e) in zip(pairs[v], made, strict=True):
            if pair.att is not None:
                last_send[pair.att] = max(last_send.get(pair.att, e.mono), e.mono)
    for v, of_value in pairs.items():
        for pair in of_value:
            ack_at = pair.ack_at()
            if pair.att is not None and ack_at is not None:
                key = (v, *ack_at)
                until = last_send[pair.att]
                view.uncommitted_until[key] = max(view.uncommitted_until.get(key, until), until)
    seen_committed: set[int] = set()
    seen_aborted: set[int] = set()
    for v, of_value in pairs.items():
        for pair in of_value:
            ack_at = pair.ack_at()
            if pair.att is None or ack_at is None:
                continue
            if (*ack_at, v) in view.committed_reads:
                seen_committed.add(pair.att)
            elif view.observed_aborted(v, *ack_at):
                seen_aborted.add(pair.att)
    state: dict[int, TxnState] = {
        a.att: attempt_state(a.recorded, a.att in seen_committed, a.att in seen_aborted) for a in attempts
    }
    for index, d in deliveries:
        att = attempt_of(index, d.process)
        if att is not None and state[att] == "aborted":
            view.rolled_back.add(index)
    # when a send's record became readable by the group: at its ack; at read_committed, a send made in an
    # attempt at the later of its ack and the attempt's recorded commit (never without one)
    marker_mono = {index: m.mono for index, m in markers}
    commit_at = {a.att: (marker_mono[a.att], a.att) for a in attempts if a.recorded == "committed"}
    for v, of_value in pairs.items():
        for pair in of_value:
            ack_at = pair.ack_at()
            if ack_at is None or pair.outcome is None:
                continue
            at = (pair.outcome[1].mono, pair.outcome[0])
            if pair.att is not None and group_isolation == RC:
                commit = commit_at.get(pair.att)
                if commit is None:
                    continue
                at = max(at, commit)
            view.available.append((v, ack_at, *at))

    # a value's status follows its sends: acked if one was acked, failed if every one failed
    for v, of_value in pairs.items():
        verdicts = []
        in_open_txn = False
        for pair in of_value:
            txn = state[pair.att] if pair.att is not None else None
            outcome = pair.outcome[1].outcome if pair.outcome is not None else None
            if outcome == "ok" and txn in (None, "committed"):
                verdicts.append("acked")
                assert pair.outcome is not None
                acked_ack = pair.ack_at()
                if acked_ack is not None:
                    view.acked_at.append((v, acked_ack))
                if v not in first_index or pair.outcome[0] < first_index[v]:
                    view.first_ack[v] = (pair.topic, pair.outcome[1])
                    first_index[v] = pair.outcome[0]
            elif outcome == "fail" or txn == "aborted":
                verdicts.append("failed")
            else:
                verdicts.append("indeterminate")
                in_open_txn = in_open_txn or txn == "indeterminate"
            ack_at = pair.ack_at()
            if txn == "aborted" and ack_at is not None:
                view.aborted_acks[v].add(ack_at)
        if "acked" in verdicts:
            view.status[v] = "acked"
        elif all(x == "failed" for x in verdicts):
            view.status[v] = "failed"
        else:
            view.status[v] = "indeterminate"
            if in_open_txn:
                view.pending.add(v)
        if all(p.outcome is not None and p.outcome[1].outcome == "fail" for p in of_value):
            view.unwritten.add(v)
    # values carried by attempts (listed by their end markers): aborted if none of those attempts
    # committed and the last of them aborted
    listed: dict[str, list[tuple[int, TxnState]]] = defaultdict(list)
    for index, m in markers:
        if m.action != "begin":
            for v in set(m.value_ids):
                listed[v].append((index, state[index]))
    view.carried_aborted.update(
        v
        for v, ends in listed.items()
        if all(s != "committed" for _, s in ends) and max(ends)[1] == "aborted"
    )
    return view
