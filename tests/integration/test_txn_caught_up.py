"""On the real cluster: ``ScenarioRun.wait_caught_up()`` on a transactional topic.

A transactional producer writes committed and aborted transactions to the run's topic: partition 0 ends
with an aborted transaction (its records, then the abort marker), partition 1 with a committed one's commit
marker. Each partition's high watermark − 1 is a marker, which no consumer is given: the old wait (for
offset end − 1) never returned. Now it returns within seconds, for a read_committed group once it delivered
every committed record (and no aborted one), for a read_uncommitted group once it delivered every record.
The group's isolation level is the variant's consumer configuration, taken by the wait by default.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from chaos.run.events import Delivery, value_id_for
from chaos.scenario import Scenario, ScenarioRun, Variant, views
from chaos.workload import IDEMPOTENT, TRANSACTIONAL, producer_config

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_PARTITION = 10  # records of one transaction in each partition it writes
TRANSACTIONS = 5  # 0, 2, 4 commit, 1, 3 abort; then one more on partition 0 only, aborted
CAUGHT_UP_WITHIN_S = 10.0

SCENARIO = Scenario(
    scenario_id="txn_caught_up",
    case_id="X14",
    title="wait_caught_up on a transactional topic",
    source="tests/integration/test_txn_caught_up.py",
    symptom="wait_caught_up() waited for offset end − 1, a transaction marker, and never returned",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(
        Variant(
            "read_committed",
            "a read_committed group",
            consumer_config={"isolation.level": "read_committed"},
        ),
        Variant(
            "read_uncommitted",
            "a read_uncommitted group",
            consumer_config={"isolation.level": "read_uncommitted"},
        ),
    ),
)


def write_transactions(run: ScenarioRun) -> tuple[set[str], set[str]]:
    """The committed and the aborted value ids; every aborted record is in the log before its abort."""
    name = "txn-writer"
    config = producer_config(
        TRANSACTIONAL, run.bootstrap, name, run.time, {"transactional.id": f"tx-{run.run_id}"}
    )
    producer = Producer(config)
    producer.init_transactions(30)
    committed: set[str] = set()
    aborted: set[str] = set()
    seq = 0
    plan = [(t, range(PARTITIONS), t % 2 == 0) for t in range(TRANSACTIONS)]
    plan.append((TRANSACTIONS, range(1), False))  # partition 0 ends with an aborted transaction
    for _, partitions, commit in plan:
        producer.begin_transaction()
        ids: list[str] = []
        for partition in partitions:
            for _ in range(PER_PARTITION):
                vid = value_id_for(run.run_id, name, seq)
                seq += 1
                producer.produce(run.topic, value=vid.encode(), key=vid.encode(), partition=partition)
                ids.append(vid)
        if commit:
            producer.commit_transaction(30)
            committed.update(ids)
        else:
            assert producer.flush(30) == 0, "the aborted records must reach the log before the abort"
            producer.abort_transaction(30)
            aborted.update(ids)
    return committed, aborted


@pytest.mark.parametrize("variant", ["read_committed", "read_uncommitted"])
def test_wait_caught_up_returns_on_a_transactional_topic(
    scenario_run: Callable[..., ScenarioRun], variant: str
) -> None:
    with scenario_run(SCENARIO, variant) as run:
        run.create_topic(partitions=PARTITIONS, replication_factor=3)
        run.member("consumer-0")
        committed, aborted = write_transactions(run)
        took = run.wait_caught_up(60)
        events = run.events()
        highs = run.end_offsets()
        stable = run.end_offsets(isolation="read_committed")
    delivered = views.delivered_ids(events)
    last: dict[int, int] = {}
    for e in events:
        if isinstance(e, Delivery) and e.topic == run.topic:
            last[e.partition] = max(last.get(e.partition, -1), e.offset)
    print(
        f"\n{variant}: caught up in {took:.1f} s; high watermarks {highs}, LSOs {stable}; last delivered "
        f"offsets {last}; {len(committed)} committed, {len(aborted)} aborted values; {len(delivered)} "
        "delivered"
    )
    assert took < CAUGHT_UP_WITHIN_S
    assert stable == highs, "no transaction is left open"
    assert all(last.get(p, -1) < end - 1 for p, end in highs.items()), (
        "each partition's end − 1 is a marker, never delivered (the case the old wait hung on)"
    )
    assert committed <= delivered, f"committed values not delivered: {sorted(committed - delivered)[:5]}"
    if variant == "read_committed":
        assert not delivered & aborted, "a read_committed group was given aborted records"
    else:
        assert aborted <= delivered, f"aborted values not delivered: {sorted(aborted - delivered)[:5]}"
