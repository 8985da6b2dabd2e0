"""Fault plans are pure data: the same seed gives the same bytes, and a saved plan replays exactly."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from chaos.errors import PlanError
from chaos.faults.plan import (
    CLUSTER_KINDS,
    KINDS,
    RUN_GROUP,
    RUN_TOPIC,
    TOPIC_KINDS,
    FaultStep,
    Plan,
    generate_plan,
)
from chaos.faults.targets import ActiveController, CoordinatorOf, FollowerOf, LeaderOf, TxnCoordinatorOf


def test_same_seed_same_plan_bytes() -> None:
    first = generate_plan(1234, brokers=3, duration_s=300, topic="orders").to_json()
    second = generate_plan(1234, brokers=3, duration_s=300, topic="orders").to_json()
    assert first.encode() == second.encode()
    assert len(Plan.from_json(first).steps) > 5


def test_different_seed_different_plan() -> None:
    assert generate_plan(1, duration_s=300).to_json() != generate_plan(2, duration_s=300).to_json()


def test_plan_round_trips_through_json() -> None:
    plan = generate_plan(99, brokers=5, duration_s=600, topic="t")
    again = Plan.from_json(plan.to_json())
    assert again == plan
    assert again.to_json() == plan.to_json()


def test_steps_never_overlap_and_fit_the_duration() -> None:
    plan = generate_plan(7, duration_s=120)
    for earlier, later in zip(plan.steps, plan.steps[1:], strict=False):
        assert earlier.at_s + earlier.duration_s < later.at_s
    assert plan.duration_s <= 120
    assert {s.kind for s in plan.steps} <= set(KINDS)


def test_json_has_sorted_keys_and_no_spaces() -> None:
    text = generate_plan(5, duration_s=60).to_json()
    assert text.startswith('{"brokers":3,"format":1,"length_s":60.0,"seed":5,"steps":[')
    assert ": " not in text


@pytest.mark.parametrize(
    "target",
    [
        3,
        LeaderOf("t", 1),
        FollowerOf("t", 0, 1),
        ActiveController(),
        CoordinatorOf("g"),
        TxnCoordinatorOf("x"),
    ],
)
def test_every_target_round_trips(target: object) -> None:
    step = FaultStep(1.0, 2.0, "pause", target)  # type: ignore[arg-type]
    assert FaultStep.from_data(step.to_data()) == step


def test_unknown_kind_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="not one of"):
        FaultStep(0.0, 1.0, "meteor", 1)


def test_malformed_json_is_a_plan_error() -> None:
    with pytest.raises(PlanError, match="format"):
        Plan.from_json('{"format": 0, "seed": 1, "brokers": 3, "steps": []}')


def test_topic_operations_are_drawn_only_with_a_topic_and_build_on_its_partition() -> None:
    from chaos.cluster.broker import Broker
    from chaos.cluster.cluster import KafkaCluster
    from chaos.cluster.images import ImageSet
    from chaos.faults.operations import PreferredElection, ReassignReplicas
    from chaos.faults.plan import build_fault

    assert not {s.kind for s in generate_plan(3, duration_s=3000).steps} & set(TOPIC_KINDS)
    kinds = ("preferred_election", "reassign_replicas")
    plan = generate_plan(3, duration_s=600, topic="orders", kinds=kinds)
    assert {s.kind for s in plan.steps} == set(kinds)
    assert Plan.from_json(plan.to_json()) == plan
    cluster = KafkaCluster(ImageSet("kafka:x", "toxiproxy:x", "reaper:x", ()))
    cluster.brokers = tuple(Broker(i, f"kafka-{i}", 9000 + i, None) for i in (1, 2, 3))  # type: ignore[arg-type]
    for step in plan.steps:
        fault = build_fault(cluster, step)
        assert fault.target_text == "topic orders"
        if step.kind == "reassign_replicas":
            assert isinstance(fault, ReassignReplicas)
            assert (fault.partition, sorted(fault.replicas)) == (0, [1, 2, 3])
        else:
            assert isinstance(fault, PreferredElection)
            assert fault.partitions == (0,)
    with pytest.raises(PlanError, match="give generate_plan a topic"):
        generate_plan(3, kinds=("preferred_election",))
    with pytest.raises(PlanError, match="targets the leader of a partition"):
        build_fault(cluster, FaultStep(0.0, 1.0, "preferred_election", 2))


RANDOM = {
    "topic": RUN_TOPIC,
    "group": RUN_GROUP,
    "partitions": 3,
    "concurrency": 2,
    "rotate_s": 20.0,
    "quiet": 0.2,
}
"""RN1's options (scenarios/test_rn1_random_nemesis.py)."""


@pytest.mark.parametrize("seed", range(20))
def test_a_random_mix_is_byte_identical_per_seed_and_keeps_its_bounds(seed: int) -> None:
    plan = generate_plan(seed, duration_s=600, **RANDOM)  # type: ignore[arg-type]
    assert plan.to_json().encode() == generate_plan(seed, duration_s=600, **RANDOM).to_json().encode()  # type: ignore[arg-type]
    assert Plan.from_json(plan.to_json()) == plan
    assert plan.max_concurrent <= 2
    assert plan.duration_s <= 600 == plan.length_s
    for step in plan.steps:
        overlapping = [o for o in plan.steps if o is not step and o.at_s < step.end_s and step.at_s < o.end_s]
        if step.kind in CLUSTER_KINDS:
            assert not overlapping, (step, overlapping)  # a split of every broker runs alone
    starts = [s.at_s for s in plan.steps]
    assert starts == sorted(starts)
    # rotation: each 20 s period starts steps of at most three kinds
    periods: dict[int, set[str]] = {}
    for step in plan.steps:
        periods.setdefault(int(step.at_s // 20), set()).add(step.kind)
    assert all(len(kinds) <= 3 for kinds in periods.values())


def test_a_toxic_that_delays_traffic_holds_longer_than_its_delay() -> None:
    """A 1.2 s latency held for 0.9 s saw no packet cross its proxy (once seen in RN1's strong seed 2): a
    window must outlast the delay for traffic to show it."""
    steps = [s for seed in range(20) for s in generate_plan(seed, duration_s=600, **RANDOM).steps]  # type: ignore[arg-type]
    delayed = [s for s in steps if s.kind in ("latency", "reset_peer")]
    assert len(delayed) > 20

    def delay_s(step: FaultStep) -> float:
        params = dict(step.params)
        return sum(v for k in ("ms", "jitter_ms", "timeout_ms") if isinstance(v := params.get(k), int)) / 1000

    for step in delayed:
        assert step.duration_s >= delay_s(step) + 2.0 - 1e-9, step
    lengthened = [s for s in delayed if abs(s.duration_s - (delay_s(s) + 2.0)) < 1e-6]
    assert lengthened  # drawn shorter than the delay asks, and lengthened to it


def test_random_mixes_overlap_rotate_and_draw_every_kind_and_role() -> None:
    plans = [generate_plan(seed, duration_s=600, **RANDOM) for seed in range(20)]  # type: ignore[arg-type]
    assert any(p.max_concurrent == 2 for p in plans)
    assert {s.kind for p in plans for s in p.steps} == set(KINDS)
    targets = {type(s.target).__name__ for p in plans for s in p.steps}
    assert targets == {"int", "LeaderOf", "FollowerOf", "ActiveController", "CoordinatorOf"}
    quiet = [
        period
        for p in plans
        for period in range(30)
        if not any(period * 20 <= s.at_s < (period + 1) * 20 for s in p.steps)
    ]
    assert quiet  # some 20 s periods inject nothing
    one_at_a_time = generate_plan(3, duration_s=600, topic="t")
    assert one_at_a_time.max_concurrent == 1


def test_a_transactional_id_adds_its_coordinator_as_a_role_and_leaves_other_plans_as_they_were() -> None:
    with_txn = [generate_plan(s, duration_s=600, **RANDOM, transactional_id="chaos-x") for s in range(10)]  # type: ignore[arg-type]
    roles = {type(step.target).__name__ for plan in with_txn for step in plan.steps}
    assert "TxnCoordinatorOf" in roles
    assert {
        step.target for plan in with_txn for step in plan.steps if "Txn" in type(step.target).__name__
    } == {TxnCoordinatorOf("chaos-x")}
    for plan in with_txn:
        assert Plan.from_json(plan.to_json()) == plan


# sha256 of RN1's plans (RANDOM, 600 s) for seeds 1-3 as first generated: the seeds quoted in
# docs/measurements.md replay the same faults as long as these hold (a change of the draws must change them
# on purpose)
PINNED = {
    1: "82feaab0b98fc951320e770cb8bf6904b85205a4edca43ad62ba2a46e2525c7d",
    2: "27ffe61f76d0a1a90ae21af49bdaabe44e68d1338eb66bb39a43ab56918602f6",
    3: "c85e58fbce529f01e602258a5da797d3db86fcd4e9a4a2db9391f4e44a0a8e9f",
}


def test_the_seeds_quoted_in_the_docs_still_draw_their_plans() -> None:
    for seed, digest in PINNED.items():
        text = generate_plan(seed, duration_s=600, **RANDOM).to_json()  # type: ignore[arg-type]
        assert hashlib.sha256(text.encode()).hexdigest() == digest, seed


def test_a_short_mix_always_holds_a_fault() -> None:
    """A 60 s mix whose three 20 s periods all fell quiet tested nothing (RN1's ci run then ends unknown: 13
    of the first 2,000 seeds did); such a seed's plan is drawn again from a seed derived from it."""
    plans = [generate_plan(seed, duration_s=60, **RANDOM) for seed in range(3000)]  # type: ignore[arg-type]
    assert all(plan.steps for plan in plans)
    assert generate_plan(7, duration_s=60, **RANDOM) == plans[7]  # type: ignore[arg-type]


def test_toxics_aim_where_their_path_carries_traffic() -> None:
    """A toxic on the quorum path hits the active controller; on a client or replication path a partition's
    leader (or, on the client path, the group's coordinator): brokers whose proxies carry traffic."""
    steps = [s for seed in range(20) for s in generate_plan(seed, duration_s=600, **RANDOM).steps]  # type: ignore[arg-type]
    toxics = [s for s in steps if dict(s.params).get("paths")]
    assert toxics
    for step in toxics:
        paths = dict(step.params)["paths"]
        if paths == ("ctl",):
            assert step.target == ActiveController()
        elif paths == ("ext",):
            assert isinstance(step.target, LeaderOf | CoordinatorOf)
        else:
            assert isinstance(step.target, LeaderOf)


def test_a_plan_binds_the_runs_topic_and_group() -> None:
    plan = generate_plan(11, duration_s=600, **RANDOM)  # type: ignore[arg-type]
    assert RUN_TOPIC in plan.to_json()
    bound = plan.bind("t-run", "g-run")
    text = bound.to_json()
    assert RUN_TOPIC not in text
    assert RUN_GROUP not in text
    assert '"topic":"t-run"' in text
    assert [s.kind for s in bound.steps] == [s.kind for s in plan.steps]


def test_the_resolved_plan_is_what_ran_aimed_at_the_brokers_it_hit() -> None:
    plan = Plan(
        4,
        3,
        (
            FaultStep(1.0, 2.0, "crash", LeaderOf(RUN_TOPIC, 1)),
            FaultStep(2.0, 2.0, "latency", ActiveController(), (("ms", 100), ("paths", ("ctl",)))),
            FaultStep(5.0, 2.0, "replication_cut", FollowerOf(RUN_TOPIC, 0, 1)),
            FaultStep(9.0, 2.0, "partition", ActiveController()),
        ),
        30.0,
    )
    resolved = plan.resolved({0: (3,), 2: (2,), 3: (1, 2, 3)})  # step 1 skipped
    assert [(s.kind, s.target) for s in resolved.steps] == [
        ("crash", 3),
        ("replication_cut", FollowerOf(RUN_TOPIC, 0, 1)),  # a partition's roles: the replay's topic is new
        ("partition", ActiveController()),
    ]
    assert resolved.length_s == resolved.workload_s == 30.0
    assert Plan.from_json(resolved.to_json()) == resolved


def test_partition_and_replication_cut_build_from_their_steps() -> None:
    from chaos.cluster.broker import Broker
    from chaos.cluster.cluster import KafkaCluster
    from chaos.cluster.images import ImageSet
    from chaos.faults.network import Partition, ReplicationCut
    from chaos.faults.plan import build_fault

    cluster = KafkaCluster(ImageSet("kafka:x", "toxiproxy:x", "reaper:x", ()))
    cluster.brokers = tuple(Broker(i, f"kafka-{i}", 9000 + i, None) for i in (1, 2, 3))  # type: ignore[arg-type]
    split = build_fault(cluster, FaultStep(0.0, 1.0, "partition", ActiveController()))
    assert isinstance(split, Partition)
    assert split.groups == [[1], [2], [3]]
    cut = build_fault(cluster, FaultStep(0.0, 1.0, "replication_cut", FollowerOf("t", 2, 1)))
    assert isinstance(cut, ReplicationCut)
    assert (cut.target, cut.leader_target) == (FollowerOf("t", 2, 1), LeaderOf("t", 2))
    with pytest.raises(PlanError, match="follower of a partition"):
        build_fault(cluster, FaultStep(0.0, 1.0, "replication_cut", 2))


def test_plan_files_that_are_not_plans_say_so(tmp_path: Path) -> None:
    missing = tmp_path / "plan.json"
    with pytest.raises(PlanError, match="cannot read the plan"):
        Plan.read(missing)
    missing.write_text('{"format": 1, "seed": 1}')
    with pytest.raises(PlanError, match=r"plan\.json: a plan needs seed, brokers and steps"):
        Plan.read(missing)
    missing.write_text("[1]")
    with pytest.raises(PlanError, match="format"):
        Plan.read(missing)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"concurrency": 0}, "must be >= 1"),
        ({"partitions": 0}, "must be >= 1"),
        ({"rotate_s": 0.0}, "rotate_s > 0"),
        ({"quiet": 1.0}, "quiet < 1"),
    ],
)
def test_bad_generator_options_are_plan_errors(bad: dict[str, float], match: str) -> None:
    with pytest.raises(PlanError, match=match):
        generate_plan(1, **bad)  # type: ignore[arg-type]
