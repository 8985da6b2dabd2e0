"""What Kafka removes on purpose, judged on the real cluster: compaction, retention and DeleteRecords remove
acknowledged values without losing them, a record expired before the group read it is its own finding, and a
record the broker refuses is a failed send, not a loss.

- **compacted topic**: 12 keys rewritten for 30 s with tombstones, the cleaner running every second: values
  superseded by a later value of their key are ``compacted``, nothing is ``lost_acked``, the latest value of
  every key is in the log, and the run passes under at_least_once.
- **compaction does not hide loss**: the same topic with acks=1, the leader of one partition killed right
  after its keys' latest values were acknowledged and before its followers fetched them: those values are
  still ``lost_acked``.
- **retention shorter than the group's outage**: the group stops while the producer goes on; with a 2 s
  retention the records it had not read expire: ``expired_unread`` > 0 (the cause — the topic's retention —
  in ``audit.json``'s removals), no ``lost_acked``; with retention longer than the outage nothing expires
  unread and the run passes.
- **DeleteRecords of a prefix** while the group is behind: ``expired`` counted, nothing lost.
- **oversized records**: ``max.message.bytes`` 10 KB on the topic, one send in 20 of 20 KB: those sends fail
  with ``MSG_SIZE_TOO_LARGE``, counted failed, never lost or unseen; at_least_once passes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from chaos.faults.network import ReplicationCut
from chaos.faults.process import Crash
from chaos.history import DrainEnd, DrainRead, Event, SendInvoke, SendOutcome
from chaos.run.events import Isolation
from chaos.scenario import Scenario, ScenarioRun, Variant, views
from chaos.workload import IDEMPOTENT, Traffic, readers
from chaos.workload.readers import offset_bounds

pytestmark = pytest.mark.integration

SOURCE = "tests/integration/test_log_policies.py"
GROUP: dict[str, str | int | float | bool] = {
    "session.timeout.ms": 6_000,
    "heartbeat.interval.ms": 1_000,
    "auto.offset.reset": "earliest",
}
COMPACTED: dict[str, str | int | float | bool] = {
    "cleanup.policy": "compact",
    "segment.ms": 1_000,
    "min.cleanable.dirty.ratio": 0.01,
    "min.compaction.lag.ms": 0,
    "delete.retention.ms": 60_000,
}


def scenario(name: str, variant: Variant) -> Scenario:
    return Scenario(
        scenario_id=f"log_policy_{name}",
        case_id="LP1",
        title=f"What the log policy removes: {name}",
        source=SOURCE,
        symptom="records removed by compaction, retention or DeleteRecords were reported as lost",
        client=IDEMPOTENT,
        guarantee="at_least_once",
        client_guarantee="at_least_once",
        consumer_config=GROUP,
        expected_verdict="pass",
        variants=(variant,),
    )


def latest_per_key(events: list[Event]) -> dict[tuple[int, str], str]:
    """Per (partition, key) the value id acknowledged at the highest offset."""
    keys = {e.value_id: e.key for e in events if isinstance(e, SendInvoke)}
    best: dict[tuple[int, str], tuple[int, str]] = {}
    for e in events:
        if isinstance(e, SendOutcome) and e.outcome == "ok" and e.offset is not None and keys.get(e.value_id):
            key = keys[e.value_id]
            assert e.partition is not None
            assert key is not None
            slot = (e.partition, key)
            if slot not in best or e.offset > best[slot][0]:
                best[slot] = (e.offset, e.value_id)
    return {slot: v for slot, (_, v) in best.items()}


COMPACT = scenario(
    "compacted_topic",
    Variant("compacted", "cleanup.policy=compact, 12 keys rewritten, 5 % tombstones", topic_config=COMPACTED),
)


def test_a_compacted_topic_removes_superseded_values_and_loses_none(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(COMPACT, "compacted") as run:
        run.create_topic(partitions=2, replication_factor=3)
        run.member("consumer-0", duration_s=90.0)
        traffic = Traffic(keys=12, tombstones=0.05, size=200)
        stats = run.producer(rate=100.0, duration_s=30.0, traffic=traffic).join()
        assert stats.ok > 2_000, stats
        run.wait_caught_up(30)
        time.sleep(4)  # the cleaner's backoff is 1 s: let it pass over the last closed segments
        result = run.finish()
    events = list(result.events)
    totals = result.audit.facts.totals
    drained = {e.value_id for e in events if isinstance(e, DrainRead)}
    latest = latest_per_key(events)
    print(f"\n{result.summary()}; totals {totals}; {len(latest)} keys")
    assert totals.compacted > 0, "the cleaner removed nothing: the case did not happen"
    assert result.count("lost_acked") == 0
    assert set(latest.values()) <= drained, "the latest value of a key is missing"
    assert result.audit.verdict == "pass", result.audit.failed_by


COMPACT_CRASH = scenario(
    "compacted_leader_crash",
    Variant(
        "acks1",
        "cleanup.policy=compact, acks=1, the leader killed before its followers fetched",
        topic_config={**COMPACTED, "min.insync.replicas": 1},
        client_profile="acks1_retries",
        producer_config={"acks": 1, "retries": 10, "retry.backoff.ms": 100, "enable.idempotence": False},
        expected_verdict="fail",
    ),
)


CUT_SETTLE_S = 1.0
"""The cut drops the followers' requests, not the leader's answers: a fetch already waiting (up to
``replica.fetch.wait.max.ms``, 500 ms) still brings the records appended meanwhile."""


def test_compaction_does_not_hide_a_leader_crash_loss(scenario_run: Callable[..., ScenarioRun]) -> None:
    with scenario_run(COMPACT_CRASH, "acks1") as run:
        run.create_topic(partitions=1, replication_factor=3)
        run.member("consumer-0", duration_s=90.0)
        assert run.producer(rate=200.0, count=400, keys=8).join().ok == 400
        (state,) = run.cluster.describe_partitions([run.topic])
        leader = state.leader
        cuts = [run.fault(ReplicationCut, f, leader) for f in state.replicas if f != leader]
        crash = run.fault(Crash, leader)
        try:
            for cut in cuts:
                cut.inject()
            time.sleep(CUT_SETTLE_S)  # a fetch sent before the cut is still answered
            stats = run.producer("producer-1", rate=None, count=40, keys=8).join()
            assert stats.ok > 0, stats
            crash.inject()  # within replica.lag.time.max.ms: a follower still in the ISR takes over
            run.wait_until(
                "a new leader",
                lambda: run.cluster.describe_partitions([run.topic])[0].leader not in (leader, None),
                40,
            )
        finally:
            for cut in cuts:
                cut.heal()
            crash.heal()
        run.wait_caught_up(60)
        result = run.finish()
    print(f"\n{result.summary()}")
    assert result.count("lost_acked") > 0, "a write acknowledged by the crashed leader alone must be lost"
    assert result.audit.verdict == "fail"


def retention(name: str, retention_ms: int) -> Scenario:
    return scenario(
        f"retention_{name}",
        Variant(
            name,
            f"retention.ms={retention_ms}, 500 ms segments; the group stopped while the producer goes on",
            topic_config={"retention.ms": retention_ms, "segment.ms": 500},
            expected_verdict="fail" if name == "short" else "pass",
        ),
    )


OUTAGE_S = 8.0


@pytest.mark.parametrize(("name", "retention_ms"), [("short", 2_000), ("long", 600_000)])
def test_retention_shorter_than_the_groups_outage_expires_records_unread(
    scenario_run: Callable[..., ScenarioRun], name: str, retention_ms: int
) -> None:
    with scenario_run(retention(name, retention_ms), name) as run:
        run.create_topic(partitions=1, replication_factor=3)
        first = run.member("consumer-0", duration_s=120.0)
        producer = run.producer(rate=50.0, duration_s=60.0)
        run.wait_for("the group read something", lambda ev: len(views.deliveries(ev)) > 20, 20)
        first.stop()
        read = max(d.offset for d in views.deliveries(run.events()))
        run.note(f"the group stopped at offset {read}")
        time.sleep(OUTAGE_S)
        if name == "short":  # retention deletes whole closed segments, checked every second
            run.wait_until(
                "retention removed records the group had not read",
                lambda: (
                    offset_bounds(run.cluster.admin(), run.topic, "read_uncommitted", 5.0)[0][0] > read + 1
                ),
                45,
            )
        run.member("consumer-1", duration_s=120.0)
        time.sleep(2)
        producer.stop()
        run.wait_caught_up(30)
        result = run.finish()
    facts = result.audit.facts
    print(f"\n{name}: {result.summary()}; removals {facts.removals}")
    assert result.count("lost_acked") == 0
    written = json.loads((result.run_dir / "audit.json").read_text())
    if name == "short":
        assert result.count("expired_unread") > 0, "nothing expired unread: the case did not happen"
        removals = written["facts"]["removals"]
        assert any(r["retention_ms"] == retention_ms and r["expired_unread"] for r in removals)
        assert result.audit.verdict == "fail"
        assert "expired_unread" in result.audit.failed_by
    else:
        assert result.count("expired_unread") == 0
        assert result.audit.verdict == "pass", result.audit.failed_by


DELETE = scenario(
    "delete_records", Variant("prefix", "DeleteRecords of the first 200 offsets, the group behind")
)


def test_delete_records_of_a_prefix_is_expired_not_lost(
    scenario_run: Callable[..., ScenarioRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also a removal racing the final drain, as retention does: records deleted after the read_committed
    drain listed its start and before it read them are not taken for an aborted transaction's records."""
    with scenario_run(DELETE, "prefix") as run:
        run.create_topic(partitions=1, replication_factor=3)
        stats = run.producer(rate=None, count=400).join()
        assert stats.ok == 400, stats
        start = run.delete_records(0, 200)
        assert start == 200
        run.member("consumer-0", duration_s=60.0)
        run.wait_caught_up(30)
        listed = readers._list_offsets_retrying

        def then_removed(
            admin: Any, topic: str, partitions: list[int], isolation: Isolation, *rest: Any
        ) -> Any:
            bounds = listed(admin, topic, partitions, isolation, *rest)
            if isolation == "read_committed":  # the read_uncommitted drain has read 200..399 by now
                run.cluster.delete_records(topic, 0, 300)
            return bounds

        monkeypatch.setattr(readers, "_list_offsets_retrying", then_removed)
        result = run.finish()
    totals = result.audit.facts.totals
    print(f"\n{result.summary()}; totals {totals}")
    ends = {e.isolation: e for e in run.events() if isinstance(e, DrainEnd)}
    assert (ends["read_uncommitted"].low_offset, ends["read_committed"].low_offset) == (200, 300)
    assert totals.expired == 200
    assert result.count("lost_acked") == 0
    assert result.count("expired_unread") == 200  # the group was behind: DeleteRecords removed them unread


OVERSIZED = scenario(
    "oversized",
    Variant(
        "max_message_bytes",
        "max.message.bytes=10240; 1 send in 20 of 20 KB",
        topic_config={"max.message.bytes": 10_240},
    ),
)


def test_oversized_records_fail_and_are_never_lost(scenario_run: Callable[..., ScenarioRun]) -> None:
    with scenario_run(OVERSIZED, "max_message_bytes") as run:
        run.create_topic(partitions=1, replication_factor=3)
        run.member("consumer-0", duration_s=60.0)
        traffic = Traffic(sizes=[(200, 19), (20_000, 1)])
        # batches under the topic's limit: the broker refuses a whole batch, so only a lone 20 KB record
        # may be refused for its own size
        batches = (("batch.size", 8_192), ("linger.ms", 5))
        stats = run.producer(rate=200.0, count=400, traffic=traffic, overrides=batches).join()
        run.wait_caught_up(30)
        result = run.finish()
    events = list(result.events)
    failed = [e for e in events if isinstance(e, SendOutcome) and e.outcome == "fail"]
    print(f"\n{result.summary()}; {stats}; {len(failed)} failed")
    assert 0 < len(failed) < 60, "about 1 send in 20 should be refused"
    assert {e.error for e in failed} == {"MSG_SIZE_TOO_LARGE"}
    totals = result.audit.facts.totals
    assert totals.failed == len(failed)
    assert totals.acked == 400 - len(failed)
    assert result.count("lost_acked") == 0
    assert result.count("unseen_by_group") == 0
    assert result.audit.verdict == "pass", result.audit.failed_by
