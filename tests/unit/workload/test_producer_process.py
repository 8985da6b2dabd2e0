"""The checkpointed producer process without a cluster: its spec, its checkpoint file, its pacing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from chaos.errors import ConfigError
from chaos.workload import IDEMPOTENT, TRANSACTIONAL, ProcessProducer, ProcessProducerSpec
from chaos.workload.producer import Pacer
from chaos.workload.producer_process import _Checkpointer, checkpoint_path, read_checkpoint
from tests.unit.workload.test_workload_specs import context


def spec(**options: Any) -> ProcessProducerSpec:
    return ProcessProducerSpec(**{"name": "app", "rate": None, "count": 10, **options})


def test_the_spec_refuses_an_unknown_checkpoint_and_round_trips() -> None:
    with pytest.raises(ConfigError, match=r"checkpoint: expected 'ack' .* or 'send'"):
        spec(checkpoint="commit")
    built = spec(checkpoint="send", overrides=(("linger.ms", 5),))
    assert ProcessProducerSpec.from_data(built.to_data()) == built


def test_a_transactional_profile_or_no_run_directory_is_refused_before_a_process_starts(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match=r"runs no transactions: use run\.txn_producer"):
        ProcessProducer(context(client=TRANSACTIONAL, run_dir=tmp_path), spec())
    with pytest.raises(ConfigError, match=r"needs the run's directory"):
        ProcessProducer(context(client=IDEMPOTENT), spec())


def test_the_checkpoint_only_moves_forward_and_survives_as_a_file(tmp_path: Path) -> None:
    path = checkpoint_path(context(run_dir=tmp_path), "app")
    assert path == tmp_path / "checkpoints" / "app.json"
    assert read_checkpoint(path) == 0
    keeper = _Checkpointer(path, 0)
    for seq in (4, 2, 7, 6):  # acks arrive out of order across partitions
        keeper.passed(seq)
    assert read_checkpoint(path) == 8
    assert list(path.parent.iterdir()) == [path]  # no temporary file left
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unreadable producer checkpoint .* delete it to start at 0"):
        read_checkpoint(path)


def test_a_resumed_pacer_starts_at_its_checkpoint_and_stops_at_count() -> None:
    class Idle:
        def poll(self, _timeout: float) -> int:
            return 0

    pace = Pacer(spec(count=10), threading.Event(), start=7)
    seqs = []
    while pace.ready(Idle()):  # type: ignore[arg-type]
        seqs.append(pace.seq)
        pace.sent(Idle())  # type: ignore[arg-type]
    assert seqs == [7, 8, 9]
