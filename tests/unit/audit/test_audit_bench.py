"""The audit benchmark (benchmarks/audit_bench.py) end to end at a tiny size, and its DuckDB yardstick
(benchmarks/yardstick.py) as a real check: anomalies planted in a generated run are counted, exactly as the
reference counts them."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]
import pytest
from hypothesis import assume, given, settings

from benchmarks import audit_bench
from benchmarks.yardstick import COUNTS, figures_from_facts, spark_yardstick, yardstick
from chaos.audit.facts import DEFAULT_OPTIONS, LogRecord
from chaos.audit.reference import reference_audit
from chaos.audit.source import history_table, log_table
from chaos.history.reader import read_events
from chaos.run.events import TxnMarker
from tests.unit.audit.test_audit_properties import Plan, build, plans

BENCH = Path(audit_bench.__file__)
RECORDS = 2_000
LATE = 1.5005
"""The mono of the fault :func:`plant_anomalies` injects and never heals."""
FIELDS = {
    "records",
    "cores",
    "engine",
    "seconds",
    "audit_seconds",
    "peak_mb",
    "finished",
    "reason",
    "facts_equal",
    "compared_to",
    "compared_on",
    "x_yardstick",
    "x_spark_yardstick",
    "load",
    "figures",
}


def bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    out = tmp_path / "bench.jsonl"
    done = subprocess.run(
        [sys.executable, str(BENCH), "--records", str(RECORDS), "--json", str(out), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return done, lines


def reference_figures(run_dir: Path) -> dict[str, Any]:
    log = [
        LogRecord(r["topic"], r["partition"], r["offset"], r["value_id"], r["isolation"], r["key"])
        for r in pq.read_table(run_dir / "log.parquet").to_pylist()
    ]
    return figures_from_facts(json.loads(json.dumps(asdict(reference_audit(read_events(run_dir), log)))))


def test_yardstick_and_reference_agree_end_to_end(tmp_path: Path) -> None:
    done, lines = bench(tmp_path, "--engines", "yardstick,reference")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line["engine"] for line in lines] == ["yardstick", "reference"]
    by_engine = {line["engine"]: line for line in lines}
    for line in lines:
        assert set(line) == FIELDS
        assert line["records"] == RECORDS
        assert line["finished"] is True
        assert line["reason"] is None
        assert line["facts_equal"] is True
        assert line["compared_on"] == "figures"
        assert line["seconds"] > 0
        assert line["peak_mb"] >= 0
        assert line["audit_seconds"] <= line["seconds"]
    assert by_engine["yardstick"]["compared_to"] == "reference"
    assert by_engine["reference"]["compared_to"] == "yardstick"
    assert by_engine["yardstick"]["x_yardstick"] == 1.0
    figures = by_engine["yardstick"]["figures"]
    assert figures == by_engine["reference"]["figures"]
    assert figures["totals"] == {
        "sends": RECORDS,
        "acked": RECORDS,
        "failed": 0,
        "indeterminate": 0,
        "log_records": RECORDS,
        "deliveries": RECORDS,
        "expired": 0,
        "compacted": 0,
    }
    assert figures["anomalies"] == dict.fromkeys(COUNTS, 0)
    [window] = figures["ack_latency"]  # the generator's one fault window, split in three
    assert sum(window[phase]["count"] for phase in ("before", "during", "after")) == RECORDS
    assert "yardstick's figures vs reference's: equal" in done.stdout
    assert "reference/yardstick" in done.stdout


def test_each_core_count_gets_its_lines_and_the_reference_runs_once(tmp_path: Path) -> None:
    done, lines = bench(tmp_path, "--engines", "yardstick,reference", "--cores", "1,2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(line["engine"], line["cores"]) for line in lines] == [
        ("yardstick", 1),
        ("reference", 1),
        ("yardstick", 2),
    ]
    for line in lines:
        assert set(line) == FIELDS
        assert line["facts_equal"] is True
    # on 2 cores the yardstick is still compared to the reference audited on the first count
    assert lines[2]["compared_to"] == "reference"
    assert lines[2]["figures"] == lines[1]["figures"]
    assert f"# {RECORDS:,} on 1 core: " in done.stdout
    assert f"# {RECORDS:,} on 2 cores: yardstick's figures vs reference's: equal" in done.stdout


@pytest.mark.parametrize("bad", ["", "0", "1,1", "two"])
def test_core_counts_are_checked(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="distinct positive integers"):
        audit_bench.core_list(bad)


def test_an_engine_past_its_limit_gets_a_line(tmp_path: Path) -> None:
    done, lines = bench(tmp_path, "--engines", "yardstick", "--timeout", "0")
    assert done.returncode == 0, done.stdout + done.stderr
    [line] = lines
    assert set(line) == FIELDS
    assert line["engine"] == "yardstick"
    assert line["finished"] is False
    assert line["reason"].startswith("did not finish: still running after the 0 s time limit")
    assert line["seconds"] > 0
    assert line["audit_seconds"] is None
    assert line["facts_equal"] is None
    assert line["compared_to"] is None
    assert line["figures"] is None


def test_engines_are_any_subset_in_the_order_given() -> None:
    assert audit_bench.engine_list("reference, spark") == ["reference", "spark"]
    assert audit_bench.engine_list("spark,spark-yardstick") == ["spark", "spark-yardstick"]


def test_the_spark_yardstick_is_compared_on_figures_and_spark_is_timed_against_it() -> None:
    figures = {"totals": {"sends": 1}}
    done = {
        "spark": {"engine": "spark", "wall_s": 60.0, "peak_mb": 1.0, "facts": {"any": 1}, "figures": figures},
        "spark-yardstick": {"engine": "spark-yardstick", "wall_s": 20.0, "figures": figures},
        "yardstick": {"engine": "yardstick", "wall_s": 4.0, "figures": {"totals": {"sends": 2}}},
    }
    assert audit_bench.compare("spark-yardstick", done) == ("spark", "figures", True)
    assert audit_bench.compare("yardstick", done) == ("spark", "figures", False)
    assert audit_bench.compare("spark", done) == (None, None, None)  # no reference: no facts to compare
    done["spark"]["audit_s"] = 50.0
    line = audit_bench.json_line(RECORDS, 2, done["spark"], done, 0.0)
    assert set(line) == FIELDS
    assert (line["x_yardstick"], line["x_spark_yardstick"]) == (15.0, 3.0)


@pytest.mark.parametrize("bad", ["", "spark,spark", "spark,duckdb"])
def test_engines_are_checked(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a comma list"):
        audit_bench.engine_list(bad)


def _record(i: int) -> dict[str, Any]:
    """The generator's record ``i``: its value id and position (benchmarks/audit_bench.py)."""
    producer, seq = i % audit_bench.PRODUCERS, i // audit_bench.PRODUCERS
    return {
        "value_id": f"{audit_bench.RUN}:p{producer}:{seq}",
        "partition": seq % audit_bench.PARTITIONS,
        "offset": i // (audit_bench.PRODUCERS * audit_bench.PARTITIONS) * audit_bench.PRODUCERS + producer,
    }


def plant_anomalies(tmp_path: Path) -> Path:
    """A generated run with anomalies planted in its log and history (the figures
    :func:`test_yardstick_counts_planted_anomalies` expects); returns its directory."""
    run_dir = tmp_path / "run"
    audit_bench.generate(run_dir, RECORDS)
    history_path = run_dir / "history" / "events.parquet"
    history = pq.read_table(history_path)
    log = pq.read_table(run_dir / "log.parquet")
    rows = history.to_pylist()
    log_rows = log.to_pylist()
    lost, duplicated, unseen, redelivered, after_rebalance = (_record(i) for i in (100, 200, 300, 400, 500))
    swapped = (_record(600), _record(632))  # one chain: same producer, key and partition, 4 offsets apart
    assert swapped[0]["partition"] == swapped[1]["partition"]

    def at(row: dict[str, Any], record: dict[str, Any]) -> bool:
        return (row["partition"], row["offset"]) == (record["partition"], record["offset"])

    # the log: one acked value lost, one written twice (later in its partition), two values swapped
    log_rows = [r for r in log_rows if not at(r, lost)]
    high = max(r["offset"] for r in log_rows if r["partition"] == duplicated["partition"]) + 1
    copy = next(r for r in log_rows if r["value_id"] == duplicated["value_id"])
    log_rows.append({**copy, "offset": high})
    first, second = (next(r for r in log_rows if at(r, s)) for s in swapped)
    first["value_id"], second["value_id"] = second["value_id"], first["value_id"]
    pq.write_table(pa.Table.from_pylist(log_rows, schema=log.schema), run_dir / "log.parquet")

    # the history: one delivery missing, one value delivered again, then a rebalance and another again;
    # a fault injected late and never healed (the heal names another fault seq)
    def delivery_of(record: dict[str, Any]) -> dict[str, Any]:
        return next(r for r in rows if r["kind"] == "delivery" and r["value_id"] == record["value_id"])

    rows = [r for r in rows if not (r["kind"] == "delivery" and r["value_id"] == unseen["value_id"])]
    index = max(r["index"] for r in rows) + 1
    blank = dict.fromkeys(history.column_names)
    fault = {**blank, "run_id": audit_bench.RUN, "kind": "fault", "ts": audit_bench.T0, "process": "nemesis"}
    fault |= {"fault": "pause", "target": "broker-2"}
    rows += [
        {**delivery_of(redelivered), "index": index},
        {
            **blank,
            "index": index + 1,
            "run_id": audit_bench.RUN,
            "kind": "rebalance",
            "ts": audit_bench.T0 + 2.5,
            "mono": 2.5,
            "process": "consumer-0",
            "group": "g",
            "member": "m",
            "generation": 2,
            "action": "assign",
            "partitions": [],
        },
        {**delivery_of(after_rebalance), "index": index + 2},
        {**fault, "index": index + 3, "mono": LATE, "action": "inject", "params": '{"seq": 7}'},
        {**fault, "index": index + 4, "mono": 2.6, "action": "heal", "params": '{"seq": 8}'},
    ]
    pq.write_table(pa.Table.from_pylist(rows, schema=history.schema), history_path)
    return run_dir


def test_yardstick_counts_planted_anomalies(tmp_path: Path) -> None:
    run_dir = plant_anomalies(tmp_path)
    figures = yardstick(run_dir)["figures"]
    assert figures["totals"] == {
        "sends": RECORDS,
        "acked": RECORDS,
        "failed": 0,
        "indeterminate": 0,
        "log_records": RECORDS,
        "deliveries": RECORDS + 1,
        "expired": 0,
        "compacted": 0,
    }
    assert figures["anomalies"] == {
        "lost_acked": 1,
        "lost_indeterminate": 0,
        "unseen_by_group": 1,
        "duplicate_in_log": 1,
        "duplicate_delivery_after_rebalance": 1,
        "duplicate_delivery_other": 1,
        "reordered": 1,
        "inconsistent_offsets": 2,
    }
    generated, unhealed = figures["ack_latency"]
    assert generated["heal_mono"] is not None
    assert (unhealed["target"], unhealed["inject_mono"], unhealed["heal_mono"]) == ("broker-2", LATE, None)
    assert unhealed["before"]["count"] + unhealed["during"]["count"] == RECORDS
    assert unhealed["during"]["count"] > 0
    assert unhealed["after"] == {"count": 0, "p50_ms": None, "p99_ms": None}
    assert figures == reference_figures(run_dir)


def test_spark_yardstick_counts_what_the_yardstick_counts(tmp_path: Path, audit_spark: Any) -> None:
    """The statement in Spark SQL on a real local session: the planted anomalies, the two fault windows
    (one never healed) and their latencies, as DuckDB's statement and the reference give them."""
    run_dir = plant_anomalies(tmp_path)
    got = spark_yardstick(run_dir, spark=audit_spark)
    assert got["query_s"] > 0
    assert got["figures"] == yardstick(run_dir)["figures"]
    assert got["figures"] == reference_figures(run_dir)


@settings(max_examples=40)
@given(plan=plans())
def test_yardstick_agrees_with_reference_on_generated_runs(tmp_path_factory: Any, plan: Plan) -> None:
    """The property tests' generated runs with their planted anomalies, transactions left out (the
    yardstick does not model them): the yardstick's figures are the reference's."""
    no_txn = tuple((p, k, part, "ok" if s.startswith("txn") else s, ms) for p, k, part, s, ms in plan.layout)
    case = build(dataclasses.replace(plan, layout=no_txn), "run")
    assume(not any(isinstance(e, TxnMarker) for e in case.events))  # a planted aborted read
    run_dir = tmp_path_factory.mktemp("run")
    (run_dir / "history").mkdir()
    pq.write_table(history_table(case.events), run_dir / "history" / "events.parquet")
    pq.write_table(log_table(case.log, "run"), run_dir / "log.parquet")
    facts = reference_audit(case.events, case.log, case.options or DEFAULT_OPTIONS)
    assert yardstick(run_dir)["figures"] == figures_from_facts(json.loads(json.dumps(asdict(facts))))


def test_run_costs_reads_each_runs_timings_and_keeps_the_first_audit_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import run_costs
    from chaos.run.manifest import read_scenario, write_scenario
    from tests.report_sample import SAMPLE_T0, write_sample_run

    for name, t0, history_s, audit_s in (
        ("b", SAMPLE_T0 + 100, 40.0, 2.0),
        ("a", SAMPLE_T0, 20.0, 12.0),  # started first: the cold audit
        ("c", SAMPLE_T0 + 200, 10.0, 3.0),
    ):
        run_dir = write_sample_run(tmp_path / "tests" / name / "run", seconds=2, t0=t0)
        info = read_scenario(run_dir)
        assert info is not None
        timings = {"history_s": history_s, "audit_s": audit_s}
        write_scenario(run_dir, dataclasses.replace(info, timings=timings))
    write_sample_run(tmp_path / "tests" / "unfinished" / "run", seconds=2, crashed=True)

    costs = run_costs.run_costs(tmp_path)
    assert [c.run.split("/")[1] for c in costs] == ["a", "b", "c"]
    totals = run_costs.summary(costs)
    assert totals["first_audit_s"] == 12.0
    assert totals["median_warm_audit_s"] == 2.5
    assert totals["median_warm_ratio"] == pytest.approx((0.05 + 0.3) / 2)
    assert totals["max_warm_ratio"] == pytest.approx(0.3)
    assert run_costs.main([str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["runs"] == 3
    assert run_costs.main([str(tmp_path), "--engine", "no-such-engine"]) == 2
