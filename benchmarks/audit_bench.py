"""Audit benchmark: a synthetic clean run of N records, audited by Spark, the reference and a yardstick.

    python benchmarks/audit_bench.py --records 1000000 --records 10000000 [--timeout 3600]
        [--engines spark,spark-yardstick,yardstick,reference] [--cores 1,2] [--json results.jsonl]

Each record is a send (invoke + ok outcome), one delivery to the group and one log record; the history
is written as ``history/events.parquet`` exactly as the recorder writes it (schema and metadata), the
topic contents as ``log.parquet``. Both are generated column-wise with pyarrow in chunks (bounded memory,
no per-record Python objects).

Engines (``--engines``, a comma list, any subset, run in that order): ``spark`` (the Spark job),
``reference`` (the pure-Python reference), ``yardstick`` (the core checks as one DuckDB SQL statement
over the same files, :mod:`benchmarks.yardstick`; at most ``--yardstick-memory-mb`` of DuckDB memory,
beyond which it spills to disk) and ``spark-yardstick`` (that statement in Spark SQL, run with
``spark.sql`` on the session the Spark job gets).

Cores (``--cores``, a comma list, default: this machine's): at each size, Spark (the job and the Spark
yardstick) runs as ``local[N]`` and the yardstick with ``N`` DuckDB threads for each ``N``, so the ratio
between them is measured as cores grow. The reference is one Python thread: it runs once per size (its
line says ``cores`` 1).

Each engine runs in its own subprocess, cold (reading the files is part of the cost). The parent samples
the resident memory of the worker's whole process tree (Python driver + the JVM it starts, whose
executors run inside it in local mode) every 0.2 s: that is "peak MB". A worker that exceeds
``--memory-limit-mb`` or ``--timeout`` is killed (its process group) and reported as "did not finish",
rather than taking the machine down.

Comparisons, per size: Spark's facts against the reference's, exactly (``AuditFacts`` equality); the
yardstick's and the Spark yardstick's figures (totals, the core anomaly counts, each fault window's ack
latencies) against the same figures taken out of the reference's facts, or Spark's when the reference did
not finish (the Spark yardstick's, lacking both, against the yardstick's). ``--json PATH``
writes one JSON object per size and engine (docs/audit.md, "Benchmark"). The exit status is 1 when any
comparison differs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.yardstick import DEFAULT_MEMORY_MB, figures_from_facts  # noqa: E402

RUN = "bench"
PARTITIONS = 8
PRODUCERS = 4
KEYS = 16
CHUNK = 1_000_000
T0 = 1_700_000_000.0


def _offsets(records: int) -> list[int]:
    """Records per partition: record ``i`` goes to partition ``(i // PRODUCERS) % PARTITIONS``."""
    block = PRODUCERS * PARTITIONS
    return [
        records // block * PRODUCERS + min(max(records % block - PRODUCERS * p, 0), PRODUCERS)
        for p in range(PARTITIONS)
    ]


def generate(run_dir: Path, records: int) -> None:
    """Write a clean synthetic run of ``records`` records, column-wise in chunks (bounded memory)."""
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    from chaos.audit.source import LOG_SCHEMA
    from chaos.history.schema import ARROW_SCHEMA, schema_metadata
    from chaos.history.segments import RunDir

    rd = RunDir.of(run_dir)
    rd.history_dir.mkdir(parents=True)
    schema = ARROW_SCHEMA.with_metadata(schema_metadata(RUN, 0, "parquet"))
    faults = {records // 3: "inject", 2 * records // 3: "heal"}  # after that record's events
    cuts = sorted({*range(0, records, CHUNK), *(f + 1 for f in faults if f + 1 < records), records})

    def text(prefix: str, numbers: Any) -> Any:
        return pc.binary_join_element_wise(prefix, pc.cast(numbers, pa.string()), "")

    def table(n: int, columns: dict[str, Any]) -> Any:
        return pa.table(
            {f.name: columns.get(f.name, pa.nulls(n, f.type)) for f in ARROW_SCHEMA}, schema=schema
        )

    def rows_for(start: int, end: int) -> tuple[Any, Any]:
        n = end - start
        i = pa.array(range(start, end), pa.int64())
        producer_no = pc.subtract(i, pc.multiply(pc.divide(i, PRODUCERS), PRODUCERS))
        seq = pc.divide(i, PRODUCERS)
        producer = text("p", producer_no)
        value_id = pc.binary_join_element_wise(RUN + ":", producer, ":", pc.cast(seq, pa.string()), "")
        part64 = pc.subtract(seq, pc.multiply(pc.divide(seq, PARTITIONS), PARTITIONS))
        partition = pc.cast(part64, pa.int32())
        offset = pc.add(pc.multiply(pc.divide(i, PRODUCERS * PARTITIONS), PRODUCERS), producer_no)
        key = text("k", pc.subtract(i, pc.multiply(pc.divide(i, KEYS), KEYS)))
        mono = pc.multiply(pc.cast(i, pa.float64()), 0.001)
        lat = pc.add(
            0.4, pc.multiply(pc.cast(pc.subtract(i, pc.multiply(pc.divide(i, 97), 97)), pa.float64()), 0.01)
        )
        shift = sum(1 for f in faults if f < start)  # fault events recorded before this segment
        index = pc.add(pc.multiply(i, 3), shift)
        run = pa.array([RUN] * n, pa.string())
        topic = pa.array(["t"] * n, pa.string())

        def kind(name: str) -> Any:
            return pa.array([name] * n, pa.string())

        invoke = table(
            n,
            {
                "index": index,
                "run_id": run,
                "kind": kind("send_invoke"),
                "ts": pc.add(mono, T0),
                "mono": mono,
                "process": producer,
                "value_id": value_id,
                "producer": producer,
                "seq": seq,
                "key": key,
                "topic": topic,
            },
        )
        out_mono = pc.add(mono, 0.0004)
        outcome = table(
            n,
            {
                "index": pc.add(index, 1),
                "run_id": run,
                "kind": kind("send_outcome"),
                "ts": pc.add(out_mono, T0),
                "mono": out_mono,
                "process": producer,
                "value_id": value_id,
                "outcome": kind("ok"),
                "partition": partition,
                "offset": offset,
                "latency_ms": lat,
            },
        )
        d_mono = pc.add(mono, 0.0008)
        delivery = table(
            n,
            {
                "index": pc.add(index, 2),
                "run_id": run,
                "kind": kind("delivery"),
                "ts": pc.add(d_mono, T0),
                "mono": d_mono,
                "process": kind("consumer-0"),
                "value_id": value_id,
                "group": kind("g"),
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "key": key,
                "member": kind("m"),
                "generation": pa.array([1] * n, pa.int32()),
            },
        )
        # record order: invoke, outcome, delivery of record 0, then of record 1, ...
        j = pa.array(range(3 * n), pa.int64())
        take = pc.add(pc.multiply(pc.subtract(j, pc.multiply(pc.divide(j, 3), 3)), n), pc.divide(j, 3))
        history = pa.concat_tables([invoke, outcome, delivery]).take(take)
        log = pa.table(
            {
                "run_id": run,
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "key": key,
                "value_id": value_id,
                "isolation": kind("read_uncommitted"),
            },
            schema=LOG_SCHEMA,
        )
        return history, log

    with (
        pq.ParquetWriter(rd.parquet_path, schema, compression="zstd") as history,
        pq.ParquetWriter(run_dir / "log.parquet", LOG_SCHEMA, compression="zstd") as log,
    ):
        for start, end in itertools.pairwise(cuts):
            events, records_table = rows_for(start, end)
            history.write_table(events)
            log.write_table(records_table)
            if end - 1 in faults:
                last = end - 1
                mono = last * 0.001 + 0.0005
                index = 3 * end + sum(1 for f in faults if f < last)
                fault = {
                    "index": pa.array([index], pa.int64()),
                    "run_id": pa.array([RUN]),
                    "kind": pa.array(["fault"]),
                    "ts": pa.array([T0 + mono]),
                    "mono": pa.array([mono]),
                    "process": pa.array(["nemesis"]),
                    "action": pa.array([faults[last]]),
                    "fault": pa.array(["pause"]),
                    "target": pa.array(["broker-1"]),
                    "params": pa.array(["{}"]),
                }
                history.write_table(table(1, fault))
        base = 3 * records + len(faults)
        ends = {
            "index": pa.array(range(base, base + PARTITIONS), pa.int64()),
            "run_id": pa.array([RUN] * PARTITIONS),
            "kind": pa.array(["drain_end"] * PARTITIONS),
            "ts": pa.array([T0] * PARTITIONS),
            "mono": pa.array([records * 0.001 + 1] * PARTITIONS),
            "process": pa.array(["drain"] * PARTITIONS),
            "isolation": pa.array(["read_uncommitted"] * PARTITIONS),
            "topic": pa.array(["t"] * PARTITIONS),
            "partition": pa.array(range(PARTITIONS), pa.int32()),
            "outcome": pa.array(["ok"] * PARTITIONS),
            "low_offset": pa.array([0] * PARTITIONS, pa.int64()),
            "high_offset": pa.array(_offsets(records), pa.int64()),
        }
        history.write_table(table(PARTITIONS, ends))


def worker(engine: str, run_dir: Path, out: Path, cores: int, memory_mb: int) -> None:
    """Audit ``run_dir`` with one engine on ``cores`` (Spark ``local[cores]``, DuckDB threads); write the
    facts (the yardstick: its figures) as JSON to ``out``."""
    started = time.monotonic()
    if engine == "yardstick":
        from benchmarks.yardstick import yardstick

        figures = yardstick(run_dir, threads=cores, memory_mb=memory_mb, spill_dir=run_dir.parent)
        elapsed = time.monotonic() - started
        out.write_text(json.dumps({"audit_s": elapsed, "figures": figures["figures"]}, sort_keys=True))
        return
    if engine == "spark-yardstick":
        from benchmarks.yardstick import spark_yardstick

        figures = spark_yardstick(run_dir, master=_spark_master(cores), driver_memory=_driver_memory())
        elapsed = time.monotonic() - started
        out.write_text(json.dumps({"audit_s": elapsed, "figures": figures["figures"]}, sort_keys=True))
        return
    if engine == "reference":
        import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

        from chaos.audit.facts import LogRecord
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
        from chaos.audit.spark import spark_session
        from chaos.audit.sparkjob import spark_audit
        from chaos.history.reader import to_spark

        spark = spark_session(_spark_master(cores), driver_memory=_driver_memory())
        spark.sparkContext.setLogLevel("ERROR")
        facts = spark_audit(to_spark(spark, run_dir), spark.read.parquet(str(run_dir / "log.parquet")))[RUN]
    elapsed = time.monotonic() - started
    out.write_text(json.dumps({"audit_s": elapsed, "facts": asdict(facts)}, sort_keys=True))


def _spark_master(cores: int) -> str:
    """Spark's master on ``cores``: ``local[cores]``, or ``$BENCH_MASTER``."""
    return os.environ.get("BENCH_MASTER", f"local[{cores}]")


def _driver_memory() -> str:
    """Spark's driver heap (in local mode, the executors' too): 4 GiB, or ``$BENCH_DRIVER_MEMORY``."""
    return os.environ.get("BENCH_DRIVER_MEMORY", "4g")


def _tree_rss_kb(root: int) -> int:
    """Resident memory of ``root`` and all its descendants (from /proc), in KiB."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid = int(entry.name)
        children.setdefault(int(fields.get("PPid", "0").strip() or 0), []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


def run_engine(
    engine: str, run_dir: Path, timeout: float, limit_mb: float, worker_args: list[str]
) -> dict[str, Any]:
    """One engine in its own process group; returns wall time, peak tree RSS and the facts or the reason."""
    out = run_dir.parent / f"{engine}.json"
    started = time.monotonic()
    command = [sys.executable, __file__, "--worker", engine, "--dir", str(run_dir), "--out", str(out)]
    proc = subprocess.Popen(
        [*command, *worker_args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    peak_kb, reason = 0, ""
    while proc.poll() is None:
        peak_kb = max(peak_kb, _tree_rss_kb(proc.pid))
        elapsed = time.monotonic() - started
        if peak_kb / 1024 > limit_mb:
            reason = (
                f"did not finish: resident memory passed the {limit_mb:,.0f} MB limit after {elapsed:.0f} s"
            )
        elif elapsed > timeout:
            reason = f"did not finish: still running after the {timeout:,.0f} s time limit"
        if reason:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        time.sleep(0.2)
    wall = time.monotonic() - started
    stderr = proc.stderr.read() if proc.stderr else ""
    result: dict[str, Any] = {"engine": engine, "wall_s": wall, "peak_mb": peak_kb / 1024}
    if not reason and (proc.returncode != 0 or not out.exists()):
        reason = f"failed (exit {proc.returncode}): {stderr.strip().splitlines()[-1:]}"
    if reason:
        result["reason"] = reason
    else:
        result.update(json.loads(out.read_text()))
        if "facts" in result:
            result["figures"] = figures_from_facts(result["facts"])
    return result


COMPARE_TO: dict[str, tuple[str, ...]] = {
    "spark": ("reference",),
    "spark-yardstick": ("reference", "spark", "yardstick"),
    "yardstick": ("reference", "spark", "spark-yardstick"),
    "reference": ("spark", "yardstick", "spark-yardstick"),
}
"""Whom each engine's result is compared to: the first of these that finished at the same size."""
FACTS_ENGINES = frozenset({"spark", "reference"})
"""The engines with whole facts; the yardsticks have figures only."""


def compare(engine: str, done: dict[str, dict[str, Any]]) -> tuple[str | None, str | None, bool | None]:
    """``(compared_to, compared_on, equal)`` for one engine at one size: Spark and the reference compare
    their whole facts; a comparison with the yardstick compares its figures. ``(None, None, None)`` when
    the engine did not finish or no engine it compares to did."""
    if engine not in done:
        return None, None, None
    for other in COMPARE_TO[engine]:
        if other in done:
            on = "facts" if {engine, other} <= FACTS_ENGINES else "figures"
            return other, on, done[engine][on] == done[other][on]
    return None, None, None


def json_line(
    records: int, cores: int, r: dict[str, Any], done: dict[str, dict[str, Any]], load: float
) -> dict[str, Any]:
    """The ``--json`` object of one engine at one size on ``cores`` (docs/audit.md, "Benchmark")."""
    engine = r["engine"]
    compared_to, compared_on, equal = compare(engine, done)
    finished = "reason" not in r

    def times(of: str) -> float | None:
        """``r``'s wall time over engine ``of``'s at this size, when both finished."""
        base = done.get(of)
        return round(r["wall_s"] / base["wall_s"], 2) if finished and base else None

    return {
        "records": records,
        "cores": cores,
        "engine": engine,
        "seconds": round(r["wall_s"], 3),
        "audit_seconds": round(r["audit_s"], 3) if finished else None,
        "peak_mb": round(r["peak_mb"], 1),
        "finished": finished,
        "reason": r.get("reason"),
        "facts_equal": equal,
        "compared_to": compared_to,
        "compared_on": compared_on,
        "x_yardstick": times("yardstick"),
        "x_spark_yardstick": times("spark-yardstick"),
        "load": round(load, 2),
        "figures": r.get("figures"),
    }


ENGINES = ("spark", "spark-yardstick", "yardstick", "reference")


def engine_list(text: str) -> list[str]:
    """``--engines``: a comma list of distinct engine names."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ENGINES]
    if not names or unknown or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"expected a comma list of distinct engines out of {','.join(ENGINES)}; got {text!r}"
        )
    return names


def core_list(text: str) -> list[int]:
    """``--cores``: a comma list of distinct positive core counts."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise argparse.ArgumentTypeError(f"expected a comma list of distinct positive integers; got {text!r}")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, action="append", help="records per run (repeatable)")
    parser.add_argument(
        "--engines",
        type=engine_list,
        default=list(ENGINES),
        help=f"comma list, any subset of {','.join(ENGINES)}, run in that order (default: all)",
    )
    parser.add_argument(
        "--cores",
        type=core_list,
        default=[os.cpu_count() or 1],
        help="comma list: Spark local[N] and N yardstick threads for each N (default: this machine's cores)",
    )
    parser.add_argument("--json", type=Path, help="write one JSON object per size and engine to this file")
    parser.add_argument("--timeout", type=float, default=3600.0, help="per engine and size, seconds")
    parser.add_argument(
        "--memory-limit-mb",
        type=float,
        default=12_000.0,
        help="kill an engine whose process tree passes this",
    )
    parser.add_argument(
        "--yardstick-memory-mb",
        type=int,
        default=DEFAULT_MEMORY_MB,
        help="DuckDB's memory limit (it spills to disk beyond it)",
    )
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.dir, args.out, args.cores[0], args.yardstick_memory_mb)
        return 0
    print(
        f"# {os.cpu_count()} cores on this machine, benched on {','.join(map(str, args.cores))}; limits:"
        f" {args.timeout:,.0f} s, {args.memory_limit_mb:,.0f} MB per engine; yardstick:"
        f" {args.yardstick_memory_mb:,} MB"
    )
    header = ("records", "cores", "engine", "wall s", "audit s", "peak MB")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (11, 5, 15, 8, 8, 8), strict=True)) + "  load   note")
    status = 0
    json_out = args.json.open("w") if args.json else None
    try:
        for records in args.records or [1_000_000]:
            if not bench_size(records, args, json_out):
                status = 1
    finally:
        if json_out:
            json_out.close()
    return status


def bench_size(records: int, args: argparse.Namespace, json_out: Any) -> bool:
    """Generate one run, audit it with each engine on each core count, print the rows, write the JSON
    lines; ``False`` when a comparison differs."""
    lines: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as tmp:
        run_dir = Path(tmp) / "run"
        t = time.monotonic()
        generate(run_dir, records)
        size = sum(p.stat().st_size for p in run_dir.rglob("*.parquet")) / 1e6
        print(f"# generated {records:,} records in {time.monotonic() - t:.1f} s ({size:.0f} MB Parquet)")
        reference: dict[str, Any] | None = None  # one Python thread: audited once per size
        for cores in args.cores:
            worker_args = [f"--cores={cores}", f"--yardstick-memory-mb={args.yardstick_memory_mb}"]
            done: dict[str, dict[str, Any]] = {} if reference is None else {"reference": reference}
            results: list[tuple[dict[str, Any], int, float]] = []
            for engine in args.engines:
                if engine == "reference" and cores != args.cores[0]:
                    continue
                on = 1 if engine == "reference" else cores
                load = os.getloadavg()[0]
                r = run_engine(engine, run_dir, args.timeout, args.memory_limit_mb, worker_args)
                load = max(load, os.getloadavg()[0])
                if "reason" not in r:
                    done[engine] = r
                _print_row(records, on, r, load)
                results.append((r, on, load))
            reference = done.get("reference")
            of_cores = [json_line(records, on, r, done, load) for r, on, load in results]
            _print_comparisons(records, cores, of_cores)
            lines.extend(of_cores)
    if json_out:
        for line in lines:
            json_out.write(json.dumps(line, sort_keys=True) + "\n")
        json_out.flush()
    return all(line["facts_equal"] is not False for line in lines)


def _print_row(records: int, cores: int, r: dict[str, Any], load: float) -> None:
    audit = f"{r['audit_s']:8.1f}" if "audit_s" in r else f"{'-':>8}"
    if "reason" in r:
        note = r["reason"]
    else:
        figures = r["figures"]
        counts = [report["count"] for _, report in r["facts"]["anomalies"]] if "facts" in r else []
        anomalies = sum(counts or figures["anomalies"].values())
        note = f"sends={figures['totals']['sends']:,} anomalies={anomalies}"
    row = f"{records:>11,} {cores:>5} {r['engine']:>15} {r['wall_s']:8.1f} {audit} {r['peak_mb']:8.0f}"
    print(f"{row}  {load:5.1f}  {note}", flush=True)


def _print_comparisons(records: int, cores: int, lines: list[dict[str, Any]]) -> None:
    """The ``#`` line after one size and core count: which comparisons held, each engine's ratio to the
    yardstick and to the Spark yardstick."""
    notes = []
    for line in lines:
        if line["compared_to"] is not None and line["engine"] != "reference":
            verdict = "equal" if line["facts_equal"] else "DIFFERENT"
            notes.append(f"{line['engine']}'s {line['compared_on']} vs {line['compared_to']}'s: {verdict}")
        if line["engine"] in FACTS_ENGINES and line["x_spark_yardstick"] is not None:
            notes.append(f"{line['engine']}/spark-yardstick {line['x_spark_yardstick']:.1f}x")
        if line["engine"] != "yardstick" and line["x_yardstick"] is not None:
            notes.append(f"{line['engine']}/yardstick {line['x_yardstick']:.1f}x")
    if notes:
        unit = "core" if cores == 1 else "cores"
        print(f"# {records:,} on {cores} {unit}: " + "; ".join(notes), flush=True)


if __name__ == "__main__":
    sys.exit(main())
