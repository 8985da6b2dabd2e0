"""Audit benchmark: a synthetic clean run of N records, audited by the Spark job and by the reference.

    python benchmarks/audit_bench.py --records 1000000 --records 10000000 [--timeout 1800]

Each record is a send (invoke + ok outcome), one delivery to the group and one log record; the history
is written as ``history/events.parquet`` exactly as the recorder writes it, the topic contents as
``log.parquet``. Each engine runs in its own subprocess (cold: reading the files is part of the cost).
Peak memory: the reference process's ``ru_maxrss``; for Spark the driver's ``ru_maxrss`` plus the JVM's
``VmHWM`` (local mode: the executors live in that JVM).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PARTITIONS = 8
PRODUCERS = 4
CHUNK = 500_000


def generate(run_dir: Path, records: int) -> None:
    """Write a clean synthetic run of ``records`` records (chunked: bounded memory)."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    from chaos.audit.source import LOG_SCHEMA
    from chaos.history.files import RunDir
    from chaos.history.schema import ARROW_SCHEMA, schema_metadata

    run = "bench"
    rd = RunDir.of(run_dir)
    rd.history_dir.mkdir(parents=True)
    t0, index = 1_700_000_000.0, 0
    next_offset = [0] * PARTITIONS
    with (
        pq.ParquetWriter(
            rd.parquet_path,
            ARROW_SCHEMA.with_metadata(schema_metadata(run, 0, "parquet")),
            compression="zstd",
        ) as history,
        pq.ParquetWriter(run_dir / "log.parquet", LOG_SCHEMA, compression="zstd") as log,
    ):
        for start in range(0, records, CHUNK):
            rows: list[dict[str, object]] = []
            log_rows: list[dict[str, object]] = []
            for i in range(start, min(records, start + CHUNK)):
                producer, seq = f"p{i % PRODUCERS}", i // PRODUCERS
                vid = f"{run}:{producer}:{seq}"
                partition = (i // PRODUCERS) % PARTITIONS
                offset = next_offset[partition]
                next_offset[partition] += 1
                mono = i * 0.001
                key = f"k{i % 16}"
                common = {"run_id": run, "process": producer, "value_id": vid}
                rows.append(
                    {
                        **common,
                        "index": index,
                        "kind": "send_invoke",
                        "ts": t0 + mono,
                        "mono": mono,
                        "producer": producer,
                        "seq": seq,
                        "key": key,
                        "topic": "t",
                    }
                )
                rows.append(
                    {
                        **common,
                        "index": index + 1,
                        "kind": "send_outcome",
                        "ts": t0 + mono + 0.0004,
                        "mono": mono + 0.0004,
                        "outcome": "ok",
                        "partition": partition,
                        "offset": offset,
                        "latency_ms": 0.4 + (i % 97) * 0.01,
                    }
                )
                rows.append(
                    {
                        **common,
                        "index": index + 2,
                        "kind": "delivery",
                        "ts": t0 + mono + 0.0008,
                        "mono": mono + 0.0008,
                        "process": "consumer-0",
                        "group": "g",
                        "topic": "t",
                        "partition": partition,
                        "offset": offset,
                        "key": key,
                        "member": "m",
                        "generation": 1,
                    }
                )
                index += 3
                log_rows.append(
                    {
                        "run_id": run,
                        "topic": "t",
                        "partition": partition,
                        "offset": offset,
                        "key": key,
                        "value_id": vid,
                        "isolation": "read_uncommitted",
                    }
                )
                if i == records // 3 or i == 2 * records // 3:
                    rows.append(
                        {
                            "index": index,
                            "run_id": run,
                            "kind": "fault",
                            "ts": t0 + mono,
                            "mono": mono + 0.0005,
                            "process": "nemesis",
                            "action": "inject" if i == records // 3 else "heal",
                            "fault": "pause",
                            "target": "broker-1",
                            "params": "{}",
                        }
                    )
                    index += 1
            history.write_table(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA))
            log.write_table(pa.Table.from_pylist(log_rows, schema=LOG_SCHEMA))
        ends = [
            {
                "index": index + p,
                "run_id": run,
                "kind": "drain_end",
                "ts": t0,
                "mono": records * 0.001 + 1,
                "process": "drain",
                "isolation": "read_uncommitted",
                "topic": "t",
                "partition": p,
                "outcome": "ok",
                "low_offset": 0,
                "high_offset": next_offset[p],
            }
            for p in range(PARTITIONS)
        ]
        history.write_table(pa.Table.from_pylist(ends, schema=ARROW_SCHEMA))


def worker(engine: str, run_dir: Path) -> None:
    """Audit ``run_dir`` with one engine; print a JSON line with the verdict and peak memory."""
    started = time.monotonic()
    jvm_hwm_kb = 0
    if engine == "reference":
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

        from chaos.audit.model import LogRecord
        from chaos.audit.reference import reference_audit
        from chaos.history.reader import read_events

        events = read_events(run_dir)
        log = [
            LogRecord(r["topic"], r["partition"], r["offset"], r["value_id"], r["isolation"], r["key"])
            for batch in pq.read_table(run_dir / "log.parquet").to_batches()
            for r in batch.to_pylist()
        ]
        facts = reference_audit(events, log)
    else:
        from pyspark.sql import SparkSession

        from chaos.audit.spark import spark_session
        from chaos.audit.sparkjob import spark_audit
        from chaos.history.reader import to_spark

        # local mode: the driver JVM runs the executors; its default 1 GiB heap is too small for 10M records
        SparkSession.builder.config("spark.driver.memory", os.environ.get("BENCH_DRIVER_MEMORY", "4g"))
        spark = spark_session(os.environ.get("BENCH_MASTER", "local[2]"))
        spark.sparkContext.setLogLevel("ERROR")
        facts = spark_audit(to_spark(spark, run_dir), spark.read.parquet(str(run_dir / "log.parquet")))[
            "bench"
        ]
        gateway: Any = spark.sparkContext._gateway
        pid = gateway.proc.pid
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                jvm_hwm_kb = int(line.split()[1])
    elapsed = time.monotonic() - started
    own_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "engine": engine,
                "audit_s": elapsed,
                "python_peak_mb": own_kb / 1024,
                "jvm_peak_mb": jvm_hwm_kb / 1024,
                "sends": facts.totals.sends,
                "anomalies": sum(facts.counts().values()),
                "problems": list(facts.problems),
            }
        )
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, action="append", help="records per run (repeatable)")
    parser.add_argument("--engines", default="spark,reference")
    parser.add_argument("--timeout", type=float, default=1800.0, help="per engine and size, seconds")
    parser.add_argument("--worker", choices=["spark", "reference"], help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.dir)
        return 0
    print(f"{'records':>10} {'engine':>9} {'wall s':>8} {'audit s':>8} {'peak MB':>9}  note")
    for records in args.records or [1_000_000]:
        with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
            run_dir = Path(tmp) / "run"
            t = time.monotonic()
            generate(run_dir, records)
            print(
                f"# generated {records:,} records in {time.monotonic() - t:.1f} s "
                f"({(run_dir / 'history' / 'events.parquet').stat().st_size / 1e6:.0f} MB history)",
                flush=True,
            )
            for engine in args.engines.split(","):
                t = time.monotonic()
                try:
                    proc = subprocess.run(
                        [sys.executable, __file__, "--worker", engine, "--dir", str(run_dir)],
                        capture_output=True,
                        text=True,
                        timeout=args.timeout,
                        check=False,
                    )
                except subprocess.TimeoutExpired:
                    print(
                        f"{records:>10,} {engine:>9} {'>' + str(int(args.timeout)):>8} {'-':>8} {'-':>9}  "
                        f"timed out",
                        flush=True,
                    )
                    continue
                wall = time.monotonic() - t
                lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
                if proc.returncode != 0 or not lines:
                    print(
                        f"{records:>10,} {engine:>9} {wall:8.1f} {'-':>8} {'-':>9}  failed: "
                        f"{proc.stderr.strip().splitlines()[-1:]}",
                        flush=True,
                    )
                    continue
                r = json.loads(lines[-1])
                peak = r["python_peak_mb"] + r["jvm_peak_mb"]
                note = f"anomalies={r['anomalies']} sends={r['sends']:,}"
                if r["jvm_peak_mb"]:
                    note += f" (driver {r['python_peak_mb']:.0f} + JVM {r['jvm_peak_mb']:.0f} MB)"
                print(
                    f"{records:>10,} {engine:>9} {wall:8.1f} {r['audit_s']:8.1f} {peak:9.0f}  {note}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
