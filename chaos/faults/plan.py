"""A fault plan is pure data: which fault, on whom, when, for how long — generated from a seed.

``generate_plan(seed, ...)`` draws everything from ``random.Random(seed)``; ``Plan.to_json()`` is
byte-for-byte deterministic (sorted keys, fixed separators, times rounded to milliseconds), so the
same seed gives the same bytes and a saved plan replays exactly (``Plan.from_json``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from chaos.errors import PlanError
from chaos.faults.base import Fault, FaultLog, Param
from chaos.faults.network import IsolateFromQuorum, NetworkCut
from chaos.faults.operations import PreferredElection, ReassignReplicas, RemoveBroker
from chaos.faults.process import Crash, Pause, Stop
from chaos.faults.targets import (
    ActiveController,
    FollowerOf,
    LeaderOf,
    Target,
    target_from_json,
    target_to_json,
)
from chaos.faults.toxics import Bandwidth, Latency, LimitData, Refuse, ResetPeer, Slicer

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

PLAN_FORMAT = 1
KINDS: tuple[str, ...] = (
    "crash",
    "stop",
    "pause",
    "network_cut",
    "isolate_from_quorum",
    "refuse",
    "latency",
    "bandwidth",
    "reset_peer",
    "slicer",
    "limit_data",
    "remove_broker",
    "preferred_election",
    "reassign_replicas",
)
TOPIC_KINDS: tuple[str, ...] = ("preferred_election", "reassign_replicas")
"""Operations on the plan's topic (target: the leader of one of its partitions, which names the partition):
drawn only when :func:`generate_plan` is given a topic."""
_PATH_CHOICES: tuple[tuple[str, ...], ...] = (("ext",), ("int",), ("ctl",), ("ext", "int", "ctl"))


@dataclass(frozen=True)
class FaultStep:
    """Inject ``kind`` on ``target`` ``at_s`` seconds after the nemesis starts; heal after ``duration_s``."""

    at_s: float
    duration_s: float
    kind: str
    target: Target
    params: tuple[tuple[str, Param], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise PlanError(f"fault kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.at_s < 0 or self.duration_s <= 0:
            raise PlanError(
                f"step {self.kind} needs at_s >= 0 and duration_s > 0 (got {self.at_s}, {self.duration_s})"
            )

    def to_data(self) -> dict[str, Any]:
        return {
            "at_s": self.at_s,
            "duration_s": self.duration_s,
            "kind": self.kind,
            "target": target_to_json(self.target),
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in self.params},
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> FaultStep:
        try:
            params = tuple(
                sorted(
                    (str(k), tuple(v) if isinstance(v, list) else v)
                    for k, v in data.get("params", {}).items()
                )
            )
            return cls(
                float(data["at_s"]),
                float(data["duration_s"]),
                str(data["kind"]),
                target_from_json(data["target"]),
                params,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(f"plan step {data!r} is malformed: {exc}") from exc


@dataclass(frozen=True)
class Plan:
    """What a nemesis does: ``steps`` one after another on a cluster of ``brokers``, drawn from ``seed``."""

    seed: int
    brokers: int
    steps: tuple[FaultStep, ...] = field(default=())

    def to_data(self) -> dict[str, Any]:
        """The plan as JSON-able data (what :meth:`to_json` writes; ``scenario.json``'s ``plan``)."""
        return {
            "format": PLAN_FORMAT,
            "seed": self.seed,
            "brokers": self.brokers,
            "steps": [s.to_data() for s in self.steps],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_data(), sort_keys=True, separators=(",", ":"), ensure_ascii=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Plan:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlanError(f"a plan must be JSON written by Plan.to_json(): {exc}") from exc
        if data.get("format") != PLAN_FORMAT:
            raise PlanError(
                f"plan format {data.get('format')!r} is not {PLAN_FORMAT}; regenerate it from its seed"
            )
        return cls(
            int(data["seed"]), int(data["brokers"]), tuple(FaultStep.from_data(s) for s in data["steps"])
        )

    @property
    def duration_s(self) -> float:
        return max((s.at_s + s.duration_s for s in self.steps), default=0.0)


def _ms(value: float) -> float:
    return round(value, 3)


def _draw_target(rng: random.Random, brokers: int, topic: str | None) -> Target:
    roles = ["broker", "controller"] + (["leader", "follower"] if topic else [])
    role = rng.choice(roles)
    if role == "broker":
        return rng.randint(1, brokers)
    if role == "controller":
        return ActiveController()
    assert topic is not None
    if role == "leader":
        return LeaderOf(topic, 0)
    return FollowerOf(topic, 0, rng.randint(0, 1))


def _draw_params(rng: random.Random, kind: str, brokers: int) -> dict[str, Param]:
    if kind == "latency":
        ms = rng.randint(100, 2000)
        return {"ms": ms, "jitter_ms": rng.randint(0, ms // 4), **_draw_route(rng)}
    if kind == "bandwidth":
        return {"rate_kb_s": rng.randint(10, 1000), **_draw_route(rng)}
    if kind == "reset_peer":
        return {"timeout_ms": rng.randint(0, 2000), **_draw_route(rng)}
    if kind == "slicer":
        return {
            "average_size": rng.randint(16, 256),
            "size_variation": rng.randint(0, 16),
            **_draw_route(rng),
        }
    if kind == "limit_data":
        return {"bytes_": rng.randint(1_000, 100_000), **_draw_route(rng)}
    if kind == "refuse":
        return {"paths": rng.choice(_PATH_CHOICES)}
    if kind == "reassign_replicas":  # a new replica set (on 3 brokers a new order: a new preferred leader)
        return {"replicas": tuple(rng.sample(range(1, brokers + 1), min(3, brokers)))}
    return {}


def _draw_route(rng: random.Random) -> dict[str, Param]:
    return {"paths": rng.choice(_PATH_CHOICES), "direction": rng.choice(("upstream", "downstream", "both"))}


def generate_plan(
    seed: int,
    brokers: int = 3,
    duration_s: float = 60.0,
    kinds: tuple[str, ...] = KINDS,
    topic: str | None = None,
    min_fault_s: float = 2.0,
    max_fault_s: float = 10.0,
    max_gap_s: float = 5.0,
) -> Plan:
    """Faults one after another (never overlapping) until ``duration_s``, all drawn from ``seed``."""
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise PlanError(f"kinds {unknown or kinds!r} not in {', '.join(KINDS)}")
    drawable = [k for k in kinds if topic is not None or k not in TOPIC_KINDS]
    if not drawable:
        raise PlanError(f"kinds {kinds!r} are operations on a topic: give generate_plan a topic")
    if not 0 < min_fault_s <= max_fault_s:
        raise PlanError(f"need 0 < min_fault_s <= max_fault_s (got {min_fault_s}, {max_fault_s})")
    rng = random.Random(seed)
    steps: list[FaultStep] = []
    now = _ms(rng.uniform(0, max_gap_s))
    for _ in range(10_000):  # bounded; duration_s ends it long before
        length = _ms(rng.uniform(min_fault_s, max_fault_s))
        if now + length > duration_s:
            break
        kind = rng.choice(drawable)
        if kind in TOPIC_KINDS:
            assert topic is not None
            target: Target = LeaderOf(topic, 0)
        else:
            target = _draw_target(rng, brokers, topic)
        params = tuple(sorted(_draw_params(rng, kind, brokers).items()))
        steps.append(FaultStep(now, length, kind, target, params))
        now = _ms(now + length + rng.uniform(0.5, max_gap_s))
    return Plan(seed, brokers, tuple(steps))


_BUILDERS: dict[str, Callable[..., Fault]] = {
    "crash": Crash,
    "stop": Stop,
    "pause": Pause,
    "network_cut": NetworkCut,
    "isolate_from_quorum": IsolateFromQuorum,
    "refuse": Refuse,
    "latency": Latency,
    "bandwidth": Bandwidth,
    "reset_peer": ResetPeer,
    "slicer": Slicer,
    "limit_data": LimitData,
    "remove_broker": RemoveBroker,
}


def _partition_of(kind: str, target: Target) -> LeaderOf:
    """A topic operation's step names its topic and partition by its target, the partition's leader."""
    if not isinstance(target, LeaderOf):
        raise PlanError(f"a {kind} step targets the leader of a partition of a topic, not {target!r}")
    return target


def _preferred_election(cluster: KafkaCluster, target: Target, **options: Any) -> Fault:
    on = _partition_of("preferred_election", target)
    return PreferredElection(cluster, on.topic, (on.partition,), **options)


def _reassign_replicas(cluster: KafkaCluster, target: Target, **options: Any) -> Fault:
    on = _partition_of("reassign_replicas", target)
    return ReassignReplicas(cluster, on.topic, on.partition, **options)


_BUILDERS["preferred_election"] = _preferred_election
_BUILDERS["reassign_replicas"] = _reassign_replicas


def build_fault(cluster: KafkaCluster, step: FaultStep, log: FaultLog | None = None) -> Fault:
    """The fault object a step describes (not yet injected)."""
    factory: Any = _BUILDERS[step.kind]
    try:
        fault: Fault = factory(cluster, step.target, log=log, **dict(step.params))
    except TypeError as exc:
        raise PlanError(
            f"step {step.kind} has parameters {dict(step.params)} that it does not take: {exc}"
        ) from exc
    return fault
