"""Where the Spark audit's time goes: each part of the job forced on its own, on a synthetic clean run.

    python benchmarks/audit_parts.py --records 1000000 [--master 'local[*]'] [--driver-memory 4g] [--floor]

Builds the job's frames as :func:`chaos.audit.sparkjob.spark_audit` does (the same functions of
:mod:`chaos.audit.checks`, in the same order), materialises the shared ones as it does (local
checkpoints), then forces each part alone and prints its seconds; last the union of every part in one
collect, as the audit's final action. Each part's figure includes its reads of the shared frames, so the
parts do not add up to the union. The run is generated as ``make bench`` generates it
(:func:`benchmarks.audit_bench.generate`) into a temporary directory. Timed alone (it uses every core).

``--floor`` times, instead, what any audit of the run must at least do, in a fresh session: start the
session, then one hash aggregate per value over the history's sends and deliveries and the log (the value
summary's shape, a few counters), one window over the deliveries per partition, and the same aggregate
again on the warm session — the cost of one pass over the data, below which no job of several passes goes
(docs/audit.md, "What one pass costs").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.audit_bench import generate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument(
        "--floor", action="store_true", help="time one pass of each kind, not the job's parts"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="audit-parts-") as tmp:
        run = Path(tmp) / "run"
        run.mkdir()
        generate(run, args.records)
        (floor if args.floor else profile)(run, args.master, args.driver_memory)
    return 0


def floor(run: Path, master: str, driver_memory: str) -> None:
    """Print the seconds of a session's start and of single passes over the run at ``run``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from chaos.audit.sizing import sized
    from chaos.audit.spark import spark_session
    from chaos.history.reader import to_spark

    started = time.monotonic()
    spark = spark_session(master, driver_memory=driver_memory)
    spark.sparkContext.setLogLevel("ERROR")
    print(f"{time.monotonic() - started:8.1f} s  session start", flush=True)
    h = to_spark(spark, run)
    log = spark.read.parquet(str(run / "log.parquet"))
    kind = F.col("kind")
    rows = h.where(kind.isin("send_invoke", "send_outcome", "delivery")).select("value_id", "kind", "offset")
    rows = rows.unionByName(log.select("value_id", F.lit("log").alias("kind"), "offset"))
    per_value = rows.groupBy("value_id").agg(
        *(
            F.sum((kind == k).cast("int")).alias(k)
            for k in ("send_invoke", "send_outcome", "delivery", "log")
        ),
        F.min("offset").alias("low"),
        F.max("offset").alias("high"),
    )
    odd = per_value.where(
        (F.col("send_invoke") != 1) | (F.col("delivery") != 1) | (F.col("low") != F.col("high"))
    )
    walk = Window.partitionBy("topic", "partition").orderBy("mono", "index")
    back = (
        h.where(kind == "delivery")
        .select("offset", F.lag("offset").over(walk).alias("before"))
        .where(F.col("offset") <= F.col("before"))
    )
    with sized(h):  # the audit's width for this history
        for label, query in (
            ("one aggregate per value (history + log), cold", odd),
            ("one window over the deliveries per partition", back),
            ("the same aggregate again, warm", odd),
        ):
            began = time.monotonic()
            query.count()
            print(f"{time.monotonic() - began:8.1f} s  {label}", flush=True)
    print(f"{time.monotonic() - started:8.1f} s  in all")


def profile(run: Path, master: str, driver_memory: str) -> None:
    """Print each part's seconds for the run at ``run`` (history + ``log.parquet``)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    import chaos.audit.sparkjob as job
    from chaos.audit.checks import availability, consumer_side, frames, order, removals, transactions, values
    from chaos.audit.facts import DEFAULT_OPTIONS
    from chaos.audit.sizing import sized
    from chaos.audit.spark import spark_session
    from chaos.history.reader import to_spark

    spark = spark_session(master, driver_memory=driver_memory)
    spark.sparkContext.setLogLevel("ERROR")
    started = last = time.monotonic()

    def timed(label: str, force: Any) -> Any:
        nonlocal last
        value = force()
        now = time.monotonic()
        print(f"{now - last:8.1f} s  {label}", flush=True)
        last = now
        return value

    hold = frames.materialised  # computes the frame: its time is the step's that holds it

    h = to_spark(spark, run).select(*job.HISTORY_COLUMNS)
    log = spark.read.parquet(str(run / "log.parquet")).select(*job.LOG_COLUMNS)
    with sized(h):
        control, acks, deliveries = timed(
            "control events, acks, deliveries (scans)", lambda: frames.scanned(F, h, hold)
        )
        driver_rows = frames.driver_rows(frames.driver_query(F, control).collect())
        attempts, commits = transactions.attempts_by_run(driver_rows)
        per_value, _ = values.per_value(
            F, Window, h, control, log, DEFAULT_OPTIONS, hold, attempts, fast_path=True, commits=commits
        )
        per_value = timed("per value", lambda: hold(per_value))
        windows = hold(availability.windows_frame(spark, availability.fault_query(F, control).collect()))
        bounds, owners = timed(
            "fault windows, group bounds",
            lambda: consumer_side.group_bounds(consumer_side.bounds_query(F, control, deliveries).collect()),
        )
        runs = timed(
            "runs and their send bounds",
            lambda: availability.run_ends(availability.run_ends_query(F, h).collect()),
        )
        polls = order.poll_order(
            F, Window, control, deliveries, log, per_value, DEFAULT_OPTIONS, hold, spans=False
        )
        timed("poll order", polls.collect)
        timed("send chains", order.send_chains(F, Window, per_value).collect)
        outage, _window, stats, resumed = availability.availability_parts(
            F, Window, acks, deliveries, per_value, windows, runs
        )
        for label, part in (
            ("outage", outage),
            ("latency percentiles", stats),
            ("first after heal", resumed),
        ):
            timed(label, part.collect)
        for label, part in zip(
            ("consumer walk", "lag series"),
            consumer_side.consumer_parts(F, Window, deliveries, per_value, bounds, owners),
            strict=True,
        ):
            timed(label, part.collect)
        policies = removals.log_policies(driver_rows)
        instances = timed(
            "anomaly instances",
            lambda: job._instances(F, Window, h, per_value, polls, hold, policies, deliveries),
        )
        frames_in = (control, acks, deliveries, per_value, windows)
        union = job._parts(F, Window, *frames_in, bounds, owners, runs, DEFAULT_OPTIONS, instances)
        timed("every part (union), one collect", union.collect)
    print(f"{time.monotonic() - started:8.1f} s  in all")


if __name__ == "__main__":
    sys.exit(main())
