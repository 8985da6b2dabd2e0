"""RN1 `random` — a seeded random mix of every fault the library has, over a long mixed workload.

Not a case from the seeds: the failures a team has not met yet, found the way Jepsen finds them — a
workload runs under a random but seeded schedule of faults, and the audit judges the history afterwards.
``chaos run RANDOM --seed N --duration 10m`` runs it; ``chaos replay RUN_DIR`` runs a run's plan again
(docs/faults.md, "Random nemesis and replay").

Setup: topic of 3 partitions, RF 3; two producers (the variant's client, 100 values/s each); a group of two
members committing after processing; the runner's introspection every 0.5 s.

Timeline: warm-up (values acknowledged and replicated); the nemesis runs the plan drawn from the seed
(:func:`chaos.faults.plan.generate_plan`): every kind of :data:`~chaos.faults.plan.KINDS` — crash, stop,
pause, network cut, a full partition, isolation from the quorum, a replication cut, the client-path
toxics (refuse, latency, bandwidth, reset, slicer, data limit), broker removal, preferred election and
reassignment; with ``--chaos-fault-kinds all`` (``chaos run RANDOM --fault-kinds all``) a broker's clock
jumping or drifting and its log directory filling as well, on a cluster started with a fakeable clock and
log directories of its own — aimed by role (a partition's leader or follower, the active controller, the
group's coordinator, in ``mixed`` the transformer's transaction coordinator, any broker), at most two at
once, the allowed kinds rotated every 20 s with quiet periods (Jepsen's Bufstream suite rotates every 30 s).
When the plan ends everything is healed, the producers stop, the brokers agree on leaders, the group
catches up; audit. A pass needs every fault that held proven landed (each kind measures its own effect:
docs/faults.md, "Proof that a fault landed"), else the run is
``unknown``; a step that would change nothing when it is due (a preferred election where the preferred
replicas lead) is skipped, not run. A failure found stands whichever fault did not land — in a dense mix a
fault now and then finds no traffic (a quorum-path toxic on a controller that just lost its leadership),
and the loss the others caused is real all the same.

Variants (each claims ``at_least_once`` for the group's reads; ``mixed`` judges each producer by its own):

- ``vulnerable`` — acks=1, min.insync.replicas=1, unclean leader election on: a crashed or cut leader's
  unreplicated acknowledged writes are lost. Expected verdict **fail** — found within minutes, not
  seconds: without ``--chaos-duration`` of at least :data:`MIN_FINDING_S` the variant is skipped before
  its run opens (``chaos run RANDOM --variant vulnerable --duration 10m``).
- ``remediated`` — acks=all with idempotence, min.insync.replicas=2, unclean election off: whatever the
  plan does, no acknowledged value is lost, none unread, none reordered. Expected verdict **pass**; its
  ci-length run (60 s of faults) is part of ``make chaos``.
- ``mixed`` — the same topic and group, but ``producer-0`` runs the idempotent profile and ``producer-1`` a
  plain one (acks=all, retries, no idempotence, one request in flight), each handed its profile
  (``run.producer(client=...)``), and
  a transactional consume-transform-produce stage feeds the run's topic too: ``producer-t`` (idempotent)
  writes an input topic, ``transformer-0`` (:mod:`chaos.workload.transactional`, a group of its own, its
  restarts after an error bounded) copies each input record into the run's topic in a transaction with
  its input offsets, and the topic is read ``read_committed``. The audit judges each producer's values by
  the guarantee its client claims — a duplicate of ``producer-1``'s in the log is its accepted price, one
  of ``producer-0``'s fails the run, and so does one of ``producer-t``'s (acknowledged into the input,
  they must reach the output once: the transactions' promise) — and the rest by the variant's. Expected
  **pass**; its ci-length run is part of ``make chaos``.
"""

from __future__ import annotations

from chaos.history import Event, TxnMarker
from chaos.run.events import Isolation, producer_of
from chaos.scenario import Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import TRANSACTIONAL, AnyProducer
from chaos.workload.transactional import TxnWorkerSpec

RATE = 100.0
PRODUCERS = 2
MEMBERS = 2
PARTITIONS = 3
DURATION_S = {"ci": 60.0, "faithful": 600.0}
"""The plan's length when no ``--chaos-duration`` is given."""
MIN_FINDING_S = 300.0
"""Below this the vulnerable variant is skipped: in 60 s the weak configuration may well lose nothing."""
ROTATE_S = 20.0
QUIET = 0.2
CONCURRENCY = 2
Settings = tuple[tuple[str, object], ...]
ORDERED: Settings = (("max.in.flight.requests.per.connection", 1),)
STREAMS: dict[str, tuple[tuple[str, Settings], ...]] = {
    "mixed": (("idempotent", ()), ("at_least_once", ORDERED))
}
"""Per variant, each producer's own client profile and the settings laid over it: each is a stream the audit
judges by that profile's guarantee (the other variants' producers run the variant's). The plain producer
keeps one request in flight: without idempotence, a retry behind a later request reorders a partition (O1),
which no guarantee accepts — found on Kafka 4.0.2 (2 ``reordered`` of ``producer-1``'s with 5
in flight)."""
SETTLE_S = 120.0
"""Bound on each wait after the plan: the brokers agreeing, the group catching up."""
TRANSFORMED = {"mixed"}
"""The variants with the transactional consume-transform-produce stage."""
FEEDER, TRANSFORMER = "producer-t", "transformer-0"
TRANSFORMER_ID = f"chaos-{TRANSFORMER}"
"""Its ``transactional.id`` (the harness's default: ``chaos-<name>``)."""
ISOLATIONS: dict[bool, tuple[Isolation, ...]] = {
    True: ("read_committed",),
    False: ("read_uncommitted", "read_committed"),
}
TRANSFORMER_RESTARTS = 20
"""How often the transformer starts again after an error ends it (a commit the faults made fail for good):
as an application's supervisor would, bounded."""

SCENARIO = Scenario(
    scenario_id="random",
    case_id="RN1",
    title="A seeded random mix of faults over a mixed workload (Jepsen's nemesis)",
    source="Jepsen's Kafka and Bufstream tests (rotating nemesis); every catalog case's fault",
    symptom="(none: the faults a team has not met yet, as a seeded random schedule)",
    guarantee="at_least_once",
    variants=(
        Variant(
            "vulnerable",
            "acks=1, min.insync.replicas=1, unclean leader election on",
            expected_verdict="fail",
            client_profile="acks1_retries",
            producer_config={"acks": 1, "retries": 10, "retry.backoff.ms": 100, "enable.idempotence": False},
            topic_config={"min.insync.replicas": 1, "unclean.leader.election.enable": True},
            min_duration_s=MIN_FINDING_S,
        ),
        Variant(
            "remediated",
            "acks=all (idempotent), min.insync.replicas=2, unclean leader election off",
            expected_verdict="pass",
            client_profile="idempotent",
            producer_config={"acks": "all", "enable.idempotence": True},
            topic_config={"min.insync.replicas": 2, "unclean.leader.election.enable": False},
        ),
        Variant(
            "mixed",
            "an idempotent producer (judged by idempotent) beside a plain acks=all one (at_least_once), "
            "min.insync.replicas=2, unclean leader election off",
            expected_verdict="pass",
            client_profile="idempotent",
            producer_config={"acks": "all", "enable.idempotence": True},
            # the transformer's aborted copies are not deliveries: a read_uncommitted group reads them
            # and then the committed copy, a duplicate exactly-once forbids (seen on 3.9.2, a fenced txn)
            consumer_config={"isolation.level": "read_committed"},
            topic_config={"min.insync.replicas": 2, "unclean.leader.election.enable": False},
        ),
    ),
    remediation=(
        "acks=all with idempotence, replication.factor 3, min.insync.replicas=2, unclean election off.",
        "A failing seed replays exactly: chaos replay RUN_DIR (plan.resolved.json, the brokers it hit).",
    ),
    related=("PB1", "ISR2", "L2", "D1"),
)


@chaos_scenario(SCENARIO)
def test_random(run: ScenarioRun) -> None:
    length_s = run.length_s or DURATION_S.get(run.time.name, DURATION_S["ci"])
    run.create_topic(partitions=PARTITIONS, replication_factor=3)
    run.introspect(interval_s=0.5)
    workload_s = length_s + 4 * SETTLE_S  # the producers are stopped when the plan is done
    for m in range(MEMBERS):
        run.member(f"consumer-{m}", duration_s=workload_s)
    streams: tuple[tuple[str | None, Settings], ...] = STREAMS.get(
        run.variant.name, ((None, ()),) * PRODUCERS
    )
    producers = [
        run.producer(
            f"producer-{p}",
            rate=RATE,
            duration_s=workload_s,
            flush_timeout_s=30.0,
            client=profile,
            overrides=overrides,
        )
        for p, (profile, overrides) in enumerate(streams)
    ]
    if run.variant.name in TRANSFORMED:
        producers.append(_transform(run, workload_s))
    run.wait_for("warm-up acks", lambda ev: len(views.acked_ids(ev)) >= RATE, 30)
    run.wait_for("warm-up values delivered", lambda ev: len(views.delivered_ids(ev)) >= RATE, 30)

    plan = run.plan(
        duration_s=length_s,  # kinds: the session's --chaos-fault-kinds, by default KINDS
        partitions=PARTITIONS,
        concurrency=CONCURRENCY,
        rotate_s=ROTATE_S,
        quiet=QUIET,
        # the transformer's transaction coordinator is a role to aim at too
        transactional_id=TRANSFORMER_ID if run.variant.name in TRANSFORMED else None,
    )
    nemesis = run.nemesis(plan, must_land=False)  # judged together, below
    done = nemesis.wait(plan.workload_s + SETTLE_S)
    run.note(
        f"plan {'done' if done else 'still running (stopped)'}: {len(nemesis.resolved)} of "
        f"{len(plan.steps)} steps ran, {len(nemesis.skipped)} skipped (their broker already hit, or "
        "nothing to change)"
    )
    nemesis.stop()
    for producer in producers:
        producer.stop()
    run.wait_converged(SETTLE_S)
    transformed = run.variant.name in TRANSFORMED
    if transformed:
        run.wait_for("the transformer committed every acknowledged input", _all_transformed, SETTLE_S, 1.0)
    run.wait_caught_up(SETTLE_S)
    result = run.finish(
        isolations=("read_committed",) if transformed else ("read_uncommitted", "read_committed")
    )

    injected = [e for e in views.faults(result.events) if e.action == "inject"]
    result.precondition(
        "the nemesis injected faults",
        bool(injected),
        f"{len(injected)} injected of {len(plan.steps)} planned",
    )
    unproven = run.unproven()
    held = [r for r in run.faults.records() if not r.inject_failed]
    result.precondition(
        "every fault that held was proven landed — or the audit found what the guarantee forbids "
        "(a failure found stands; only a pass needs every fault proven)",
        not unproven or result.audit.verdict == "fail",
        "; ".join(
            f"fault {r.seq} ({r.kind} on {r.target}): {r.effect.evidence if r.effect else 'not measured'}"
            + (f" ({'; '.join(r.notes)})" if r.notes else "")
            for r in unproven
        )
        or f"all {len(held)} faults that held proven landed",
    )
    print(
        f"\n{run.variant.name}: seed {plan.seed}, {len(plan.steps)} steps over {plan.duration_s:.0f} s (at "
        f"most {plan.max_concurrent} at once), {len(injected)} injected, {len(held)} held, "
        f"{len(held) - len(unproven)} proven landed; errors {nemesis.errors[:5]}"
    )


def _transform(run: ScenarioRun, workload_s: float) -> AnyProducer:
    """The transactional stage: ``producer-t`` into an input topic (as the run's topic is configured), and
    ``transformer-0`` copying it into the run's topic; returns the feeder (stopped with the producers)."""
    source = f"in-{run.run_id}"
    run.create_topic(PARTITIONS, 3, name=source, config=run.variant.topic_settings())
    feeder = run.producer(FEEDER, topic=source, rate=RATE / 2, duration_s=workload_s, client="idempotent")
    spec = TxnWorkerSpec(
        TRANSFORMER, input_topic=source, duration_s=workload_s + 2 * SETTLE_S, restarts=TRANSFORMER_RESTARTS
    )
    worker = run.transform(spec, client=TRANSACTIONAL, group=f"{run.group}-transform")
    run.on_close(worker.stop)
    worker.start()
    return feeder


def _all_transformed(events: list[Event]) -> bool:
    acked = {v for v in views.acked_ids(events) if producer_of(v) == FEEDER}
    committed = {
        v
        for e in events
        if isinstance(e, TxnMarker) and e.action == "commit" and e.outcome == "ok"
        for v in e.value_ids
    }
    return acked <= committed
