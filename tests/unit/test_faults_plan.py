"""Fault plans are pure data: the same seed gives the same bytes, and a saved plan replays exactly."""

from __future__ import annotations

import pytest

from chaos.errors import PlanError
from chaos.faults.plan import KINDS, FaultStep, Plan, generate_plan
from chaos.faults.targets import ActiveController, CoordinatorOf, FollowerOf, LeaderOf


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
    assert text.startswith('{"brokers":3,"format":1,"seed":5,"steps":[')
    assert ": " not in text


@pytest.mark.parametrize(
    "target", [3, LeaderOf("t", 1), FollowerOf("t", 0, 1), ActiveController(), CoordinatorOf("g")]
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
    from chaos.faults.plan import TOPIC_KINDS, build_fault

    assert not {s.kind for s in generate_plan(3, duration_s=3000).steps} & set(TOPIC_KINDS)
    plan = generate_plan(3, duration_s=600, topic="orders", kinds=TOPIC_KINDS)
    assert {s.kind for s in plan.steps} == set(TOPIC_KINDS)
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
