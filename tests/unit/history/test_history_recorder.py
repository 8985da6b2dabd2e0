"""The recorder and readers: round trips through JSONL and Parquet, concurrency, torn tails, failures."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pytest

from chaos.errors import HistoryError
from chaos.history import (
    ARROW_SCHEMA,
    EVENT_TYPES,
    ClientLog,
    Event,
    ProbeCall,
    Recorder,
    RunDir,
    SendInvoke,
    compact_history,
    events_from_table,
    filter_kinds,
    kind_counts,
    load_history,
    read_events,
    read_history,
    to_spark,
    value_id_for,
)
from chaos.history.recorder import encode_events
from tests.unit.history.test_history_events import RUN, sample_events


def _invoke(process: str, seq: int, run: str = RUN) -> SendInvoke:
    return SendInvoke(
        run_id=run,
        process=process,
        value_id=value_id_for(run, process, seq),
        producer=process,
        seq=seq,
        topic="chaos",
        key=f"k{seq % 16}",
    )


def _strip(table: pa.Table) -> pa.Table:
    return table.replace_schema_metadata(None)


# ---- round trips ---------------------------------------------------------------------------------


def test_round_trip_every_kind_through_parquet(tmp_path: Path) -> None:
    events = sample_events()
    with Recorder(tmp_path, RUN) as recorder:
        for event in events:
            recorder.record(event)
    rd = RunDir.of(tmp_path)
    assert rd.parquet_path.exists()
    assert rd.segment_paths() == []
    loaded = load_history(tmp_path)
    assert loaded.source == "parquet"
    assert loaded.torn_lines == 0
    assert loaded.run_id == RUN
    assert loaded.table.schema.remove_metadata() == ARROW_SCHEMA
    assert loaded.table["index"].to_pylist() == list(range(len(events)))
    assert read_events(tmp_path) == events


def test_a_version_1_parquet_history_reads_with_the_later_columns_null(tmp_path: Path) -> None:
    import pyarrow.parquet as pq  # type: ignore[import-untyped,unused-ignore]

    events = [e for e in sample_events() if e.kind not in ("topic_policy", "log_start")]
    events = [replace(e, tombstone=None) if isinstance(e, SendInvoke) else e for e in events]
    with Recorder(tmp_path, RUN) as recorder:
        recorder.record_many(events)
    path = RunDir.of(tmp_path).parquet_path
    table = pq.read_table(path)
    added = ("tombstone", "cleanup_policy", "retention_ms", "retention_bytes", "delete_retention_ms")
    old = table.drop_columns(list(added))
    meta = {**(table.schema.metadata or {}), b"chaos.history.schema_version": b"1"}
    pq.write_table(old.replace_schema_metadata(meta), path)
    loaded = load_history(tmp_path)
    assert loaded.schema_version == 1
    assert loaded.table.schema.remove_metadata() == ARROW_SCHEMA
    assert read_events(tmp_path) == events


def test_round_trip_every_kind_through_jsonl_while_live(tmp_path: Path) -> None:
    events = sample_events()
    with Recorder(tmp_path, RUN) as recorder:
        recorder.record_many(events)
        recorder.flush()
        loaded = load_history(tmp_path)  # the writer is still open: no Parquet yet
        assert loaded.source == "jsonl"
        assert loaded.torn_lines == 0
        assert list(events_from_table(loaded.table)) == events
        assert recorder.stats().written == len(events)


def test_jsonl_and_parquet_give_identical_tables(tmp_path: Path) -> None:
    with Recorder(tmp_path, RUN, keep_jsonl=True) as recorder:
        recorder.record_many(sample_events())
    rd = RunDir.of(tmp_path)
    from_parquet = read_history(tmp_path)
    rd.parquet_path.rename(tmp_path / "aside.parquet")
    from_jsonl = read_history(tmp_path)
    assert _strip(from_jsonl).equals(_strip(from_parquet))
    assert from_jsonl.schema.metadata[b"chaos.history.source"] == b"jsonl"


def test_filters_by_kind(tmp_path: Path) -> None:
    with Recorder(tmp_path, RUN) as recorder:
        recorder.record_many(sample_events())
    table = read_history(tmp_path)
    counts = kind_counts(table)
    assert set(counts) == set(EVENT_TYPES)
    assert counts["send_outcome"] == 4
    sends = filter_kinds(table, "send_invoke", "send_outcome")
    assert sends.num_rows == 6
    assert sends.num_columns == len(ARROW_SCHEMA)
    narrow = filter_kinds(table, "delivery", narrow=True)
    assert narrow.column_names == [
        "index",
        "run_id",
        "kind",
        "ts",
        "mono",
        "process",
        "value_id",
        "key",
        "topic",
        "partition",
        "offset",
        "member",
        "group",
        "generation",
    ]
    assert read_history(tmp_path, kinds=["fault"]).num_rows == 2
    with pytest.raises(HistoryError, match="kind: expected one of"):
        filter_kinds(table, "sends")


def test_text_is_stored_as_utf8_and_lone_surrogates_do_not_corrupt_the_file(tmp_path: Path) -> None:
    with Recorder(tmp_path, RUN) as recorder:
        recorder.record(ClientLog(run_id=RUN, process="c", level="info", message='无法 "q" \\ \n\t'))
        recorder.record(ClientLog(run_id=RUN, process="c", level="info", message="bad \udc80 byte"))
        recorder.flush()
        messages = read_history(tmp_path)["message"].to_pylist()
        assert messages == ['无法 "q" \\ \n\t', "bad ? byte"]


def test_empty_run_gives_an_empty_history(tmp_path: Path) -> None:
    Recorder(tmp_path, RUN).close()
    table = read_history(tmp_path)
    assert table.num_rows == 0
    assert table.schema.remove_metadata() == ARROW_SCHEMA


def test_missing_history_is_a_history_error(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="no history under"):
        read_history(tmp_path)


# ---- lifecycle -------------------------------------------------------------------------------------


def test_record_after_close_raises_and_close_is_idempotent(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path, RUN)
    recorder.record(sample_events()[0])
    path = recorder.close()
    assert recorder.closed
    assert recorder.close() == path
    with pytest.raises(HistoryError, match="is closed"):
        recorder.record(sample_events()[0])
    with pytest.raises(HistoryError, match="is closed"):
        recorder.record_many(sample_events())
    assert read_history(tmp_path).num_rows == 1


def test_concurrent_close_calls_agree(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path, RUN)
    recorder.record_many(sample_events())
    results: list[Path] = []
    closers = [threading.Thread(target=lambda: results.append(recorder.close())) for _ in range(3)]
    for closer in closers:
        closer.start()
    for closer in closers:
        closer.join()
    assert results == [RunDir.of(tmp_path).parquet_path] * 3


def test_rejects_other_runs_and_non_events(tmp_path: Path) -> None:
    with Recorder(tmp_path, RUN) as recorder:
        with pytest.raises(HistoryError, match="differs from this recorder's"):
            recorder.record(_invoke("producer-0", 0, run="other-run"))
        with pytest.raises(HistoryError, match="expected an Event"):
            recorder.record({"kind": "send_invoke"})  # type: ignore[arg-type]


def test_bad_settings_are_refused(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match=r"flush_interval: expected seconds in \(0, 0.5\]"):
        Recorder(tmp_path, RUN, flush_interval=2.0)
    with pytest.raises(HistoryError, match="run_id"):
        Recorder(tmp_path, "run:1")


def test_one_writer_per_run_dir(tmp_path: Path) -> None:
    with Recorder(tmp_path, RUN):
        with pytest.raises(HistoryError, match="another process or recorder is writing"):
            Recorder(tmp_path, RUN)
        with pytest.raises(HistoryError, match="another process or recorder is writing"):
            compact_history(tmp_path)
    with pytest.raises(HistoryError, match="already holds a history"):
        Recorder(tmp_path, RUN)


def test_flusher_writes_without_being_asked(tmp_path: Path) -> None:
    with Recorder(tmp_path, RUN, flush_interval=0.1) as recorder:
        recorder.record(sample_events()[0])
        deadline = time.monotonic() + 5.0
        while recorder.stats().written < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert read_history(tmp_path).num_rows == 1


def test_segments_roll_and_indexes_stay_contiguous(tmp_path: Path) -> None:
    with Recorder(tmp_path, RUN, segment_max_bytes=4096, keep_jsonl=True) as recorder:
        for seq in range(300):
            recorder.record(_invoke("producer-0", seq))
            if seq % 25 == 0:
                recorder.flush()
    rd = RunDir.of(tmp_path)
    assert len(rd.segment_paths()) > 3
    assert recorder.stats().segments == len(rd.segment_paths())
    rd.parquet_path.unlink()
    table = read_history(tmp_path)
    assert table["index"].to_pylist() == list(range(300))
    assert table["seq"].to_pylist() == list(range(300))


def test_writer_failure_surfaces_and_keeps_what_was_written(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path, RUN)
    recorder.record(_invoke("producer-0", 0))
    recorder.flush()

    def disk_full(data: bytes) -> None:
        raise OSError(28, "No space left on device")

    recorder._write = disk_full  # type: ignore[method-assign]
    recorder.record(_invoke("producer-0", 1))
    with pytest.raises(HistoryError, match="No space left"):
        recorder.flush()
    with pytest.raises(HistoryError, match="writer failed"):
        recorder.record(_invoke("producer-0", 2))
    with pytest.raises(HistoryError, match="events from index 1 on were lost"):
        recorder.close()
    assert read_history(tmp_path)["seq"].to_pylist() == [0]  # JSONL kept and readable
    compact_history(tmp_path)
    assert read_history(tmp_path)["seq"].to_pylist() == [0]


# ---- crash tolerance -------------------------------------------------------------------------------


def _crashed_history(tmp_path: Path, n: int = 5) -> Path:
    """A history whose writer 'died': JSONL only, no Parquet, no lock holder."""
    with Recorder(tmp_path, RUN, keep_jsonl=True) as recorder:
        for seq in range(n):
            recorder.record(_invoke("producer-0", seq))
    RunDir.of(tmp_path).parquet_path.unlink()
    return RunDir.of(tmp_path).segment_paths()[-1]


def test_torn_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    segment = _crashed_history(tmp_path)
    torn = encode_events([_invoke("producer-0", 5)], 5)[:37]
    with segment.open("ab") as f:
        f.write(torn)
    loaded = load_history(tmp_path)
    assert loaded.source == "jsonl"
    assert loaded.torn_lines == 1
    assert loaded.table["seq"].to_pylist() == [0, 1, 2, 3, 4]
    path = compact_history(tmp_path)
    assert RunDir.of(tmp_path).segment_paths() == []
    again = load_history(tmp_path)
    assert (again.source, again.torn_lines, again.table["seq"].to_pylist()) == ("parquet", 1, [0, 1, 2, 3, 4])
    assert compact_history(tmp_path) == path  # idempotent


def test_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    segment = _crashed_history(tmp_path)
    with segment.open("ab") as f:
        f.write(encode_events([_invoke("producer-0", 5)], 5).rstrip(b"\n"))
    loaded = load_history(tmp_path)
    assert (loaded.torn_lines, loaded.table.num_rows) == (0, 6)


def test_torn_header_counts_as_torn(tmp_path: Path) -> None:
    _crashed_history(tmp_path)
    (RunDir.of(tmp_path).history_dir / "events-000001.jsonl").write_bytes(b'{"chaos_hist')
    loaded = load_history(tmp_path)
    assert (loaded.torn_lines, loaded.table.num_rows) == (1, 5)


def test_corruption_in_the_middle_is_an_error_naming_the_line(tmp_path: Path) -> None:
    segment = _crashed_history(tmp_path)
    lines = segment.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"index": 1, "kind"\n'
    segment.write_bytes(b"".join(lines))
    with pytest.raises(HistoryError, match="line 3 is not valid JSON"):
        read_history(tmp_path)


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    segment = _crashed_history(tmp_path)
    lines = segment.read_bytes().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["chaos_history"]["schema_version"] = 99
    segment.write_bytes(json.dumps(header).encode() + b"\n" + b"".join(lines[1:]))
    with pytest.raises(HistoryError, match=r"schema version 99.*upgrade"):
        read_history(tmp_path)


def test_foreign_file_is_refused(tmp_path: Path) -> None:
    history = RunDir.of(tmp_path).history_dir
    history.mkdir()
    (history / "events-000000.jsonl").write_text('{"kind": "send_invoke"}\n')
    with pytest.raises(HistoryError, match="not a chaos history header"):
        read_history(tmp_path)


# ---- concurrency and speed -----------------------------------------------------------------------


def _record_concurrently(recorder: Recorder, batches: list[list[Event]]) -> float:
    """Record each batch from its own thread, all released at once; returns the seconds taken."""
    start = threading.Barrier(len(batches) + 1)

    def work(batch: list[Event]) -> None:
        record = recorder.record
        start.wait()
        for event in batch:
            record(event)

    threads = [threading.Thread(target=work, args=(b,)) for b in batches]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


def test_concurrent_writers_lose_nothing_and_keep_per_thread_order(tmp_path: Path) -> None:
    threads, per_thread = 6, 5_000
    batches: list[list[Event]] = [
        [_invoke(f"producer-{t}", s) for s in range(per_thread)] for t in range(threads)
    ]
    settings: dict[str, Any] = {"flush_interval": 0.05, "segment_max_bytes": 256 << 10, "keep_jsonl": True}
    with Recorder(tmp_path, RUN, **settings) as recorder:
        _record_concurrently(recorder, batches)
    for source in ("parquet", "jsonl"):
        if source == "jsonl":
            RunDir.of(tmp_path).parquet_path.unlink()
        loaded = load_history(tmp_path)
        assert loaded.source == source
        assert loaded.torn_lines == 0
        table = loaded.table
        assert table.num_rows == threads * per_thread
        assert table["index"].to_pylist() == list(range(threads * per_thread))
        by_process: dict[str, list[int]] = {}
        for process, seq in zip(table["process"].to_pylist(), table["seq"].to_pylist(), strict=True):
            by_process.setdefault(process, []).append(seq)
        # every thread's events are all there, in the order it recorded them
        assert by_process == {f"producer-{t}": list(range(per_thread)) for t in range(threads)}


def test_record_rate_from_four_threads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    threads, per_thread = 4, 40_000
    batches: list[list[Event]] = []
    for t in range(threads):
        batch: list[Event] = []
        for seq in range(per_thread):
            batch.append(_invoke(f"producer-{t}", seq))
        batches.append(batch)
    total = threads * per_thread
    began = time.perf_counter()
    recorder = Recorder(tmp_path, RUN, keep_jsonl=True)
    record_seconds = _record_concurrently(recorder, batches)
    recorder.flush()
    to_disk_seconds = time.perf_counter() - began
    jsonl_bytes = recorder.stats().jsonl_bytes
    close_began = time.perf_counter()
    parquet = recorder.close()
    close_seconds = time.perf_counter() - close_began
    record_rate = total / record_seconds
    disk_rate = total / to_disk_seconds
    with capsys.disabled():
        print(
            f"\n[history] {total} send_invoke events from {threads} threads: record() {record_rate:,.0f}/s, "
            f"written to JSONL {disk_rate:,.0f}/s, close (JSONL->Parquet) {close_seconds:.2f}s; "
            f"{jsonl_bytes / total:.0f} B/event JSONL, {parquet.stat().st_size / total:.1f} B/event Parquet"
        )
    assert read_history(tmp_path).num_rows == total
    assert record_rate >= 20_000
    assert disk_rate >= 20_000


# ---- Spark (no JVM: a stand-in session checks which reader to_spark picks) ------------------------


class _FakeFrame:
    def __init__(self, source: str, data: Any) -> None:
        self.source, self.data = source, data
        self.filters: list[tuple[str, list[str]]] = []
        self.columns = list(ARROW_SCHEMA.names)  # a file of the current version: nothing to add

    def __getitem__(self, name: str) -> _FakeColumn:
        return _FakeColumn(name)

    def where(self, condition: tuple[str, list[str]]) -> _FakeFrame:
        self.filters.append(condition)
        return self


class _FakeColumn:
    def __init__(self, name: str) -> None:
        self.name = name

    def isin(self, values: list[str]) -> tuple[str, list[str]]:
        return (self.name, values)


class _FakeReader:
    def parquet(self, path: str) -> _FakeFrame:
        return _FakeFrame("parquet", path)


class _FakeSpark:
    read = _FakeReader()

    def createDataFrame(self, table: pa.Table) -> _FakeFrame:
        return _FakeFrame("arrow", table)


def test_to_spark_reads_parquet_directly_and_jsonl_through_arrow(tmp_path: Path) -> None:
    spark: Any = _FakeSpark()
    with Recorder(tmp_path, RUN, keep_jsonl=True) as recorder:
        recorder.record_many(sample_events())
    frame: Any = to_spark(spark, tmp_path, kinds=["delivery"])
    assert (frame.source, frame.data, frame.filters) == (
        "parquet",
        str(RunDir.of(tmp_path).parquet_path),
        [("kind", ["delivery"])],
    )
    RunDir.of(tmp_path).parquet_path.unlink()
    frame = to_spark(spark, tmp_path)
    assert frame.source == "arrow"
    assert frame.data.num_rows == len(sample_events())


def test_probe_call_int_durations_round_trip_as_floats(tmp_path: Path) -> None:
    event = ProbeCall(run_id=RUN, process="probe", operation="metadata", duration_ms=12, timeout_ms=500)
    with Recorder(tmp_path, RUN) as recorder:
        recorder.record(event)
    assert read_events(tmp_path) == [event]
