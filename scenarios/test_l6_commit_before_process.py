"""L6 `consumer_commit_before_process_crash` — offsets committed before processing; a crash skips the rest.

docs/catalog.md 2 L6 (003 § 6(2): "消息实际上并没有被消费，但是 offset 却被自动提交了" — the message was not
really consumed but its offset was auto-committed; 003 § Consumer API 2(3) "先提交 offset 后消费，有可能造成
数据的漏消费"; 004 案例2; 001 "先commit，但执行失败，消息丢失"; 002 § 4.1.2). With librdkafka the trap is
``enable.auto.offset.store=true`` (the default): an offset is *stored* as soon as ``consume()`` returns the
record, and the auto-commit timer (librdkafka's own thread) commits what is stored — whether or not the
application has processed it.

How the audit sees it: the group members record a ``Delivery`` when a record has been **processed**
(``MemberSpec.record_delivery="processed"``), so the history's deliveries are the processing sink. A
record committed but never processed by the crashed member, and skipped by its successor, is a value in the
log never delivered to the group: ``unseen_by_group`` (fatal under ``at_least_once``).

Setup: topic of 1 partition, RF 3; 300 values produced first (idempotent producer). Members process
records one by one; ``session.timeout.ms`` 6 s (the broker minimum), heartbeat 1 s,
``auto.commit.interval.ms`` 1000 (002's example; 000's default is 5000).

Timeline (ci):

1. member A — a child process (``ProcessMember``) — joins, gets a batch of up to 100 records and processes
   them at 0.05 s each (5 s per batch; slower under a longer ``auto.commit.interval.ms``, a gate's: a
   batch lasts at least four intervals);
2. once A has processed 30 records of its first batch and at least 2 auto-commit intervals have passed,
   the group's committed offset is read (OffsetFetch, noted in the history); in ``vulnerable`` the test
   first waits until the committed offset is past the last record A processed (the auto-commit of the
   stored batch);
3. **SIGKILL** A (no close, no commit, no LeaveGroup);
4. member B (same configuration, no processing delay) joins; the coordinator gives it the partition once
   A's session expires (~6 s); B resumes from the committed offset;
5. B reaches the end offset and goes idle; B closes; final drain; audit (the session's engine,
   Spark by default).

In a gate run the members commit as the team's application does (its ``[consumer]``): the checks below
follow that strategy — auto commit with the automatic offset store is judged as ``vulnerable``, a store or
commit after processing as ``remediated``.

Variants (both claim ``at_least_once``, what the application needs):

- ``vulnerable`` — ``enable.auto.commit=true``, ``enable.auto.offset.store=true`` (librdkafka's defaults;
  Java's auto-commit). A's whole batch was committed ~1 s after ``consume()`` returned it, while A had
  processed only part of it; B starts after the batch. Audit: ``unseen_by_group`` = exactly the records
  between A's last processed one and the committed offset; verdict **fail**.
- ``remediated`` — ``enable.auto.offset.store=false`` and ``store_offsets()`` after processing the batch
  (auto commit on; equivalently ``enable.auto.commit=false`` + ``commit()`` after processing). A stored
  nothing before the crash; B starts from the last committed offset and re-processes what A had processed.
  Audit: ``unseen_by_group`` = 0, ``duplicate_delivery_after_rebalance`` = A's processed records
  (expected under at-least-once: "dup≥0", D3); verdict **pass**.

Expected symptoms: none at the client (the commit succeeded — that is the problem). The coordinator's
log shows A's expiry: "Member … has failed, removing it from the group" (GroupCoordinator, session
timeout), then B's generation.

What the test checks: the audit (above); the case's preconditions — A processed a prefix of the partition
and, when it was killed, the auto-commit had covered records it had not processed (``vulnerable``) or
nothing was committed yet, A being mid-batch (``remediated``) — an unmet one makes the run inconclusive;
as evidence (a symptom), the offset B resumed from.
"""

from __future__ import annotations

import contextlib
import time

from confluent_kafka import Consumer, TopicPartition

from chaos.history import Delivery
from chaos.scenario import ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import IDEMPOTENT, CommitStrategy, Processing

RECORDS = 300
BATCH = 100
PER_RECORD_S = 0.05
PROCESSED_BEFORE_CRASH = 30
AUTO_COMMIT_MS = 1_000
STRATEGY: dict[str, CommitStrategy] = {"vulnerable": "auto", "remediated": "store_after"}

SCENARIO = Scenario(
    scenario_id="consumer_commit_before_process_crash",
    case_id="L6",
    title="Offsets committed before processing: a consumer crash skips the unprocessed records",
    source="003 § 6(2); 003 § Consumer API 2(3); 004 案例2; 001; 002 § 4.1.2",
    symptom=(
        "消息实际上并没有被消费，但是 offset 却被自动提交了 — 先提交 offset 后消费，有可能造成数据的漏消费"
    ),
    guarantee="at_least_once",
    client=IDEMPOTENT,
    consumer_config={
        "session.timeout.ms": 6_000,
        "heartbeat.interval.ms": 1_000,
        "auto.commit.interval.ms": AUTO_COMMIT_MS,
        "enable.auto.commit": True,
    },
    variants=(
        Variant(
            "vulnerable",
            "auto commit with auto offset store: offsets stored when consume() returns",
            expected_verdict="fail",
            client_profile="idempotent_auto_commit",
            consumer_config={"enable.auto.offset.store": True},
            not_on_clients={
                "java": "the Java consumer's auto-commit runs inside poll(), so it commits a batch only once "
                "the application asks for the next one — after processing it; the trap needs processing "
                "handed to another thread (003 § 6(2)), which this member does not do"
            },
            expected_symptoms=(
                ExpectedSymptom(
                    "broker_log", "has failed, removing it from the group", "the coordinator expires A"
                ),
            ),
        ),
        Variant(
            "remediated",
            "enable.auto.offset.store=false, store_offsets() after processing, auto commit on",
            expected_verdict="pass",
            client_profile="idempotent_store_after",
            consumer_config={"enable.auto.offset.store": False},
        ),
    ),
    remediation=(
        "Process first, then record the position (004: 维持先消费消息（阅读），再更新位移（书签）的顺序).",
        "librdkafka: enable.auto.offset.store=false and store_offsets(msg) after processing (auto commit "
        "then commits only processed records), or enable.auto.commit=false and commit(msg, "
        "asynchronous=False) after processing.",
        "Make processing idempotent: after a crash the unstored records are processed again (D3).",
    ),
    related=("L7", "D3"),
)


def _committed(probe: Consumer, run: ScenarioRun) -> int:
    """The group's committed offset of partition 0 (OffsetFetch); -1 when nothing is committed."""
    (tp,) = probe.committed([TopicPartition(run.topic, 0)], timeout=5.0)
    return int(tp.offset) if tp.offset >= 0 else -1


@chaos_scenario(SCENARIO)
def test_l6(run: ScenarioRun) -> None:
    variant = run.variant.name
    strategy = run.commit or STRATEGY[variant]  # a gate run: the team's application's own strategy
    stores_on_consume = strategy == "auto"
    interval_s = int(run.client.consumer_settings.get("auto.commit.interval.ms", 5_000)) / 1000
    per_record_s = max(PER_RECORD_S, 4 * interval_s / BATCH)  # a batch outlasts the wait for two commits
    if strategy == "store_after" and run.client_library == "java":
        strategy = "commit_after"  # the Java client keeps no offset store: its remedy is the manual commit
        run.note("store_after has no Java counterpart: the members commit after processing instead")
    run.create_topic(partitions=1, replication_factor=3)
    stats = run.producer(count=RECORDS, rate=None, duration_s=30.0).join()
    assert stats.ok == RECORDS, stats
    probe = Consumer({"bootstrap.servers": run.bootstrap, "group.id": run.group, "enable.auto.commit": False})
    run.on_close(probe.close)

    a = run.process_member(
        run.member_spec(
            "consumer-a",
            processing=Processing(per_record_s=per_record_s),
            batch_size=BATCH,
            strategy=strategy,
            record_delivery="processed",
        ),
    )
    a.start()
    run.on_close(lambda: a.stop() if a.running else None)
    run.wait_for(
        f"A processed {PROCESSED_BEFORE_CRASH} records",
        lambda ev: len(views.deliveries(ev, "consumer-a")) >= PROCESSED_BEFORE_CRASH,
        40,
    )
    time.sleep(2 * interval_s)  # two auto-commit intervals: whatever is stored is committed
    if stores_on_consume:
        with contextlib.suppress(AssertionError):  # a precondition, recorded after finish()
            run.wait_until(
                "the auto-commit covers records A has not processed",
                lambda: (
                    _committed(probe, run)
                    > max(e.offset for e in views.deliveries(run.events(), "consumer-a")) + 1
                ),
                20,
            )
    committed_at_crash = _committed(probe, run)
    a.crash()
    processed_by_a = views.deliveries(run.events(), "consumer-a")
    last_a = max(e.offset for e in processed_by_a)
    run.note(
        f"A killed after processing offsets ..{last_a} ({len(processed_by_a)} records); "
        f"committed offset {committed_at_crash}"
    )
    run.member("consumer-b", batch_size=BATCH, strategy=strategy, record_delivery="processed")
    run.wait_caught_up(40)
    run.wait_quiet("the group idle", lambda e: isinstance(e, Delivery), 2.0, 30)
    result = run.finish()

    events = result.events
    processed_a = views.deliveries(events, "consumer-a")
    processed_b = views.deliveries(events, "consumer-b")
    first_b = min((e.offset for e in processed_b), default=-1)
    unseen = result.count("unseen_by_group")
    dup_after = result.count("duplicate_delivery_after_rebalance")
    print(
        f"\n{variant}: A processed {len(processed_a)} (offsets ..{last_a}), committed at the crash "
        f"{committed_at_crash}; B from offset {first_b}, {len(processed_b)} records"
    )

    assert result.count("lost_acked") == 0
    assert result.count("duplicate_delivery_other") == 0
    prefix = result.precondition(
        "A processed a prefix of the partition, in order",
        len(processed_a) == last_a + 1,
        f"{len(processed_a)} records processed, the last at offset {last_a}",
    )
    if stores_on_consume:
        # Committed past A's last processed record; B resumed at the committed offset: the records in
        # between were never processed by anyone.
        ahead = result.precondition(
            "the auto-commit covered records A had not processed when it was killed",
            committed_at_crash > last_a + 1,
            f"committed offset {committed_at_crash}, A's last processed offset {last_a}",
        )
        result.symptom(
            "B resumed at the committed offset", first_b == committed_at_crash, f"B's first offset {first_b}"
        )
        if prefix and ahead:
            assert unseen == committed_at_crash - (last_a + 1)
            assert "unseen_by_group" in result.audit.failed_by
            assert dup_after == 0
    else:
        # Nothing stored before the batch was processed: B re-processes A's records, none is skipped.
        mid_batch = result.precondition(
            "A was killed mid-batch, nothing committed yet (offsets stored only after a whole batch)",
            committed_at_crash == -1,
            f"committed offset {committed_at_crash}",
        )
        result.symptom("B resumed from the partition's start", first_b == 0, f"B's first offset {first_b}")
        assert unseen == 0
        if prefix and mid_batch:
            assert dup_after == len(processed_a)
