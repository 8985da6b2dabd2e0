"""The benchmark's yardstick: the audit's core checks as one DuckDB SQL statement over a run's Parquet files.

It reads what :mod:`benchmarks.audit_bench` writes — ``history/events.parquet`` (the recorder's schema) and
``log.parquet`` (the topic contents, :data:`chaos.audit.source.LOG_SCHEMA`) — and computes, in one query:

- totals: ``sends`` (distinct sent values), ``acked`` / ``failed`` / ``indeterminate``, ``log_records``
  (distinct ``(topic, partition, offset, value_id)``), ``deliveries`` (delivery events);
- the anomaly counts ``lost_acked``, ``lost_indeterminate``, ``unseen_by_group``, ``duplicate_in_log``,
  ``duplicate_delivery_after_rebalance``, ``duplicate_delivery_other``, ``reordered`` and
  ``inconsistent_offsets``, each defined as in :mod:`chaos.audit.reference` (docs/audit.md, "Definitions");
- per fault window (:func:`chaos.history.windows.fault_windows`' pairing), the ack latency before / during /
  after it: count and the nearest-rank percentiles of :data:`chaos.audit.facts.PERCENTILES`.

Transactions are not modelled: on a run without ``txn`` markers (the benchmark's, and any run whose
producers are not transactional) these figures are exactly the reference's; with transactions a send's
status, a rolled-back delivery and a pending value differ, and the yardstick is not a judge there.
``figures_from_facts`` takes the same figures out of an engine's :class:`~chaos.audit.facts.AuditFacts`
(as ``dataclasses.asdict`` gives them), so the two compare with ``==``.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from chaos.audit.facts import PERCENTILES, Totals

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TOTALS: Final[tuple[str, ...]] = tuple(f.name for f in fields(Totals))
COUNTS: Final[tuple[str, ...]] = (
    "lost_acked",
    "lost_indeterminate",
    "unseen_by_group",
    "duplicate_in_log",
    "duplicate_delivery_after_rebalance",
    "duplicate_delivery_other",
    "reordered",
    "inconsistent_offsets",
)
"""The anomalies the yardstick counts (in :data:`chaos.audit.facts.ANOMALIES` order)."""
PHASES: Final[tuple[str, ...]] = ("before", "during", "after")
WINDOW_KEYS: Final[tuple[str, ...]] = ("fault", "target", "inject_mono", "heal_mono")
DEFAULT_THREADS: Final = 2
DEFAULT_MEMORY_MB: Final = 4096
"""DuckDB's memory limit: the Spark driver's heap in the benchmark (4 GiB); past it DuckDB spills to disk."""


_STATUS: Final = """
-- a value's status (no transactions): acked if one of its sends was acked, failed if every one failed
status AS (
  SELECT inv.v,
         CASE WHEN count(*) FILTER (WHERE outc.outcome = 'ok') > 0 THEN 'acked'
              WHEN count(*) FILTER (WHERE outc.outcome = 'fail') = any_value(inv.n_inv) THEN 'failed'
              ELSE 'indeterminate' END AS status
  FROM inv LEFT JOIN outc ON outc.v = inv.v AND outc.k <= inv.n_inv
  GROUP BY inv.v
)""".strip()
"""The CTE ``status``, in both dialects."""


def _latency_ctes(div: str) -> str:
    """The CTEs ``phased`` (every ok outcome's latency, in each window's phases: before (< inject), during,
    after (> heal)), ``ranked`` and ``stats`` (a row per window and phase: count and percentiles), in both
    dialects; ``div`` is the dialect's integer division (DuckDB ``//``, Spark ``div``)."""
    phases = ", ".join(f"({i}, '{name}')" for i, name in enumerate(PHASES))
    return f"""phased AS (
  SELECT win.w, ph.phase, outc.lat
  FROM win CROSS JOIN (VALUES {phases}) AS ph(phase, name) JOIN outc
    ON outc.outcome = 'ok' AND outc.lat IS NOT NULL AND CASE ph.phase
      WHEN 0 THEN outc.mono < win.inject_mono
      WHEN 1 THEN outc.mono >= win.inject_mono AND (win.heal_mono IS NULL OR outc.mono <= win.heal_mono)
      ELSE win.heal_mono IS NOT NULL AND outc.mono > win.heal_mono END
),
ranked AS (
  SELECT w, phase, lat, row_number() OVER (PARTITION BY w, phase ORDER BY lat) AS rn,
         count(*) OVER (PARTITION BY w, phase) AS n
  FROM phased
),
stats AS (
  SELECT w, phase, any_value(n) AS n,
    {_percentile_columns(div)}
  FROM ranked GROUP BY w, phase
)"""


def _percentile_columns(div: str) -> str:
    """``p50_ms`` … for each of PERCENTILES: the value of nearest rank ``ceil(p * n / 100)`` (at least 1)."""
    return ",\n    ".join(
        f"max(lat) FILTER (WHERE rn = greatest(({p} * n + 99) {div} 100, 1)) AS p{p}_ms" for p in PERCENTILES
    )


def _stats_struct() -> str:
    fields = ", ".join(f"'p{p}_ms': s.p{p}_ms" for p in PERCENTILES)
    return f"{{'count': coalesce(s.n, 0), {fields}}}"


def query(history: Path, log: Path) -> str:
    """The one SQL statement: one row, a column per total and count and ``windows`` (a list of structs)."""
    h = f"read_parquet('{_sql_path(history)}')"
    lg = f"read_parquet('{_sql_path(log)}')"
    stats = ", ".join(
        f"'{name}': (SELECT {_stats_struct()} FROM stats s WHERE s.w = win.w AND s.phase = {i})"
        for i, name in enumerate(PHASES)
    )
    return f"""
WITH
-- every sent value: how many sends, and its first invoke (the reference's `invokes`: first one wins)
inv AS (
  SELECT value_id AS v, count(*) AS n_inv,
         arg_min({{'producer': producer, 'seq': seq, 'key': "key", 'topic': topic}}, "index") AS first
  FROM {h} WHERE kind = 'send_invoke' GROUP BY value_id
),
-- outcomes, numbered per value in record order: the k-th answers the value's k-th invoke
outc AS (
  SELECT value_id AS v, "index" AS i, mono, outcome, "partition" AS p, "offset" AS o, latency_ms AS lat,
         row_number() OVER (PARTITION BY value_id ORDER BY "index") AS k
  FROM {h} WHERE kind = 'send_outcome'
),
{_STATUS},
deliv AS (
  SELECT value_id AS v, "index" AS i, topic, "partition" AS p, "offset" AS o
  FROM {h} WHERE kind = 'delivery'
),
-- the topic's records, once each, with the levels they were read at
recs AS (
  SELECT topic, "partition" AS p, "offset" AS o, value_id AS v,
         bool_or(isolation = 'read_committed') AS rc, bool_or(isolation = 'read_uncommitted') AS ru
  FROM {lg} GROUP BY ALL
),
-- per partition, the last read_committed drain end
rc_end AS (
  SELECT topic, "partition" AS p,
         arg_max({{'outcome': outcome, 'low': low_offset, 'high': high_offset}}, "index") AS e
  FROM {h} WHERE kind = 'drain_end' AND isolation = 'read_committed' GROUP BY ALL
),
-- a value's positions: its records, except one read only at read_uncommitted below the partition's
-- completed read_committed drain (observed aborted)
pos AS (
  SELECT r.topic, r.p, r.o, r.v FROM recs r LEFT JOIN rc_end USING (topic, p)
  WHERE r.v IS NOT NULL AND NOT coalesce(
    NOT r.rc AND r.ru AND rc_end.e.outcome = 'ok' AND rc_end.e.low <= r.o AND r.o < rc_end.e.high, false)
),
per_value AS (
  SELECT s.status, EXISTS (SELECT 1 FROM pos WHERE pos.v = s.v) AS in_log,
         EXISTS (SELECT 1 FROM deliv d WHERE d.v = s.v) AS delivered
  FROM status s
),
-- per (value, topic) more than one position: one duplicate
dup_log AS (
  SELECT count(*) AS n FROM (
    SELECT pos.v FROM pos SEMI JOIN inv ON inv.v = pos.v GROUP BY pos.v, pos.topic HAVING count(*) > 1
  )
),
-- each delivery after a value's first: after a rebalance when a rebalance callback lies between the two
-- (rebalances before a delivery, by index, only grow: a change between consecutive deliveries is one)
reb AS (SELECT "index" AS i, row_number() OVER (ORDER BY "index") AS n FROM {h} WHERE kind = 'rebalance'),
dup_deliv AS (
  SELECT sum(changes) AS after_rebalance, sum(dups) - sum(changes) AS other FROM (
    SELECT count(*) - 1 AS dups, count(DISTINCT rebs) - 1 AS changes FROM (
      SELECT d.v, coalesce(reb.n, 0) AS rebs FROM deliv d ASOF LEFT JOIN reb ON d.i >= reb.i
      WHERE d.v IS NOT NULL
    ) GROUP BY v
  )
),
-- one position, two or more values (a foreign payload, value_id null, counts as one)
observed AS (
  SELECT topic, p, o, v FROM recs
  UNION ALL SELECT topic, p, o, v FROM deliv
  UNION ALL SELECT topic, "partition", "offset", value_id FROM {h} WHERE kind = 'drain_read'
  UNION ALL SELECT inv.first.topic, outc.p, outc.o, outc.v FROM outc JOIN inv USING (v)
    WHERE outc.k = 1 AND outc.outcome = 'ok' AND outc.p IS NOT NULL AND outc.o IS NOT NULL
),
inconsistent AS (
  SELECT count(*) AS n FROM (
    SELECT topic, p, o FROM (SELECT DISTINCT topic, p, o, v FROM observed) GROUP BY ALL HAVING count(*) > 1
  )
),
-- per producer, key, topic and partition, the values by their first offset there: a seq below the
-- previous one's is reordered
chain AS (
  SELECT inv.first.seq AS seq,
         lag(inv.first.seq) OVER (
           PARTITION BY inv.first.producer, inv.first."key", f.topic, f.p ORDER BY f.o, inv.first.seq, f.v
         ) AS prev
  FROM (SELECT v, topic, p, min(o) AS o FROM pos GROUP BY ALL) f JOIN inv USING (v)
),
-- fault windows: each inject, closed by the first later heal of the same fault and target (and seq, when
-- both carry one in their params)
faults AS (
  SELECT "index" AS i, mono, action, fault, target,
         CASE WHEN json_valid(params) AND json_type(params) = 'OBJECT'
                   AND json_type(params, '$.seq') IN ('BIGINT', 'UBIGINT')
              THEN CAST(json_extract(params, '$.seq') AS BIGINT) END AS fseq
  FROM {h} WHERE kind = 'fault' AND action IN ('inject', 'heal')
),
win AS (
  SELECT row_number() OVER (ORDER BY inj.i) AS w, inj.fault, inj.target, inj.mono AS inject_mono,
         (SELECT arg_min(heal.mono, heal.i) FROM faults heal
          WHERE heal.action = 'heal' AND heal.i > inj.i AND heal.fault = inj.fault
            AND heal.target = inj.target
            AND (heal.fseq IS NULL OR inj.fseq IS NULL OR heal.fseq = inj.fseq)) AS heal_mono
  FROM faults inj WHERE inj.action = 'inject'
),
{_latency_ctes("//")}
SELECT
  (SELECT count(*) FROM inv) AS sends,
  (SELECT count(*) FILTER (WHERE status = 'acked') FROM status) AS acked,
  (SELECT count(*) FILTER (WHERE status = 'failed') FROM status) AS failed,
  (SELECT count(*) FILTER (WHERE status = 'indeterminate') FROM status) AS indeterminate,
  (SELECT count(*) FROM recs) AS log_records,
  (SELECT count(*) FROM deliv) AS deliveries,
  0 AS expired,  -- the benchmark's topics have no log policy: nothing is removed on purpose
  0 AS compacted,
  (SELECT count(*) FILTER (WHERE NOT in_log AND status = 'acked') FROM per_value) AS lost_acked,
  (SELECT count(*) FILTER (WHERE NOT in_log AND status = 'indeterminate') FROM per_value)
    AS lost_indeterminate,
  (SELECT count(*) FILTER (WHERE in_log AND status <> 'failed' AND NOT delivered) FROM per_value)
    AS unseen_by_group,
  (SELECT n FROM dup_log) AS duplicate_in_log,
  (SELECT coalesce(after_rebalance, 0) FROM dup_deliv) AS duplicate_delivery_after_rebalance,
  (SELECT coalesce(other, 0) FROM dup_deliv) AS duplicate_delivery_other,
  (SELECT count(*) FILTER (WHERE seq < prev) FROM chain) AS reordered,
  (SELECT n FROM inconsistent) AS inconsistent_offsets,
  (SELECT coalesce(list({{'fault': fault, 'target': target, 'inject_mono': inject_mono,
                         'heal_mono': heal_mono, {stats}}} ORDER BY w), [])
   FROM win) AS windows
"""


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def _spark_stats(alias: str) -> str:
    fields = ", ".join(f"'p{p}_ms', {alias}.p{p}_ms" for p in PERCENTILES)
    return f"named_struct('count', coalesce({alias}.n, 0), {fields})"


def spark_query(history: Path, log: Path) -> str:
    """:func:`query` in Spark SQL, for ``spark.sql``: the same CTEs and one result row, with Spark's
    constructs where DuckDB's have no equivalent (``min_by`` / ``max_by`` of a ``named_struct``, a value's
    previous delivery by a window, joins for correlated subqueries, ``from_json`` for the fault's seq)."""
    h = f"parquet.`{_spark_path(history)}`"
    lg = f"parquet.`{_spark_path(log)}`"
    stats_joins = "\n    ".join(
        f"LEFT JOIN stats s{i} ON s{i}.w = win.w AND s{i}.phase = {i}" for i in range(len(PHASES))
    )
    stats = ", ".join(f"'{name}', {_spark_stats(f's{i}')}" for i, name in enumerate(PHASES))
    return f"""
WITH
inv AS (
  SELECT value_id AS v, count(*) AS n_inv,
         min_by(named_struct('producer', producer, 'seq', seq, 'key', `key`, 'topic', topic), `index`)
           AS first
  FROM {h} WHERE kind = 'send_invoke' GROUP BY value_id
),
outc AS (
  SELECT value_id AS v, `index` AS i, mono, outcome, `partition` AS p, `offset` AS o, latency_ms AS lat,
         row_number() OVER (PARTITION BY value_id ORDER BY `index`) AS k
  FROM {h} WHERE kind = 'send_outcome'
),
{_STATUS},
deliv AS (
  SELECT value_id AS v, `index` AS i, topic, `partition` AS p, `offset` AS o
  FROM {h} WHERE kind = 'delivery'
),
recs AS (
  SELECT topic, `partition` AS p, `offset` AS o, value_id AS v,
         bool_or(isolation = 'read_committed') AS rc, bool_or(isolation = 'read_uncommitted') AS ru
  FROM {lg} GROUP BY ALL
),
rc_end AS (
  SELECT topic, `partition` AS p,
         max_by(named_struct('outcome', outcome, 'low', low_offset, 'high', high_offset), `index`) AS e
  FROM {h} WHERE kind = 'drain_end' AND isolation = 'read_committed' GROUP BY ALL
),
pos AS (
  SELECT r.topic, r.p, r.o, r.v FROM recs r LEFT JOIN rc_end USING (topic, p)
  WHERE r.v IS NOT NULL AND NOT coalesce(
    NOT r.rc AND r.ru AND rc_end.e.outcome = 'ok' AND rc_end.e.low <= r.o AND r.o < rc_end.e.high, false)
),
-- DuckDB's correlated EXISTS in the select list: left joins to the distinct values
per_value AS (
  SELECT s.status, pv.v IS NOT NULL AS in_log, dv.v IS NOT NULL AS delivered
  FROM status s
  LEFT JOIN (SELECT DISTINCT v FROM pos) pv ON pv.v = s.v
  LEFT JOIN (SELECT DISTINCT v FROM deliv) dv ON dv.v = s.v
),
value_counts AS (
  SELECT count(*) AS sends,
         count(*) FILTER (WHERE status = 'acked') AS acked,
         count(*) FILTER (WHERE status = 'failed') AS failed,
         count(*) FILTER (WHERE status = 'indeterminate') AS indeterminate,
         count(*) FILTER (WHERE NOT in_log AND status = 'acked') AS lost_acked,
         count(*) FILTER (WHERE NOT in_log AND status = 'indeterminate') AS lost_indeterminate,
         count(*) FILTER (WHERE in_log AND status <> 'failed' AND NOT delivered) AS unseen_by_group
  FROM per_value
),
dup_log AS (
  SELECT count(*) AS n FROM (
    SELECT pos.v FROM pos LEFT SEMI JOIN inv ON inv.v = pos.v GROUP BY pos.v, pos.topic HAVING count(*) > 1
  ) d
),
-- DuckDB's ASOF join, as the Spark job does it: each delivery after a value's first is after a rebalance
-- when one of the run's rebalance indexes (few: one array) lies between it and the value's previous one
reb AS (SELECT collect_list(`index`) AS rs FROM {h} WHERE kind = 'rebalance'),
dup_deliv AS (
  SELECT count_if(d.prev IS NOT NULL AND exists(reb.rs, r -> r > d.prev AND r < d.i)) AS after_rebalance,
         count_if(d.prev IS NOT NULL AND NOT exists(reb.rs, r -> r > d.prev AND r < d.i)) AS other
  FROM (SELECT i, lag(i) OVER (PARTITION BY v ORDER BY i) AS prev FROM deliv WHERE v IS NOT NULL) d
  CROSS JOIN reb
),
observed AS (
  SELECT topic, p, o, v FROM recs
  UNION ALL SELECT topic, p, o, v FROM deliv
  UNION ALL SELECT topic, `partition`, `offset`, value_id FROM {h} WHERE kind = 'drain_read'
  UNION ALL SELECT inv.first.topic, outc.p, outc.o, outc.v FROM outc JOIN inv USING (v)
    WHERE outc.k = 1 AND outc.outcome = 'ok' AND outc.p IS NOT NULL AND outc.o IS NOT NULL
),
inconsistent AS (
  SELECT count(*) AS n FROM (
    SELECT topic, p, o FROM (SELECT DISTINCT topic, p, o, v FROM observed) u GROUP BY ALL HAVING count(*) > 1
  ) c
),
chain AS (
  SELECT inv.first.seq AS seq,
         lag(inv.first.seq) OVER (
           PARTITION BY inv.first.producer, inv.first.`key`, f.topic, f.p
           ORDER BY f.o NULLS LAST, inv.first.seq NULLS LAST, f.v NULLS LAST
         ) AS prev
  FROM (SELECT v, topic, p, min(o) AS o FROM pos GROUP BY ALL) f JOIN inv USING (v)
),
reordered AS (SELECT count(*) FILTER (WHERE seq < prev) AS n FROM chain),
-- a seq only when params is a JSON object whose seq is an integer (from_json leaves any other null)
faults AS (
  SELECT `index` AS i, mono, action, fault, target, from_json(params, 'seq BIGINT').seq AS fseq
  FROM {h} WHERE kind = 'fault' AND action IN ('inject', 'heal')
),
-- DuckDB's correlated subquery for the closing heal: a left join, the first heal by index
win AS (
  SELECT row_number() OVER (ORDER BY inj.i) AS w, inj.fault, inj.target, inj.mono AS inject_mono,
         min_by(heal.mono, heal.i) AS heal_mono
  FROM faults inj LEFT JOIN faults heal
    ON heal.action = 'heal' AND heal.i > inj.i AND heal.fault = inj.fault AND heal.target = inj.target
       AND (heal.fseq IS NULL OR inj.fseq IS NULL OR heal.fseq = inj.fseq)
  WHERE inj.action = 'inject'
  GROUP BY inj.i, inj.fault, inj.target, inj.mono
),
{_latency_ctes("div")},
-- DuckDB's list(... ORDER BY w): the windows' structs collected and sorted by w
win_list AS (
  SELECT transform(array_sort(collect_list(named_struct('w', win.w, 'win', named_struct(
           'fault', win.fault, 'target', win.target, 'inject_mono', win.inject_mono,
           'heal_mono', win.heal_mono, {stats})))), x -> x.win) AS windows
  FROM win
    {stats_joins}
)
SELECT
  vc.sends, vc.acked, vc.failed, vc.indeterminate,
  (SELECT count(*) FROM recs) AS log_records,
  (SELECT count(*) FROM deliv) AS deliveries,
  0 AS expired,
  0 AS compacted,
  vc.lost_acked, vc.lost_indeterminate, vc.unseen_by_group,
  dup_log.n AS duplicate_in_log,
  dup_deliv.after_rebalance AS duplicate_delivery_after_rebalance,
  dup_deliv.other AS duplicate_delivery_other,
  reordered.n AS reordered,
  inconsistent.n AS inconsistent_offsets,
  win_list.windows
FROM value_counts vc CROSS JOIN dup_log CROSS JOIN dup_deliv CROSS JOIN reordered CROSS JOIN inconsistent
  CROSS JOIN win_list
"""


def _spark_path(path: Path) -> str:
    return str(path.absolute()).replace("`", "``")


def yardstick(
    run_dir: Path,
    threads: int = DEFAULT_THREADS,
    memory_mb: int = DEFAULT_MEMORY_MB,
    spill_dir: Path | None = None,
) -> dict[str, Any]:
    """Run the query over ``run_dir`` (``history/events.parquet`` and ``log.parquet``) with ``threads``
    DuckDB threads and at most ``memory_mb`` of DuckDB memory (beyond it DuckDB spills to a temporary
    directory under ``spill_dir``, default the system's); returns the figures (the shape
    :func:`figures_from_facts` gives) and ``query_s``."""
    import duckdb

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="yardstick-spill-", dir=spill_dir) as spill:
        config: dict[str, Any] = {
            "threads": threads,
            "memory_limit": f"{memory_mb}MB",
            "temp_directory": spill,
        }
        con = duckdb.connect(config=config)
        try:
            cursor = con.execute(query(run_dir / "history" / "events.parquet", run_dir / "log.parquet"))
            names = [d[0] for d in cursor.description or ()]
            row = cursor.fetchone()
        finally:
            con.close()
    assert row is not None
    return {"figures": _figures(dict(zip(names, row, strict=True))), "query_s": time.monotonic() - started}


def spark_yardstick(
    run_dir: Path,
    master: str = f"local[{DEFAULT_THREADS}]",
    driver_memory: str = "4g",
    spark: SparkSession | None = None,
) -> dict[str, Any]:
    """Run :func:`spark_query` over ``run_dir`` with ``spark.sql`` on ``spark``, or else on the session
    :func:`chaos.audit.spark.spark_session` builds on ``master`` with ``driver_memory`` (the full audit's
    settings); returns the figures (as :func:`yardstick`) and ``query_s``, the statement's time without the
    session's start."""
    if spark is None:
        from chaos.audit.spark import spark_session

        spark = spark_session(master, driver_memory=driver_memory)
        spark.sparkContext.setLogLevel("ERROR")
    started = time.monotonic()
    statement = spark_query(run_dir / "history" / "events.parquet", run_dir / "log.parquet")
    [row] = spark.sql(statement).collect()
    return {"figures": _figures(row.asDict(recursive=True)), "query_s": time.monotonic() - started}


def _figures(got: Mapping[str, Any]) -> dict[str, Any]:
    """The figures out of the statement's one row (either dialect's), by column name."""
    return {
        "totals": {name: int(got[name]) for name in TOTALS},
        "anomalies": {name: int(got[name]) for name in COUNTS},
        "ack_latency": [_window(w) for w in got["windows"]],
    }


def _window(w: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: w[key] for key in WINDOW_KEYS}
    for phase in PHASES:
        stats = w[phase] or {}  # no ack in that phase: no row in ``stats``
        out[phase] = {
            "count": int(stats.get("count") or 0),
            **{f"p{p}_ms": stats.get(f"p{p}_ms") for p in PERCENTILES},
        }
    return out


def figures_from_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The yardstick's figures out of an engine's facts (``dataclasses.asdict(AuditFacts)``, maybe through
    JSON): the totals, the anomaly counts of :data:`COUNTS`, and each fault window's ack latencies."""
    counts = {name: report["count"] for name, report in facts["anomalies"]}
    return {
        "totals": {name: facts["totals"][name] for name in TOTALS},
        "anomalies": {name: counts[name] for name in COUNTS},
        "ack_latency": [
            {
                **{key: w[key] for key in WINDOW_KEYS},
                **{
                    phase: {
                        "count": w[phase]["count"],
                        **{f"p{p}_ms": w[phase][f"p{p}_ms"] for p in PERCENTILES},
                    }
                    for phase in PHASES
                },
            }
            for w in facts["availability"]["windows"]
        ],
    }
