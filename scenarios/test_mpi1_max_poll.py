"""MPI1 — processing slower than ``max.poll.interval.ms``: the member leaves, its batch is redelivered.

docs/catalog.md 1D MPI1 `mpi_slow_rebalance_recovery_leaves_group` (seed 002 § "This member will leave the
group because consumer poll timeout has expired"), with D8 (reprocessing after a rejected commit).
docs/max-poll-interval.md measured what trips the interval in librdkafka: processing *between* polls does;
a slow ``on_assign`` alone does not. This scenario replays the processing case, which is the one both
clients share.

Setup: topic of 2 partitions, RF 3; 120 values produced first (idempotent producer); a group of two
thread members with commit-after-processing (``enable.auto.commit=false``, synchronous commit of each batch
after it is processed). ``session.timeout.ms`` = ``max.poll.interval.ms`` = 6 s (the floor: librdkafka
wants interval ≥ session, the broker session ≥ ``group.min.session.timeout.ms`` = 6 s), heartbeat 1 s.
``consumer-slow`` processes each record in 0.18 s; ``consumer-fast`` in no time.

Timeline: the slow member joins alone and takes both partitions; when its first batch arrives the fast
member joins; the run ends once every acknowledged value was delivered (and, in ``vulnerable``, the slow
member has seen ``_MAX_POLL_EXCEEDED``); the members close; final drain; audit (the session's
engine, Spark by default).

- ``vulnerable`` — batches of 50 (``consume(num_messages)``, Java's ``max.poll.records``): 9 s per batch,
  1.5 × the interval. librdkafka leaves the group when the interval expires; the fast member takes both
  partitions and gets the uncommitted batch again; the slow member's commit fails (``UNKNOWN_MEMBER_ID``)
  and ``consume()`` returns ``_MAX_POLL_EXCEEDED``. Audit: ``duplicate_delivery_after_rebalance`` > 0
  and at most one batch, no loss: **pass** under at_least_once.
- ``remediated`` — batches of 5 (the seed's "reduce max.poll.records"): 0.9 s per batch. No leave, no
  failed commit, no duplicate: **pass**.
- ``remediated_interval`` — batches of 50 with ``max.poll.interval.ms`` = 20 s (the seed's "extend
  max.poll.interval.ms"): no leave, no duplicate: **pass**.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from chaos.history import Delivery, Event
from chaos.scenario import ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import IDEMPOTENT, Processing

RECORDS = 120
PER_RECORD_S = 0.18
SESSION_MS = 6_000
BATCH = {"vulnerable": 50, "remediated": 5, "remediated_interval": 50}
INTERVAL_MS = {"vulnerable": 6_000, "remediated": 6_000, "remediated_interval": 20_000}


def _consumer(variant: str) -> dict[str, int | bool]:
    return {
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 1_000,
        "max.poll.interval.ms": INTERVAL_MS[variant],
        "enable.auto.commit": False,
    }


SCENARIO = Scenario(
    scenario_id="mpi_slow_rebalance_recovery_leaves_group",
    case_id="MPI1",
    title="max.poll.interval.ms expiry: slow processing, the member leaves the group",
    source="002 § This member will leave the group because consumer poll timeout has expired",
    symptom=(
        "This member will leave the group because consumer poll timeout has expired. This means the time "
        "between subsequent calls to poll() was longer than the configured max.poll.interval.ms"
    ),
    guarantee="at_least_once",
    expected_verdict="pass",
    client=IDEMPOTENT,
    client_profile="idempotent_commit_after",
    variants=(
        Variant(
            "vulnerable",
            "batches of 50 at 0.18 s per record (9 s) against max.poll.interval.ms=6000",
            consumer_config=_consumer("vulnerable"),
            expected_symptoms=(
                ExpectedSymptom("error_code", "_MAX_POLL_EXCEEDED", "consume() reports the expired interval"),
                ExpectedSymptom("client_log", "Application maximum poll interval", "librdkafka MAXPOLL"),
                ExpectedSymptom("error_code", "UNKNOWN_MEMBER_ID", "the batch's commit is rejected"),
            ),
        ),
        Variant(
            "remediated",
            "batches of 5 (0.9 s) against max.poll.interval.ms=6000",
            consumer_config=_consumer("remediated"),
        ),
        Variant(
            "remediated_interval",
            "batches of 50 (9 s) against max.poll.interval.ms=20000",
            consumer_config=_consumer("remediated_interval"),
        ),
    ),
    remediation=(
        "Process fewer records per poll (Java max.poll.records; Python consume(num_messages=…)) so one "
        "batch always ends well inside max.poll.interval.ms.",
        "Or extend max.poll.interval.ms above the slowest batch (seed: 延长 max.poll.interval.ms).",
        "Commit after processing and make processing idempotent: a rebalance redelivers the uncommitted "
        "batch (D8).",
    ),
    related=("D8",),
)


def _poll_expired(events: Sequence[Event]) -> set[str]:
    """The members whose poll interval expired, as each client says it: librdkafka's ``_MAX_POLL_EXCEEDED``
    error, the Java client's ``ConsumerCoordinator`` "consumer poll timeout has expired" (``--chaos-client
    java``)."""
    return {
        e.process
        for e in views.client_logs(events)
        if e.error == "_MAX_POLL_EXCEEDED" or "consumer poll timeout has expired" in e.message
    }


@chaos_scenario(SCENARIO)
def test_mpi1(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=2, replication_factor=3)
    stats = run.producer(count=RECORDS, rate=None, duration_s=30.0).join()
    assert stats.ok == RECORDS, stats
    run.sampler(interval_s=0.5, group=True)
    slow = run.member(
        "consumer-slow", processing=Processing(per_record_s=PER_RECORD_S), batch_size=BATCH[variant]
    )
    run.wait_for("first batch of the slow member", lambda ev: bool(views.deliveries(ev, "consumer-slow")), 30)
    run.member("consumer-fast", batch_size=BATCH[variant])
    run.wait_for(
        "every acknowledged value delivered", lambda ev: views.acked_ids(ev) <= views.delivered_ids(ev), 60
    )
    if variant == "vulnerable":
        with contextlib.suppress(AssertionError):  # evidence, judged below
            run.wait_for(
                "_MAX_POLL_EXCEEDED at the slow member",
                lambda ev: bool(_poll_expired(ev)),
                30,
            )
    # let the last batch's commit land before the members close
    run.wait_quiet("the group idle", lambda e: isinstance(e, Delivery), 2.0, 60)
    slow.stop()
    result = run.finish()

    events = result.events
    maxpoll = _poll_expired(events)
    failed_commits = [(c.process, c.error) for c in views.commits(events) if c.outcome != "ok"]
    dup_after = result.count("duplicate_delivery_after_rebalance")
    assert result.count("lost_acked") == result.count("unseen_by_group") == 0
    assert result.count("duplicate_delivery_other") == 0
    if variant == "vulnerable":
        # The case itself: the slow member left its group and its batch was redelivered (at most one batch).
        if result.precondition(
            "the slow member's poll interval expired", maxpoll == {"consumer-slow"}, maxpoll
        ):
            assert 0 < dup_after <= BATCH[variant]  # its uncommitted batch, redelivered once at most
        result.symptom(
            "the slow member's commit was rejected with UNKNOWN_MEMBER_ID (Java: CommitFailedException)",
            bool(
                {("consumer-slow", "UNKNOWN_MEMBER_ID"), ("consumer-slow", "CommitFailedException")}
                & set(failed_commits)
            ),
            failed_commits,
        )
    else:
        assert dup_after == 0
        result.symptom("no member's poll interval expired", not maxpoll, maxpoll)
        result.symptom("no commit failed", not failed_commits, failed_commits)
