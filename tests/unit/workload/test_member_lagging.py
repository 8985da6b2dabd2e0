"""``member_spec(lagging=True)``: a member whose fetch position stays next to what it processed, so a slow
member lags on the broker (librdkafka otherwise prefetches 100,000 records per partition); librdkafka
itself accepts the settings, and the caller's overrides win over them."""

from __future__ import annotations

from chaos.scenario.workers import RunWorkers
from chaos.workload.clientconf import construct


def test_a_lagging_member_prefetches_at_most_one_small_fetch() -> None:
    overrides = dict(RunWorkers().member_spec("consumer-0", lagging=True).overrides)
    assert overrides == {
        "max.partition.fetch.bytes": 1024,
        "queued.min.messages": 1,
        "queued.max.messages.kbytes": 1,
    }
    refusal, warnings = construct("consumer", overrides)
    assert refusal is None
    assert not warnings


def test_the_callers_overrides_win_and_the_java_member_gets_what_it_translates() -> None:
    workers = RunWorkers()
    mine = dict(
        workers.member_spec("consumer-0", lagging=True, overrides={"queued.min.messages": 5}).overrides
    )
    assert mine["queued.min.messages"] == 5
    assert RunWorkers().member_spec("consumer-0").overrides == ()
    workers.client_library = "java"
    assert dict(workers.member_spec("consumer-0", lagging=True).overrides) == {
        "max.partition.fetch.bytes": 1024
    }
