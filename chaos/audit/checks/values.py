"""The per-value checks: each value's counts, and the anomalies decided per value — lost (``lost_acked``,
``lost_indeterminate``), ``unseen_by_group``, duplicates (``duplicate_in_log``, duplicate deliveries),
``aborted_read``, ``precommitted_read``, ``unexpected`` — and ``inconsistent_offsets``, on both engines.

Spark (:func:`per_value`): first a hash aggregate per ``(run_id, value_id)`` over the history's value
events and the log records — fixed-width counters and minima/maxima only, so Spark combines rows before the
shuffle and never sorts — finds the **clean** values: one invoke, one ``ok`` outcome with its position, no
transaction marker, one delivery, log records only at that position. Their one output row comes from that
summary alone, which carries their invoke's numbers and the hashes of its strings, looked up in a small
table (:func:`_strings`, :func:`_clean_values`). Only the rows of the other values (none in a clean run; a
count decides, so there is nothing to scan when there are none) take the general path, :func:`_traced`:
shuffled by a hash of ``(run_id, value_id)`` and sorted by it (a long: the sort compares prefixes, not
strings), then by source and position; two window passes over each value give every row its predecessor
and the value's summary (first invoke and outcome, transaction status, deliveries, distinct log positions);
each row then emits only what it adds — the value's counts and per-value anomaly instances on its first
row, an observed position, a reorder-chain link (:mod:`chaos.audit.checks.order`), a readable record
(:mod:`chaos.audit.checks.consumer_side`). Both paths give a clean value the same single row. Transactions
(:mod:`chaos.audit.checks.transactions`): the general path pairs each invoke with its outcome and looks its
ack position up in the value's log reads; what the log shows of each attempt joins back before the statuses
and aborted reads are decided (:func:`_emitted`, same sort). The inconsistent offsets
(:func:`inconsistent_instances`) read the observed positions.

Reference: :func:`judge_values`, :func:`duplicate_deliveries`, :func:`inconsistent_offsets`,
:func:`aborted_reads`, :func:`unexpected_records`, :func:`precommitted_reads`.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chaos.audit.checks.frames import DELIVERY, LOG, SEND, broadcast_if_few
from chaos.audit.checks.transactions import (
    RC,
    Position,
    Transactions,
    attempt_states,
    in_attempts,
)
from chaos.audit.facts import AuditOptions, Example, LogRecord, TxnAttempt
from chaos.audit.logpolicy import LogPolicies
from chaos.run.events import Delivery, DrainRead, SendOutcome

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_VALUE_KEY: Final = ("vh", "run_id", "value_id")
_VALUE_ORDER: Final = ("src", "di", "lt", "lp", "lo", "isolation", "index")
_INSTANCE_TYPE: Final = (
    "array<struct<anomaly:string, value_id:string, topic:string, partition:int, offset:bigint, ts:double>>"
)
COUNTS: Final = ("c_sent", "c_acked", "c_failed", "c_log", "c_deliveries")
"""A value's counts, on its first per-value row: summed per run into the totals."""


# Spark


def per_value(
    F: Any,
    Window: Any,
    h: DataFrame,
    control: DataFrame,
    log: DataFrame,
    options: AuditOptions,
    hold: Callable[[DataFrame], DataFrame],
    attempts: dict[str, list[TxnAttempt]],
    *,
    fast_path: bool = True,
    commits: dict[tuple[str, int], float] | None = None,
    probe: bool = True,
) -> tuple[DataFrame, list[DataFrame]]:
    """Step 1 (see the module doc): the rows the per-value pass emits, about one per value.

    Columns: ``run_id``, ``value_id``; the value's counts (``c_*``, on its first row only); an observed
    position (``pos_*``); a reorder-chain link (``ch_*``, ``producer``, ``key``, ``seq``, ``send_ts``); a
    send's record becoming readable by the group (``av_*``: position, mono, index); on the value's first
    row its end-to-end latency (``e2e_mono``: when it became readable, ``e2e_ms``); on a readable row its
    value's first delivery (``fd_mono``, ``fd_index``); a send acked with an
    offset (``sd_*``: its ack position, invoke index and outcome ts); a rolled-back delivery's index
    (``rb_index``); anomaly ``instances`` decided per value (null when none).

    ``fast_path``: values whose events are those of one clean send (:func:`_clean_values`) skip the sort;
    only the rows of the others go through :func:`_traced` — none at all when every value is clean. Both
    give a clean value the same single row. Returns the rows and the frames held (through ``hold``)
    to build them, which can go once the rows are materialised. ``probe``: count the values that are not
    clean (an action) to skip the sort when there are none and to choose the join; else the others always
    go through the sort (none: no rows) and their keys are broadcast.
    """
    rows = _value_rows(F, h, control, log, attempts)
    scratch: list[DataFrame] = []
    commits = commits or {}
    if not fast_path:
        return _traced(F, Window, control, rows, options, attempts, commits, hold, scratch), scratch
    strings = hold(_strings(F, h, log))
    summary = hold(_value_summary(F, rows, strings))
    scratch += [strings, summary]
    clean = _clean_values(F, summary, strings, probe=probe)
    other = summary.where(~F.col("clean")).select(
        F.col("run_id").alias("o_run"), F.col("value_id").alias("o_id")
    )
    n_other = other.count() if probe else 0
    if probe and n_other == 0:
        return clean, scratch
    others = rows.join(
        broadcast_if_few(F, other, n_other),
        (F.col("run_id") == F.col("o_run")) & F.col("value_id").eqNullSafe(F.col("o_id")),
        "left_semi",
    )
    traced = _traced(F, Window, control, others, options, attempts, commits, hold, scratch)
    return clean.unionByName(traced), scratch


def _value_rows(
    F: Any,
    h: DataFrame,
    control: DataFrame,
    log: DataFrame,
    attempts: dict[str, list[TxnAttempt]] | None = None,
) -> DataFrame:
    """Every row that belongs to a value: send events, transaction markers (one per value they name),
    deliveries and log records; ``src`` says which, ``di``/``lt``/``lp``/``lo`` hold a delivery's or log
    record's index and position. ``att``: the attempt an invoke or a delivery was made in (its process's
    span), a marker's own (its index); ``covered``: a log record read at read_uncommitted whose partition's
    read_committed drain completed past it."""
    kind = F.col("kind")
    delivery = kind == "delivery"
    sends_and_deliveries = h.where(
        kind.isin("send_invoke", "send_outcome") & F.col("value_id").isNotNull() | delivery
    ).select(
        "run_id", "value_id",
        F.when(delivery, DELIVERY).otherwise(SEND).alias("src"),
        F.when(delivery, F.col("index")).alias("di"),
        F.when(delivery, F.col("topic")).alias("lt"),
        F.when(delivery, F.col("partition")).alias("lp"),
        F.when(delivery, F.col("offset")).alias("lo"),
        "ts",
        "mono",
        "process",  # dropped once the invokes and deliveries have their attempts
        # a delivery's own fields are in di/lt/lp/lo: do not shuffle them twice
        *(F.when(~delivery, F.col(c)).alias(c) for c in (
            "kind", "index", "producer", "seq", "key", "topic", "partition", "offset", "outcome",
            "tombstone")),
    )  # fmt: skip
    sends_and_deliveries = in_attempts(F, h.sparkSession, sends_and_deliveries, attempts or {})
    txn_markers = control.where((kind == "txn") & (F.col("action") != "begin")).select(
        "run_id", F.explode(F.array_distinct("value_ids")).alias("value_id"), F.lit(SEND).alias("src"),
        "kind", "index", "outcome", "action", F.col("index").alias("att"),
    )  # fmt: skip
    last_rc_drain = (
        control.where((kind == "drain_end") & (F.col("isolation") == RC))
        .groupBy("run_id", F.col("topic").alias("lt"), F.col("partition").alias("lp"))
        .agg(F.max_by(F.struct("outcome", "low_offset", "high_offset"), "index").alias("drain"))
    )
    drain = F.col("drain")
    log_records = log.select(
        "run_id", "value_id", F.lit(LOG).alias("src"), F.col("topic").alias("lt"),
        F.col("partition").alias("lp"), F.col("offset").alias("lo"), "isolation",
    ).join(F.broadcast(last_rc_drain), ["run_id", "lt", "lp"], "left").select(
        "*",
        F.coalesce(
            (F.col("isolation") != RC) & (drain.outcome == "ok") & (drain.low_offset <= F.col("lo"))
            & (F.col("lo") < drain.high_offset),
            F.lit(False),
        ).alias("covered"),
    ).drop("drain")  # fmt: skip
    return (
        sends_and_deliveries.drop("process")
        .unionByName(txn_markers, allowMissingColumns=True)
        .unionByName(log_records, allowMissingColumns=True)
    )


def _strings(F: Any, h: DataFrame, log: DataFrame) -> DataFrame:
    """The few strings a clean value's row needs from its invoke, distinct per run, each with its 64-bit
    hash (:func:`_string_hash`): ``(run_id, f, hash, s)``, ``f`` ``t`` for a topic (of an invoke, a
    delivery or a log record), ``p`` for an invoke's producer, ``k`` for its key. The value summary
    carries hashes, and a clean value's strings are looked up here (:func:`_clean_values`); a run where
    two strings of one kind share a hash has no clean values, so the lookup stays exact."""
    kind = F.col("kind")
    invoke = kind == "send_invoke"

    def named(f: str, s: Any) -> Any:
        return F.struct(F.lit(f).alias("f"), s.alias("s"))

    # one scan of the history: each invoke names its topic, producer and key, a delivery its topic
    of_history = h.where(invoke | (kind == "delivery")).select(
        "run_id",
        F.explode(
            F.array(
                named("t", F.col("topic")),
                named("p", F.when(invoke, F.col("producer"))),
                named("k", F.when(invoke, F.col("key"))),
            )
        ).alias("n"),
    )
    return (
        of_history.select("run_id", "n.f", "n.s")
        .unionByName(log.select("run_id", F.lit("t").alias("f"), F.col("topic").alias("s")))
        .where(F.col("s").isNotNull())
        .distinct()
        .withColumn("hash", _string_hash(F, F.col("s")))
    )


def _value_summary(F: Any, rows: DataFrame, strings: DataFrame) -> DataFrame:
    """Per ``(run_id, value_id)``: whether the value is *clean* — one invoke made in no transaction, one
    ``ok`` outcome with its position, no transaction marker, one delivery, log records only at that
    position and none observed aborted — and, for clean values the outcome's numbers (``partition``,
    ``offset``, ``send_ts``, the outcome's ``mono`` and index and the delivery's: ``out_mono``,
    ``out_index``, ``dl_mono``, ``dl_index``) and the invoke's (``seq``, ``sd_index``, and the hashes of
    its topic, producer and key: ``th``, ``ph``, ``kh``, null when the string is).

    Only fixed-width aggregates, so Spark hash-aggregates (partially, before the shuffle) instead of
    sorting. Strings are compared and carried through their 64-bit hashes; a run where two of its strings
    of one kind share a hash (``strings``, :func:`_strings`) has no clean values, so this stays exact.
    """
    kind, src = F.col("kind"), F.col("src")
    invoke, outcome = kind == "send_invoke", kind == "send_outcome"
    positioned = outcome | (src != SEND)  # rows that carry a partition and offset
    topic_hash = _string_hash(F, F.when(invoke, F.col("topic")).when(src != SEND, F.col("lt")))

    def on_invoke(column: str) -> Any:
        return F.when(invoke & F.col(column).isNotNull(), _string_hash(F, F.col(column)))

    narrow = rows.select(
        "run_id", "value_id",
        invoke.cast("int").alias("n_inv"),
        outcome.cast("int").alias("n_out"),
        (outcome & (F.col("outcome") == "ok") & F.col("partition").isNotNull() & F.col("offset").isNotNull())
        .cast("int").alias("n_ok"),
        F.col("att").isNotNull().cast("int").alias("n_txn"),  # a marker, or an invoke made in an attempt
        (src == DELIVERY).cast("int").alias("n_dl"),
        (src == LOG).cast("int").alias("n_log"),
        ((src == LOG) & (F.col("isolation") == RC)).cast("int").alias("n_rc"),
        F.coalesce(F.col("covered"), F.lit(False)).cast("int").alias("n_cov"),
        F.when(positioned, F.coalesce("lp", "partition")).alias("p"),
        F.when(positioned, F.coalesce("lo", "offset")).alias("o"),
        F.when(invoke | (src != SEND), topic_hash).alias("th"),
        F.when(outcome, F.col("ts")).alias("out_ts"),
        F.when(outcome, F.col("mono")).alias("out_mono"),
        F.when(outcome, F.col("index")).alias("out_index"),
        F.when(src == DELIVERY, F.col("mono")).alias("dl_mono"),
        F.when(src == DELIVERY, F.col("di")).alias("dl_index"),
        F.when(invoke, F.col("seq")).alias("inv_seq"),
        F.when(invoke, F.col("index")).alias("inv_index"),
        on_invoke("producer").alias("inv_ph"),
        on_invoke("key").alias("inv_kh"),
    )  # fmt: skip
    collided = (
        strings.groupBy("run_id", "f", "hash")
        .count()
        .where(F.col("count") > 1)
        .select("run_id", F.lit(True).alias("collided"))
        .distinct()
    )
    summary = narrow.groupBy("run_id", "value_id").agg(
        *(F.sum(c).alias(c) for c in ("n_inv", "n_out", "n_ok", "n_txn", "n_dl", "n_log", "n_rc", "n_cov")),
        *(f(c).alias(f"{f.__name__}_{c}") for c in ("p", "o", "th") for f in (F.min, F.max)),
        F.min("out_ts").alias("send_ts"),
        *(F.min(c).alias(c) for c in ("out_mono", "out_index", "dl_mono", "dl_index", "inv_seq", "inv_index",
                                      "inv_ph", "inv_kh")),
    )  # fmt: skip
    one = F.lit(1)
    # its one position was read at read_committed, or no read of it can be observed aborted
    not_aborted = (F.col("n_rc") >= one) | (F.col("n_cov") == 0)
    clean = (
        F.col("value_id").isNotNull()
        & (F.col("n_inv") == one) & (F.col("n_out") == one) & (F.col("n_ok") == one)
        & (F.col("n_txn") == 0) & (F.col("n_dl") == one) & (F.col("n_log") >= one) & not_aborted
        & (F.col("min_p") == F.col("max_p")) & (F.col("min_o") == F.col("max_o"))
        & (F.col("min_th") == F.col("max_th")) & F.col("collided").isNull()
    )  # fmt: skip
    return summary.join(F.broadcast(collided), "run_id", "left").select(
        "run_id", "value_id", F.coalesce(clean, F.lit(False)).alias("clean"),
        F.col("min_p").cast("int").alias("partition"), F.col("min_o").alias("offset"), "send_ts",
        "out_mono", "out_index", "dl_mono", "dl_index", F.col("inv_seq").alias("seq"),
        F.col("inv_index").alias("sd_index"), F.col("min_th").alias("th"), F.col("inv_ph").alias("ph"),
        F.col("inv_kh").alias("kh"),
    )  # fmt: skip


def _string_hash(F: Any, s: Any) -> Any:
    return F.xxhash64(s)


def _clean_values(F: Any, summary: DataFrame, strings: DataFrame, *, probe: bool = True) -> DataFrame:
    """The one row :func:`_traced` emits for a clean value, built from its summary, whose invoke's topic,
    producer and key are looked up by hash in ``strings`` (:func:`_strings`; few: broadcast, unless a
    workload's keys are many): counts 1/1/0/1/1, the ack as observed position, chain link and readable
    record (made in no transaction: readable at its ack), and the end-to-end latency from the ack to the
    one delivery. ``probe``: count the keys (an action) to choose the join; else they are broadcast."""

    def lookup(f: str, hash_column: str, column: str) -> DataFrame:
        return strings.where(F.col("f") == f).select(
            "run_id", F.col("hash").alias(hash_column), F.col("s").alias(column)
        )

    keys = lookup("k", "kh", "key")
    clean = (
        summary.where(F.col("clean"))
        .join(F.broadcast(lookup("t", "th", "topic")), ["run_id", "th"], "left")
        .join(F.broadcast(lookup("p", "ph", "producer")), ["run_id", "ph"], "left")
        .join(broadcast_if_few(F, keys, keys.count() if probe else 0), ["run_id", "kh"], "left")
    )
    return clean.select(
        "run_id", "value_id",
        *(F.lit(n).cast("long").alias(c) for c, n in zip(COUNTS, (1, 1, 0, 1, 1), strict=True)),
        F.col("topic").alias("pos_topic"), F.col("partition").alias("pos_partition"),
        F.col("offset").alias("pos_offset"),
        F.col("topic").alias("ch_topic"), F.col("partition").alias("ch_partition"),
        F.col("offset").alias("ch_offset"),
        "producer", "key", "seq", "send_ts",
        F.lit(None).cast(_INSTANCE_TYPE).alias("instances"),
        F.col("topic").alias("av_topic"), F.col("partition").alias("av_partition"),
        F.col("offset").alias("av_offset"), F.col("out_mono").alias("av_mono"),
        F.col("out_index").alias("av_index"),
        F.col("out_mono").alias("e2e_mono"),
        ((F.col("dl_mono") - F.col("out_mono")) * F.lit(1000.0)).alias("e2e_ms"),
        F.col("dl_mono").alias("fd_mono"), F.col("dl_index").alias("fd_index"),
        F.col("topic").alias("sd_topic"), F.col("partition").alias("sd_partition"),
        F.col("offset").alias("sd_offset"), "sd_index", F.col("send_ts").alias("sd_ts"),
        F.lit(None).cast("long").alias("rb_index"),
        F.lit(None).cast("boolean").alias("tombstone"),  # never lost, so never asked
        F.lit(True).alias("delivered"),
        F.lit(True).alias("sd_acked"),
        F.lit(None).cast("string").alias("na_topic"),
        F.lit(None).cast("int").alias("na_partition"),
    )  # fmt: skip


def _here(F: Any) -> Any:
    """A delivery's or log record's position."""
    return F.struct(F.col("lt").alias("topic"), F.col("lp").alias("partition"), F.col("lo").alias("offset"))


def _traced(
    F: Any,
    Window: Any,
    control: DataFrame,
    rows: DataFrame,
    options: AuditOptions,
    attempts: dict[str, list[TxnAttempt]],
    commits: dict[tuple[str, int], float],
    hold: Callable[[DataFrame], DataFrame],
    scratch: list[DataFrame],
) -> DataFrame:
    """The general per-value pass: rows sorted per value, window passes over that one sort, what each row
    adds. Between the passes, the attempts' outcomes
    (:func:`~chaos.audit.checks.transactions.attempt_states`) join the rows."""
    view = _value_view(F, Window, rows)
    if any(a.begin is not None for of_run in attempts.values() for a in of_run):
        view = hold(view)  # read twice: for what the log shows of each attempt, then for the emission
        scratch.append(view)
    states = attempt_states(F, view, attempts, commits)
    if states is None:
        view = view.withColumns(
            {
                "state": F.lit(None).cast("string"),
                "commit_mono": F.lit(None).cast("double"),
                "commit_index": F.lit(None).cast("long"),
                "last_send_mono": F.lit(None).cast("double"),
            }
        )
    else:
        view = view.join(F.broadcast(states), ["run_id", "att"], "left")
    return _emitted(F, Window, control, view, options)


def _value_view(F: Any, Window: Any, rows: DataFrame) -> DataFrame:
    """Passes 1 and 2 over the value's sorted rows: each row's predecessor, the value's first invoke and
    outcome, its positions (all, visible, observed aborted, read at read_committed), and on each invoke
    its send's outcome (the k-th outcome answers the k-th invoke) and where that was acked."""
    kind = F.col("kind")
    rows = rows.withColumn("vh", F.xxhash64("run_id", "value_id"))
    src = F.col("src")
    value = Window.partitionBy(*_VALUE_KEY).orderBy(*_VALUE_ORDER)
    whole = value.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    upto = value.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    here = _here(F)
    # pass 1 (row-wise): the previous row; log rows of one position (one per isolation level, the
    # read_committed one first) are adjacent
    linked = rows.select(
        "*",
        F.row_number().over(value).alias("rn"),
        F.lag("src").over(value).alias("prev_src"),
        F.lag("lt").over(value).alias("prev_lt"),
        F.lag("lp").over(value).alias("prev_lp"),
        F.lag("lo").over(value).alias("prev_lo"),
        F.count(F.when(kind == "send_invoke", 1)).over(upto).alias("k_inv"),
        F.count(F.when(kind == "send_outcome", 1)).over(upto).alias("k_out"),
    )
    prev_log = F.coalesce(F.col("prev_src") == LOG, F.lit(False))
    same_partition = prev_log & (F.col("prev_lt") == F.col("lt")) & (F.col("prev_lp") == F.col("lp"))
    new_position = (src == LOG) & ~(same_partition & (F.col("prev_lo") == F.col("lo")))
    # a position's first row is read_uncommitted: the value was not read there at read_committed
    aborted_here = new_position & (F.col("isolation") != RC) & F.col("covered")
    visible = new_position & ~aborted_here
    seen_before = F.last(F.when(visible, here), ignorenulls=True).over(
        value.rowsBetween(Window.unboundedPreceding, -1)
    )
    seen_after = F.first(F.when(visible, here), ignorenulls=True).over(
        value.rowsBetween(1, Window.unboundedFollowing)
    )
    # pass 2 (the whole value; same window, so no new sort): the value's summary
    v = linked.select(
        "vh", "run_id", "value_id", "src", "kind", "index", "att", "topic", "isolation",
        "di", "lt", "lp", "lo", "ts", "mono", "rn", "prev_src", "k_inv",
        same_partition.alias("same_partition"), new_position.alias("new_position"), visible.alias("visible"),
        seen_before.alias("seen_before"), seen_after.alias("seen_after"),
        F.first(F.when(kind == "send_invoke", F.struct("producer", "seq", "key", "topic", "ts", "tombstone")),
                ignorenulls=True).over(whole).alias("inv"),
        F.first(F.when(kind == "send_outcome", F.struct("outcome", "partition", "offset", "ts")),
                ignorenulls=True).over(whole).alias("out"),
        F.collect_list(F.when(kind == "send_outcome", F.struct(
            F.col("k_out").alias("k"), "index", "outcome", "partition", "offset", "ts", "mono")))
        .over(whole).alias("outs"),
        F.collect_set(F.when(aborted_here, here)).over(whole).alias("aborted_set"),
        F.collect_set(F.when((src == LOG) & (F.col("isolation") == RC), here)).over(whole).alias("rc_set"),
        F.count(F.when(src == DELIVERY, 1)).over(whole).alias("n_deliveries"),
        F.count(F.when(new_position, 1)).over(whole).alias("n_pos"),
        F.count(F.when(visible, 1)).over(whole).alias("n_visible"),
        F.min(F.when(visible, here)).over(whole).alias("first"),
    )  # fmt: skip
    paired = F.get(F.filter("outs", lambda o: o.k == F.col("k_inv")), 0)
    sent_ok = (kind == "send_invoke") & (paired.outcome == "ok")
    ack = F.when(
        sent_ok & paired.partition.isNotNull() & paired.offset.isNotNull(),
        F.struct(F.col("topic").alias("topic"), paired.partition.alias("partition"),
                 paired.offset.alias("offset")),
    )  # fmt: skip
    return v.select(
        "*",
        F.when(kind == "send_invoke", paired).alias("paired"),
        ack.alias("ack"),
        F.coalesce(F.array_contains("rc_set", ack), F.lit(False)).alias("seen_committed"),
        F.coalesce(F.array_contains("aborted_set", ack), F.lit(False)).alias("seen_aborted"),
    ).drop("outs")


def _emitted(F: Any, Window: Any, control: DataFrame, v: DataFrame, options: AuditOptions) -> DataFrame:
    """Passes 3 and 4 (same window as :func:`_value_view`): the value's status from its sends and the
    attempts that carried it, which of its reads were aborted reads; then what each row adds."""
    kind = F.col("kind")
    src = F.col("src")
    value = Window.partitionBy(*_VALUE_KEY).orderBy(*_VALUE_ORDER)
    whole = value.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    here = _here(F)
    is_invoke = kind == "send_invoke"
    state = F.col("state")
    paired = F.col("paired")
    send_acked = F.coalesce(
        (paired.outcome == "ok") & (F.col("att").isNull() | (state == "committed")), F.lit(False)
    )
    send_failed = F.coalesce(paired.outcome == "fail", F.lit(False)) | F.coalesce(
        state == "aborted", F.lit(False)
    )
    # when the send's record became readable by the group: at its ack; at read_committed a send made in an
    # attempt at the later of its ack and the attempt's recorded commit (never without one)
    acked_at = F.struct(paired.mono.alias("mono"), paired.index.alias("index"))
    commit_mono, commit_index = F.col("commit_mono"), F.col("commit_index")
    committed_at = F.struct(commit_mono.alias("mono"), commit_index.alias("index"))
    commit_later = (commit_mono > paired.mono) | (
        (commit_mono == paired.mono) & (commit_index > paired.index)
    )
    plain = F.col("att").isNull() if options.group_isolation == RC else F.lit(True)
    has_ack = is_invoke & F.col("ack").isNotNull()
    readable = F.when(has_ack & plain, acked_at).when(
        has_ack & commit_mono.isNotNull(), F.when(commit_later, committed_at).otherwise(acked_at)
    )
    v = v.withColumn("readable", readable)
    # a delivery inside an aborted attempt of its own process was rolled back: no consumption, no duplicate
    counted = (src == DELIVERY) & ~F.coalesce(state == "aborted", F.lit(False))
    # a redelivery is one from the same topic: a copy read from another (consume-transform-produce's
    # input and output) is another record, like duplicate_in_log's copies
    in_topic = Window.partitionBy(*_VALUE_KEY, "lt").orderBy(*_VALUE_ORDER)
    v = v.select(
        "*",
        F.last(F.when(counted, F.col("di")), ignorenulls=True)
        .over(in_topic.rowsBetween(Window.unboundedPreceding, -1)).alias("prev_counted_di"),
        F.count(F.when(counted, 1)).over(whole).alias("n_counted"),
        F.min(F.col("readable.mono")).over(whole).alias("first_readable"),
        F.min(F.when(src == DELIVERY, F.struct(F.col("mono").alias("mono"), F.col("di").alias("di"))))
        .over(whole).alias("first_d"),
        F.max(F.when(is_invoke, send_acked)).over(whole).alias("any_acked"),
        F.min(F.when(is_invoke, send_failed)).over(whole).alias("all_failed"),
        F.min(F.when(is_invoke, F.coalesce(paired.outcome == "fail", F.lit(False)))).over(whole)
        .alias("all_unwritten"),
        F.max(F.when(is_invoke & ~send_acked & ~send_failed, state == "indeterminate")).over(whole)
        .alias("open_txn"),
        F.min(F.when(is_invoke & send_acked, F.struct(paired.index.alias("i"), F.col("topic").alias("topic"),
              paired.partition.alias("partition"), paired.offset.alias("offset"), paired.ts.alias("ts"))))
        .over(whole).alias("first_ack"),
        F.collect_set(F.when(is_invoke & (state == "aborted"), F.col("ack"))).over(whole)
        .alias("aborted_acks"),
        F.max(F.when(kind == "txn", state == "committed")).over(whole).alias("listed_committed"),
        F.max(F.when(kind == "txn", F.struct("index", (state == "aborted").alias("aborted")))).over(whole)
        .alias("last_listed"),
        F.collect_list(F.when(is_invoke & F.col("ack").isNotNull() & F.col("last_send_mono").isNotNull(),
                              F.struct(F.col("ack").alias("at"), F.col("last_send_mono").alias("until"))))
        .over(whole).alias("uncommitted"),
    )  # fmt: skip
    rebalances = (
        control.where(kind == "rebalance").groupBy("run_id").agg(F.collect_list("index").alias("rebalances"))
    )
    v = v.join(F.broadcast(rebalances), "run_id", "left")

    out = F.col("out")
    sent = F.col("inv").isNotNull()
    named = F.col("value_id").isNotNull()
    acked = F.coalesce(F.col("any_acked"), F.lit(False))
    failed = ~acked & F.coalesce(F.col("all_failed"), F.lit(False))
    pending = ~acked & ~failed & F.coalesce(F.col("open_txn"), F.lit(False))
    unwritten = F.coalesce(F.col("all_unwritten"), F.lit(False))
    carried_aborted = ~F.coalesce(F.col("listed_committed"), F.lit(False)) & F.coalesce(
        F.col("last_listed.aborted"), F.lit(False)
    )
    # aborted reads (G1a): per read, what a reader at its level must not see
    read_level = F.when(src == DELIVERY, F.lit(options.group_isolation)).otherwise(F.col("isolation"))
    sent_here = F.coalesce(F.col("lt") == F.col("inv.topic"), F.lit(False))
    committed_read = (read_level == RC) & (
        F.coalesce(F.array_contains("aborted_set", here), F.lit(False))
        | (sent_here & (failed | F.coalesce(F.array_contains("aborted_acks", here), F.lit(False))))
        | (~sent_here & carried_aborted)
    )
    bad_read = ((src == DELIVERY) | (src == LOG)) & (unwritten | committed_read)
    v = v.select("*", F.min(F.when(bad_read, here)).over(whole).alias("bad"))

    send_ts = F.coalesce(out.ts, F.col("inv.ts"))
    ack_at = F.when(
        sent & (out.outcome == "ok") & out.offset.isNotNull() & out.partition.isNotNull(),
        F.struct(F.col("inv.topic").alias("topic"), out.partition.alias("partition"),
                 out.offset.alias("offset")),
    )  # fmt: skip
    first_row = F.col("rn") == 1
    summary = first_row & sent  # a sent value's first row is one of its send events
    bad = F.col("bad")
    redelivery = counted & named & F.col("prev_counted_di").isNotNull()
    # a read_committed delivery at the ack position of a send made in an attempt, before that attempt's
    # last send_invoke: its producer had not asked to commit yet
    precommitted = (src == DELIVERY) & F.lit(options.group_isolation == RC) & F.coalesce(
        F.exists("uncommitted", lambda u: (u.at.topic == F.col("lt")) & (u.at.partition == F.col("lp"))
                 & (u.at.offset == F.col("lo")) & (u.until > F.col("mono"))),
        F.lit(False),
    )  # fmt: skip
    after_rebalance = F.coalesce(
        F.exists("rebalances", lambda r: (r > F.col("prev_counted_di")) & (r < F.col("di"))), F.lit(False)
    )
    lost = summary & (F.col("n_visible") == 0)
    seen = summary & (F.col("n_visible") > 0)
    expected = ~failed & ~pending if options.group_isolation == RC else ~failed
    # a topic's first visible position of the value, when another follows in that topic
    topic_first = F.col("visible") & ~F.coalesce(F.col("seen_before.topic") == F.col("lt"), F.lit(False))
    duplicated = sent & topic_first & F.coalesce(F.col("seen_after.topic") == F.col("lt"), F.lit(False))
    first_at = (F.col("first.topic"), F.col("first.partition"), F.col("first.offset"))
    row_at = (F.col("lt"), F.col("lp"), F.col("lo"))
    first_ack = (F.col("first_ack.topic"), F.col("first_ack.partition"), F.col("first_ack.offset"))
    null_ts = F.lit(None).cast("double")
    found = [
        (lost & acked, "lost_acked", first_ack, F.col("first_ack.ts")),
        (lost & ~acked & ~failed, "lost_indeterminate",
         (F.col("inv.topic"), out.partition, F.lit(None).cast("long")), send_ts),
        (seen & expected & (F.col("n_counted") == 0), "unseen_by_group", first_at, send_ts),
        (duplicated, "duplicate_in_log", row_at, send_ts),
        (summary & bad.isNotNull(), "aborted_read", (bad.topic, bad.partition, bad.offset), send_ts),
        (redelivery & after_rebalance, "duplicate_delivery_after_rebalance", row_at, F.col("ts")),
        (redelivery & ~after_rebalance, "duplicate_delivery_other", row_at, F.col("ts")),
        (F.col("new_position") & (~named | ~sent), "unexpected", row_at, null_ts),
        (precommitted, "precommitted_read", row_at, F.col("ts")),
    ]  # fmt: skip
    any_found = F.lit(False)
    for cond, *_ in found:
        any_found = any_found | F.coalesce(cond, F.lit(False))

    def instance(name: str, at: tuple[Any, Any, Any], ts: Any) -> Any:
        topic, partition, offset = at
        return F.struct(
            F.lit(name).alias("anomaly"), F.col("value_id"), topic.alias("topic"),
            partition.alias("partition"), offset.alias("offset"), ts.alias("ts"),
        )  # fmt: skip

    instances = F.when(
        any_found,
        F.array_compact(F.array(*(F.when(cond, instance(name, at, ts)) for cond, name, at, ts in found))),
    ).cast(_INSTANCE_TYPE)
    # the observed position: a sent value's ack on its first row, each delivery and distinct log position
    # (skipped when equal to the ack's: the same observation)
    not_ack = ~F.coalesce(here == ack_at, F.lit(False))
    position = (
        F.when(summary, ack_at)
        .when((src == DELIVERY) & not_ack, here)
        .when(F.col("new_position") & not_ack, here)
    )
    # a chain link per partition the value is (visibly) in: its first offset there; the first partition's
    # link rides on the value's first row
    new_partition = ~F.coalesce(
        (F.col("seen_before.topic") == F.col("lt")) & (F.col("seen_before.partition") == F.col("lp")),
        F.lit(False),
    )
    link = F.when(summary, F.col("first")).when(
        F.col("visible") & named & sent & F.col("seen_before").isNotNull() & new_partition, here
    )
    emitted = v.select(
        "run_id", "value_id",
        *(F.when(first_row, c).cast("long").alias(n) for c, n in (
            (sent, "c_sent"), (sent & acked, "c_acked"), (sent & failed, "c_failed"),
            (F.col("n_pos"), "c_log"), (F.col("n_deliveries"), "c_deliveries"))),
        position.topic.alias("pos_topic"), position.partition.alias("pos_partition"),
        position.offset.alias("pos_offset"),
        link.topic.alias("ch_topic"), link.partition.alias("ch_partition"), link.offset.alias("ch_offset"),
        F.col("inv.producer").alias("producer"), F.col("inv.key").alias("key"), F.col("inv.seq").alias("seq"),
        send_ts.alias("send_ts"),
        instances.alias("instances"),
        *(F.when(F.col("readable").isNotNull(), c).alias(n) for c, n in (
            (F.col("ack.topic"), "av_topic"), (F.col("ack.partition"), "av_partition"),
            (F.col("ack.offset"), "av_offset"), (F.col("readable.mono"), "av_mono"),
            (F.col("readable.index"), "av_index"), (F.col("first_d.mono"), "fd_mono"),
            (F.col("first_d.di"), "fd_index"))),
        F.when(first_row & F.col("first_d").isNotNull(), F.col("first_readable")).alias("e2e_mono"),
        F.when(first_row, (F.col("first_d.mono") - F.col("first_readable")) * F.lit(1000.0))
        .alias("e2e_ms"),
        *(F.when(is_invoke & F.col("ack").isNotNull(), c).alias(n) for c, n in (
            (F.col("ack.topic"), "sd_topic"), (F.col("ack.partition"), "sd_partition"),
            (F.col("ack.offset"), "sd_offset"), (F.col("index"), "sd_index"), (paired.ts, "sd_ts"))),
        F.when((src == DELIVERY) & ~counted, F.col("di")).alias("rb_index"),
        F.when(first_row, F.coalesce(F.col("inv.tombstone"), F.lit(False))).alias("tombstone"),
        F.when(first_row, F.col("n_counted") > 0).alias("delivered"),
        F.when(is_invoke & F.col("ack").isNotNull(), send_acked).alias("sd_acked"),
        # acknowledged without an offset (a retried batch the broker already held): where, for the log
        # policy to place it where the group read it (:func:`chaos.audit.checks.removals.removed`)
        *(F.when(is_invoke & send_acked & paired.offset.isNull() & paired.partition.isNotNull(), c).alias(n)
          for c, n in ((F.col("topic"), "na_topic"), (paired.partition, "na_partition"))),
    )  # fmt: skip
    return emitted.where(
        first_row
        | F.col("pos_topic").isNotNull()
        | F.col("ch_topic").isNotNull()
        | F.col("instances").isNotNull()
        | F.col("av_topic").isNotNull()
        | F.col("sd_topic").isNotNull()
        | F.col("na_topic").isNotNull()
        | F.col("rb_index").isNotNull()
    )


def inconsistent_instances(F: Any, h: DataFrame, per_value: DataFrame) -> DataFrame:
    """``inconsistent_offsets`` instances: a position observed holding two or more values (a foreign payload
    is one), from the per-value rows' observed positions and the drain's reads."""
    kind = F.col("kind")
    place = ["place", "run_id", "topic", "partition", "offset"]
    observed = per_value.where(F.col("pos_topic").isNotNull()).select(
        "run_id", "value_id", F.col("pos_topic").alias("topic"), F.col("pos_partition").alias("partition"),
        F.col("pos_offset").alias("offset"),
    ).unionByName(
        h.where(kind == "drain_read").select("run_id", "value_id", "topic", "partition", "offset")
    )  # fmt: skip
    # positions holding two or more distinct values: one shuffle, hash aggregates only (a window here
    # pays per position); the few such positions then pick their smallest value id out of a second,
    # map-side pass over the observations
    observed = observed.withColumn("place", F.xxhash64(*place[1:]))
    shared = (
        observed.repartition("place")  # the distinct and the count share this shuffle
        .distinct()
        .groupBy(*place)
        .agg(F.count(F.lit(1)).alias("n"))
        .where(F.col("n") > 1)
        .drop("n")
    )
    return (
        observed.join(F.broadcast(shared), place)
        .groupBy(*place)
        .agg(F.min("value_id").alias("value_id"))
        .select(F.lit("inconsistent_offsets").alias("anomaly"), "run_id", "value_id", *place[2:],
                F.lit(None).cast("double").alias("ts"))
    )  # fmt: skip


# reference


@dataclass(frozen=True, slots=True)
class Send:
    """A value's first invoke, as the checks read it."""

    producer: str
    seq: int
    key: str | None
    topic: str
    ts: float
    mono: float
    tombstone: bool


Record = tuple[str, int, int, str | None]
"""A log record as the checks read it, ``(topic, partition, offset, value_id)``: one per position and
value."""


def log_positions(records: list[Record], txn: Transactions) -> dict[str, list[Position]]:
    """A value's positions in the log: where it was read at any level, except its records observed
    aborted; sorted, since ``records`` are."""
    positions: dict[str, list[Position]] = defaultdict(list)
    for topic, partition, offset, v in records:
        if v is not None and not txn.observed_aborted(v, topic, partition, offset):
            positions[v].append((topic, partition, offset))
    return positions


def delivered_values(deliveries: list[tuple[int, Delivery]], rolled_back: set[int]) -> set[str]:
    """The values the group consumed: a read inside an aborted attempt of its own process was rolled back,
    it did not consume the value."""
    return {d.value_id for i, d in deliveries if d.value_id is not None and i not in rolled_back}


def judge_values(
    found: dict[str, list[Example]],
    removed: dict[tuple[str, int, str], int],
    *,
    invokes: dict[str, Send],
    outcomes: dict[str, SendOutcome],
    positions: dict[str, list[Position]],
    txn: Transactions,
    delivered: set[str],
    send_ts: Callable[[str], float],
    group_committed: bool,
    log_policies: LogPolicies,
    read_at: Mapping[tuple[str, str, int], int],
    latest: Mapping[tuple[str, int, str | None], str],
) -> None:
    """Per sent value into ``found``: ``lost_acked`` (or, where the log policy removed it, a count in
    ``removed`` and ``expired_unread`` when the group never read it), ``lost_indeterminate``,
    ``unseen_by_group`` and ``duplicate_in_log``."""
    status = txn.status
    for v, send in invokes.items():
        out = outcomes.get(v)
        where = positions.get(v)
        if where is None:
            if status[v] == "acked":
                ack_topic, ack = txn.first_ack[v]
                example = Example(v, ack_topic, ack.partition, ack.offset, ack.ts)
                assert ack.partition is not None
                placed = ack.offset if ack.offset is not None else read_at.get((v, ack_topic, ack.partition))
                at = (ack_topic, ack.partition, placed)
                why = log_policies.removed(
                    v, at, send.key, latest.get((ack_topic, ack.partition, send.key)), send.tombstone, ack.ts
                )
                if why is None:
                    found["lost_acked"].append(example)
                    continue
                removed[(ack_topic, ack.partition, why)] += 1
                if why == "expired" and v not in delivered:  # removed before the group read it
                    found["expired_unread"].append(example)
                    removed[(ack_topic, ack.partition, "expired_unread")] += 1
            elif status[v] != "failed":
                part = out.partition if out is not None else None
                found["lost_indeterminate"].append(Example(v, send.topic, part, None, send_ts(v)))
            continue
        first = where[0]
        expected = status[v] != "failed" and not (group_committed and v in txn.pending)
        if expected and v not in delivered:
            found["unseen_by_group"].append(Example(v, *first, send_ts(v)))
        for _, in_topic in itertools.groupby(where, key=lambda p: p[0]):
            of_topic = list(in_topic)
            if len(of_topic) > 1:  # a copy in another topic (consume-transform-produce) is no duplicate
                found["duplicate_in_log"].append(Example(v, *of_topic[0], send_ts(v)))


def duplicate_deliveries(
    found: dict[str, list[Example]],
    deliveries: list[tuple[int, Delivery]],
    rolled_back: set[int],
    rebalances: list[int],
) -> None:
    """Into ``found``: every delivery of a value after its first from the same topic (a copy read from
    another topic, consume-transform-produce's input and output, is another record);
    ``duplicate_delivery_after_rebalance`` when a rebalance callback was recorded between the previous
    delivery and this one, else ``duplicate_delivery_other``."""
    rebalances.sort()
    last_delivery: dict[tuple[str, str], int] = {}
    for index, d in deliveries:
        v = d.value_id
        if v is None or index in rolled_back:
            continue
        previous = last_delivery.get((v, d.topic))
        last_delivery[(v, d.topic)] = index
        if previous is None:
            continue
        between = any(previous < r < index for r in rebalances)
        name = "duplicate_delivery_after_rebalance" if between else "duplicate_delivery_other"
        found[name].append(Example(v, d.topic, d.partition, d.offset, d.ts))


def inconsistent_offsets(
    records: list[Record],
    deliveries: list[tuple[int, Delivery]],
    drain_reads: list[DrainRead],
    outcomes: dict[str, SendOutcome],
    invokes: dict[str, Send],
) -> list[Example]:
    """``inconsistent_offsets``: one position, two or more values (a foreign payload counts as a value)."""
    found: list[Example] = []
    observed: dict[Position, set[str | None]] = defaultdict(set)
    for topic, partition, offset, v in records:
        observed[(topic, partition, offset)].add(v)
    for _, d in deliveries:
        observed[(d.topic, d.partition, d.offset)].add(d.value_id)
    for r in drain_reads:
        observed[(r.topic, r.partition, r.offset)].add(r.value_id)
    for v, out in outcomes.items():
        if out.outcome == "ok" and out.offset is not None and out.partition is not None and v in invokes:
            observed[(invokes[v].topic, out.partition, out.offset)].add(v)
    for (topic, partition, offset), values in observed.items():
        if len(values) > 1:
            named = sorted(x for x in values if x is not None)
            found.append(Example(named[0] if named else None, topic, partition, offset, None))
    return found


def aborted_reads(
    deliveries: list[tuple[int, Delivery]],
    log_records: list[LogRecord],
    invokes: dict[str, Send],
    txn: Transactions,
    group_isolation: str,
    send_ts: Callable[[str], float],
) -> list[Example]:
    """``aborted_read`` (G1a), judged per record: what a reader at that level must not see; one instance
    per value, at its lowest such position."""
    bad_reads: dict[str, list[Position]] = defaultdict(list)
    observations = [(d.value_id, d.topic, d.partition, d.offset, group_isolation) for _, d in deliveries]
    observations += [(r.value_id, r.topic, r.partition, r.offset, r.isolation) for r in log_records]
    for v, topic, partition, offset, isolation in observations:
        if (
            v is not None
            and v in invokes
            and txn.bad_read(v, invokes[v].topic, (topic, partition, offset), isolation)
        ):
            bad_reads[v].append((topic, partition, offset))
    return [Example(v, *min(where), send_ts(v)) for v, where in bad_reads.items()]


def unexpected_records(records: list[Record], invokes: dict[str, Send]) -> list[Example]:
    """``unexpected``: a log record of no value, or of a value never sent."""
    return [
        Example(v, topic, partition, offset, None)
        for topic, partition, offset, v in records
        if v is None or v not in invokes
    ]


def precommitted_reads(deliveries: list[tuple[int, Delivery]], txn: Transactions) -> list[Example]:
    """``precommitted_read`` (a read_committed group): a delivery at the ack position of a send made in an
    attempt, before that attempt's last ``send_invoke`` — its producer had not asked to commit yet."""
    found: list[Example] = []
    for _, d in deliveries:
        until = txn.uncommitted_until.get((d.value_id, d.topic, d.partition, d.offset))
        if until is not None and d.mono < until:
            found.append(Example(d.value_id, d.topic, d.partition, d.offset, d.ts))
    return found
