"""D3 `consumer_crash_after_process_before_commit` — a consumer killed between processing and commit.

docs/catalog.md 3 D3 (003 § 7 (1) 重复消费问题 and § Consumer API (3); 001 "先执行成功，最后commit，
但是commit失败，重复消息"; 002 § 4.1.2 ``insertIntoDb(buffer); consumer.commitSync();``).
The seed: "如果直接 kill 消费者进程然后再重启，就导致 consumer 有些消息处理了，但是没来得及提交 offset。
等重启之后，少数消息就会再次消费一次".

Setup: topic of 1 partition, RF 3; 200 values (60 in ``remediated``) produced first (idempotent
producer); one consumer in a child process (``ProcessMember``: a real SIGKILL — no close, no commit, no
LeaveGroup), ``enable.auto.commit=false``, synchronous commit of each batch *after* processing it
(``commit_after``); ``session.timeout.ms`` 6 s (the broker's minimum), heartbeat 1 s.

Timeline: the consumer processes and commits; once it has committed twice and holds a delivered record
above its last commit (it is processing an uncommitted batch), SIGKILL; restart it at once (a new member
of the same group); it gets the partition once the coordinator expires the dead member (session timeout)
and resumes from the last committed offset; wait until every value was delivered and the group is idle;
drain; audit (the session's engine, Spark by default).

- ``vulnerable`` — batches of 50 (``consume(num_messages=50)``, Java's ``max.poll.records``), 0.02 s per
  record. Claims ``exactly_once`` — the seed's application processes each record once — while the
  client is at-least-once (``client_guarantee``). Audit: ``duplicate_delivery_after_rebalance`` = the
  records the killed consumer had processed but not committed (> 0, at most one batch), no loss:
  verdict **fail**.
- ``remediated`` — commit after *each* record (batches of 1; 0.05 s per record) **and** an idempotent sink
  keyed by message id (003 § 7(2): look the key up before inserting / a consumption-record table). The
  per-record commit bounds the redelivery to the one record in progress (0 or 1: the kill may land
  between a commit and the next record); the idempotent sink absorbs that one, which the audit cannot
  see — so this variant claims ``at_least_once`` (no loss; bounded redelivery is the sink's business) and
  the test asserts the bound: at most 1 duplicate, verdict **pass**. Exactly-once *processing* without
  an idempotent sink needs the result and the offset in one transaction (002 § 4.3.2; in Kafka:
  consume-transform-produce with ``send_offsets_to_transaction``, O6).

The restarted consumer must be a new member (a precondition: otherwise the run is inconclusive).
Recorded as evidence: it resumes at the killed one's last committed offset. Asserted (audit): the
duplicate count equals exactly the records the killed member had delivered above that offset; no other
duplicate, no loss, nothing unseen.

Measured (ci, this machine, 5 runs): ``vulnerable`` 47 / 50 / 50 / 50 / 50 duplicates (the batch in
progress: ``consume()`` returned 47 records once), the restarted member resumed at the committed offset
100, 6.0 s after the kill (session timeout) every run; ``remediated`` 1 duplicate every run (killed while
processing the third record; resumed at offset 2). A variant takes 17–26 s.
"""

from __future__ import annotations

from chaos.history import Commit, Delivery, Event
from chaos.scenario import Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import IDEMPOTENT, Processing

RECORDS = {"vulnerable": 200, "remediated": 60}
BATCH = {"vulnerable": 50, "remediated": 1}
PER_RECORD = {"vulnerable": 0.02, "remediated": 0.05}
NAME = "consumer-0"

SCENARIO = Scenario(
    scenario_id="consumer_crash_after_process_before_commit",
    case_id="D3",
    title="Consumer killed after processing a batch, before committing it: the batch is consumed again",
    source="003 § 7 (1) 重复消费问题, § Consumer API (3); 001; 002 § 4.1.2",
    symptom=(
        "如果直接 kill 消费者进程然后再重启，就导致 consumer 有些消息处理了，但是没来得及提交 offset。"
        "等重启之后，少数消息就会再次消费一次"
    ),
    client=IDEMPOTENT,
    client_guarantee="idempotent",
    consumer_config={
        "session.timeout.ms": 6_000,
        "heartbeat.interval.ms": 1_000,
        "max.poll.interval.ms": 6_000,
        "enable.auto.commit": False,
    },
    variants=(
        Variant(
            "vulnerable",
            "commit after processing each batch of 50 (consume(num_messages=50), commitSync)",
            guarantee="exactly_once",
            expected_verdict="fail",
            client_profile="idempotent_commit_after_batch",
        ),
        Variant(
            "remediated",
            "commit after processing each record (batch of 1) and an idempotent sink",
            guarantee="at_least_once",
            expected_verdict="pass",
            client_profile="idempotent_commit_per_record",
        ),
    ),
    remediation=(
        "Make processing idempotent (003 § 7(2)): look the record up by its key or message id before "
        "inserting, or keep a consumption-record table keyed by message id; Redis SET is naturally "
        "idempotent.",
        "Commit (or store) the offset right after each record is processed: a crash redelivers at most the "
        "record in progress.",
        "Store the result and the offset atomically (002 § 4.3.2: one DB transaction; in Kafka, a "
        "transactional consume-transform-produce: O6).",
    ),
    related=("D8", "O6"),
)


def _uncommitted(events: list[Event]) -> bool:
    """The member holds a delivered record whose offset it has not committed yet (after 2 commits)."""
    delivered = [e.offset for e in events if isinstance(e, Delivery) and e.process == NAME]
    commits = [e for e in events if isinstance(e, Commit) and e.process == NAME and e.outcome == "ok"]
    if len(commits) < 2 or not delivered:
        return False
    committed = max((o.offset for o in commits[-1].offsets if o.offset is not None), default=-1)
    return max(delivered) >= committed


@chaos_scenario(SCENARIO)
def test_d3(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=1, replication_factor=3)
    stats = run.producer(count=RECORDS[variant], rate=None, duration_s=30.0).join()
    assert stats.ok == RECORDS[variant], stats
    processing = Processing(per_record_s=PER_RECORD[variant])
    spec = run.member_spec(NAME, processing=processing, batch_size=BATCH[variant])
    member = run.process_member(spec).start()
    run.on_close(lambda: member.stop())
    run.wait_for("a processed, uncommitted record", _uncommitted, 60, interval_s=0.02)
    member.crash()
    run.mark("consumer-killed")
    run.note("consumer-0 SIGKILLed")
    member.start()
    run.wait_for(
        "every acknowledged value delivered", lambda ev: views.acked_ids(ev) <= views.delivered_ids(ev), 60
    )
    run.wait_quiet("the group idle", lambda e: isinstance(e, Delivery), 1.5, 60)
    result = run.finish()

    events = result.events
    after = result.count("duplicate_delivery_after_rebalance")
    delivered = views.deliveries(events, NAME)
    crash = views.mark(events, "consumer-killed")
    # the killed member: the one that delivered before the kill; the new one: after it
    first = next((d.member for d in reversed(delivered) if d.mono < crash.mono), None)
    second = next((d.member for d in delivered if d.mono > crash.mono), None)
    committed = max(
        (
            o.offset or 0
            for c in views.commits(events, NAME)
            if c.member == first and c.outcome == "ok"
            for o in c.offsets
        ),
        default=0,
    )
    held = max((d.offset for d in delivered if d.member == first), default=-1) + 1 - committed
    resumed = min((d.offset for d in delivered if d.member == second), default=-1)
    assert result.count("duplicate_delivery_other") == 0
    assert result.count("lost_acked") == 0
    assert result.count("unseen_by_group") == 0
    if result.precondition(
        "the restarted consumer is a new member of the group",
        None not in (first, second) and first != second,
        f"{first} then {second}",
    ):
        takeover = next(
            (r for r in views.rebalances(events, NAME) if r.member == second and r.action == "assign"), None
        )
        delay = f"{takeover.mono - crash.mono:.1f} s" if takeover else "never"
        result.symptom(
            "the new member resumed at the killed one's last committed offset",
            resumed == committed,
            f"resumed at {resumed}, committed up to {committed} ({held} processed, uncommitted); "
            f"partition assigned {delay} after the kill",
        )
        assert after == held, "exactly the processed, uncommitted records are delivered again"
        if variant == "vulnerable":
            assert 0 < after <= BATCH[variant], "at most one batch is consumed again"
            assert result.audit.failed_by == ("duplicate_delivery_after_rebalance",)
        else:
            assert after <= 1, "per-record commits: at most the record in progress is consumed again"
