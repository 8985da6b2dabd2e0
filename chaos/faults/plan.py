"""A fault plan is pure data: which fault, on whom, when, for how long — generated from a seed.

``generate_plan(seed, ...)`` draws everything from ``random.Random(seed)``; ``Plan.to_json()`` is
byte-for-byte deterministic (sorted keys, fixed separators, times rounded to milliseconds), so the
same seed gives the same bytes and a saved plan replays exactly (``Plan.from_json``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from chaos.cluster.config import ClusterNeeds
from chaos.errors import PlanError
from chaos.faults.base import Fault, FaultLog, Param
from chaos.faults.clock import ClockDrift, ClockJump
from chaos.faults.disk import DiskFull
from chaos.faults.disk_layer import DiskError, PowerLoss, SlowDisk
from chaos.faults.network import IsolateFromQuorum, NetworkCut, Partition, ReplicationCut
from chaos.faults.operations import PreferredElection, ReassignReplicas, RemoveBroker
from chaos.faults.process import Crash, Pause, Stop
from chaos.faults.targets import (
    ActiveController,
    CoordinatorOf,
    FollowerOf,
    LeaderOf,
    Target,
    TxnCoordinatorOf,
    target_from_json,
    target_to_json,
)
from chaos.faults.toxics import Bandwidth, Latency, LimitData, Refuse, ResetPeer, Slicer

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

PLAN_FORMAT = 1
"""The plan a run's nemesis was given, as :meth:`Plan.to_json` wrote it (byte-identical for a seed)."""
RESOLVED_PLAN_FILE: Final = "plan.resolved.json"
"""The same plan with each broker fault's target as the nemesis resolved it (a broker id): what
``chaos replay`` runs, so the replay hits the brokers the original run hit."""
RUN_TOPIC: Final = "{topic}"
RUN_GROUP: Final = "{group}"
"""Placeholders for the run's topic and group in a generated plan: a plan names no run, so one seed gives
the same bytes in every run; :meth:`Plan.bind` puts a run's names in before its nemesis starts."""
KINDS: tuple[str, ...] = (
    "crash",
    "stop",
    "pause",
    "network_cut",
    "partition",
    "isolate_from_quorum",
    "replication_cut",
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
OPT_IN_KINDS: tuple[str, ...] = (
    "clock_jump",
    "clock_drift",
    "disk_full",
    "slow_disk",
    "disk_error",
    "power_loss",
)
"""Faults on one broker's clock and disk: drawn only when named (``kinds=ALL_KINDS`` or a list of them), so
every plan drawn with the default :data:`KINDS` (the seeds the catalog and the docs quote) stays as it was."""
ALL_KINDS: tuple[str, ...] = KINDS + OPT_IN_KINDS
"""Every kind a plan step may name."""
CLOCK_KINDS: Final[tuple[str, ...]] = ("clock_jump", "clock_drift")
LAYER_KINDS: Final[tuple[str, ...]] = ("slow_disk", "disk_error", "power_loss")
"""The disk faults that act through the fault layer under the log directory (ClusterConfig.disk_layer)."""
DISK_KINDS: Final[tuple[str, ...]] = ("disk_full", *LAYER_KINDS)
DISK_LOG_DIR_MB: Final = 1024
"""The log directory a disk fault drawn into a plan fills: 1 GB per broker (a tmpfs, used only as written)."""


def parse_kinds(text: str) -> tuple[str, ...]:
    """The fault kinds a random plan draws from, as a user names them: ``default`` (:data:`KINDS`), ``all``
    (:data:`ALL_KINDS`: the clock and disk faults too), or kinds separated by commas."""
    name = text.strip().lower()
    if name in ("", "default"):
        return KINDS
    if name == "all":
        return ALL_KINDS
    kinds = tuple(dict.fromkeys(k.strip() for k in name.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in ALL_KINDS]
    if unknown or not kinds:
        raise PlanError(
            f"fault kinds {text!r}: {', '.join(unknown) or 'none named'} not known; name 'default', 'all' or "
            f"kinds among {', '.join(ALL_KINDS)}, separated by commas"
        )
    return kinds


def needs_of(kinds: Iterable[str]) -> ClusterNeeds:
    """What a cluster must have for steps of ``kinds`` to run on it: a fakeable wall clock for the clock
    faults, log directories of its own for the disk faults, the fault layer under them for
    :data:`LAYER_KINDS` (:class:`~chaos.cluster.config.ClusterNeeds`)."""
    named = set(kinds)
    return ClusterNeeds(
        fake_clock=bool(named & set(CLOCK_KINDS)),
        log_dir_mb=DISK_LOG_DIR_MB if named & set(DISK_KINDS) else 0,
        disk_layer=bool(named & set(LAYER_KINDS)),
    )


TOPIC_KINDS: tuple[str, ...] = ("preferred_election", "reassign_replicas", "replication_cut")
"""Faults on a partition of the plan's topic (target: its leader or a follower, which names the partition):
drawn only when :func:`generate_plan` is given a topic."""
CLUSTER_KINDS: tuple[str, ...] = ("partition",)
"""Faults on every broker at once (each broker its own side): never concurrent with another fault."""
TOXIC_KINDS: tuple[str, ...] = ("refuse", "latency", "bandwidth", "reset_peer", "slicer", "limit_data")
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
        if self.kind not in ALL_KINDS:
            raise PlanError(f"fault kind {self.kind!r} is not one of {', '.join(ALL_KINDS)}")
        if self.at_s < 0 or self.duration_s <= 0:
            raise PlanError(
                f"step {self.kind} needs at_s >= 0 and duration_s > 0 (got {self.at_s}, {self.duration_s})"
            )

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

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
    """What a nemesis does: ``steps`` (in start order, possibly overlapping) on a cluster of ``brokers``,
    drawn from ``seed``, over a workload of ``length_s`` seconds (0: until the last step ends)."""

    seed: int
    brokers: int
    steps: tuple[FaultStep, ...] = field(default=())
    length_s: float = 0.0

    def to_data(self) -> dict[str, Any]:
        """The plan as JSON-able data (what :meth:`to_json` writes; ``scenario.json``'s ``plan``)."""
        return {
            "format": PLAN_FORMAT,
            "seed": self.seed,
            "brokers": self.brokers,
            "length_s": self.length_s,
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
        if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
            found = data.get("format") if isinstance(data, dict) else data
            raise PlanError(f"plan format {found!r} is not {PLAN_FORMAT}; regenerate it from its seed")
        try:
            return cls(
                int(data["seed"]),
                int(data["brokers"]),
                tuple(FaultStep.from_data(s) for s in data["steps"]),
                float(data.get("length_s", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(
                f"a plan needs seed, brokers and steps: {exc!r}; regenerate it from its seed"
            ) from exc

    @classmethod
    def read(cls, path: Path) -> Plan:
        """The plan in ``path`` (``plan.json`` or ``plan.resolved.json`` of a run directory)."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise PlanError(f"cannot read the plan {path}: {exc.strerror or exc}") from None
        try:
            return cls.from_json(text)
        except PlanError as exc:
            raise PlanError(f"{path}: {exc}") from None

    @property
    def duration_s(self) -> float:
        """Until the last step heals."""
        return max((s.end_s for s in self.steps), default=0.0)

    @property
    def workload_s(self) -> float:
        """How long the workload under the plan runs: ``length_s``, at least until the last heal."""
        return max(self.length_s, self.duration_s)

    @property
    def max_concurrent(self) -> int:
        """The most steps active at one time."""
        edges = sorted([(s.at_s, 1) for s in self.steps] + [(s.end_s, -1) for s in self.steps])
        most = now = 0
        for _, change in edges:
            now += change
            most = max(most, now)
        return most

    def bind(self, topic: str, group: str) -> Plan:
        """The plan with :data:`RUN_TOPIC` / :data:`RUN_GROUP` replaced by a run's topic and group."""
        steps = tuple(replace(s, target=_bind(s.target, topic, group)) for s in self.steps)
        return replace(self, steps=steps)

    def resolved(self, brokers: Mapping[int, tuple[int, ...]]) -> Plan:
        """What a nemesis really did: the steps in ``brokers`` (step index -> the brokers its fault hit; a
        step skipped or failed is not there), each that hit one broker aimed at that broker's id. Steps on
        a partition (:data:`TOPIC_KINDS`) or on every broker keep their role: a replay's topic is new, and
        so is its partitions' leaders."""
        steps = []
        for index, step in enumerate(self.steps):
            hit = brokers.get(index)
            if hit is None:
                continue
            if len(hit) == 1 and step.kind not in TOPIC_KINDS + CLUSTER_KINDS:
                step = replace(step, target=hit[0])
            steps.append(step)
        return replace(self, steps=tuple(steps))


def _bind(target: Target, topic: str, group: str) -> Target:
    if isinstance(target, LeaderOf | FollowerOf) and target.topic == RUN_TOPIC:
        return replace(target, topic=topic)
    if isinstance(target, CoordinatorOf) and target.group == RUN_GROUP:
        return CoordinatorOf(group)
    return target


def _ms(value: float) -> float:
    return round(value, 3)


@dataclass(frozen=True)
class _Draw:
    """What :func:`generate_plan` draws targets from: the cluster's size and the run's names."""

    brokers: int
    topic: str | None
    group: str | None
    partitions: int
    transactional_id: str | None = None

    def partition(self, rng: random.Random) -> int:
        return rng.randrange(self.partitions)

    def target(self, rng: random.Random) -> Target:
        """A broker by role: any broker, the controller, a partition's leader or follower, the group's
        coordinator, the transaction coordinator."""
        roles = ["broker", "controller"] + (["leader", "follower"] if self.topic else [])
        roles += ["coordinator"] if self.group else []
        roles += ["txn_coordinator"] if self.transactional_id else []
        role = rng.choice(roles)
        if role == "broker":
            return rng.randint(1, self.brokers)
        if role == "controller":
            return ActiveController()
        if role == "txn_coordinator":
            assert self.transactional_id is not None
            return TxnCoordinatorOf(self.transactional_id)
        if role == "coordinator":
            assert self.group is not None
            return CoordinatorOf(self.group)
        assert self.topic is not None
        if role == "leader":
            return LeaderOf(self.topic, self.partition(rng))
        return FollowerOf(self.topic, self.partition(rng), rng.randint(0, 1))

    def proxy_target(self, rng: random.Random, paths: tuple[str, ...]) -> Target:
        """A broker whose proxies on ``paths`` carry traffic, so the toxic can land: the controller's
        quorum path, a partition's leader (clients and followers fetch from it), the group's coordinator."""
        if paths == ("ctl",):
            return ActiveController()
        if self.topic is None:
            return rng.randint(1, self.brokers)
        if paths == ("ext",) and self.group and rng.random() < 0.25:
            return CoordinatorOf(self.group)
        if paths == ("ext",) and self.transactional_id and rng.random() < 0.25:
            return TxnCoordinatorOf(self.transactional_id)
        return LeaderOf(self.topic, self.partition(rng))


_MIN_WINDOW_S: Final[dict[str, float]] = {"clock_jump": 4.0, "clock_drift": 4.0}
"""A clock fault's offset reaches the broker's JVM up to a second after it is written and is proven by the
lines the broker logs later: its window leaves time for both."""


def min_window_s(kind: str) -> float:
    """The shortest window in which a step of ``kind`` can prove it landed (0: no floor of its own)."""
    return _MIN_WINDOW_S.get(kind, 0.0)


DELAY_MARGIN_S: Final = 2.0
"""A toxic that holds traffic back (latency, reset_peer's timeout) lasts this much longer than its delay."""


def _held_at_least(params: dict[str, Param]) -> float:
    """The shortest window in which a toxic's traffic can cross its proxy: a request answered after
    ``latency + jitter`` ms (or reset after ``timeout`` ms) moves no packet before then — measured, a 1.2 s
    latency held for 0.9 s saw none — so the window outlasts the delay by :data:`DELAY_MARGIN_S`."""
    delay_ms = sum(v for key in ("ms", "jitter_ms", "timeout_ms") if isinstance(v := params.get(key), int))
    return _ms(delay_ms / 1000 + DELAY_MARGIN_S) if delay_ms else 0.0


def _draw_step(rng: random.Random, kind: str, draw: _Draw) -> tuple[Target, dict[str, Param]]:
    """The target and parameters of one step of ``kind``."""
    if kind in ("preferred_election", "reassign_replicas"):
        assert draw.topic is not None
        target: Target = LeaderOf(draw.topic, draw.partition(rng))
        if (
            kind == "reassign_replicas"
        ):  # a new replica set (on 3 brokers a new order: a new preferred leader)
            count = min(3, draw.brokers)
            return target, {"replicas": tuple(rng.sample(range(1, draw.brokers + 1), count))}
        return target, {}
    if kind == "replication_cut":
        assert draw.topic is not None
        return FollowerOf(draw.topic, draw.partition(rng), rng.randint(0, 1)), {}
    if kind == "partition":
        return ActiveController(), {}
    if kind == "clock_jump":  # seconds, either way: a step NTP would slew for hours is stepped
        return draw.target(rng), {"by": rng.choice((-1, 1)) * rng.randint(5, 600)}
    if kind == "clock_drift":  # 1.25..4 times fast, or 0.25..0.8 times slow
        rate = rng.uniform(1.25, 4.0) if rng.random() < 0.5 else rng.uniform(0.25, 0.8)
        return draw.target(rng), {"rate": round(rate, 3)}
    if kind == "slow_disk":  # a throttled device, a slow one per write, a slow fsync
        return draw.target(rng), {
            "write_bps": rng.choice((0, 65_536, 262_144, 1_048_576)),
            "write_ms": float(rng.randint(0, 400)),
            "fsync_ms": float(rng.randint(100, 2000)),
        }
    if kind == "disk_error":  # corrupt reads are the scenarios' own: no configuration survives them
        return draw.target(rng), {"error": rng.choice(("unwritable", "unreadable"))}
    if kind not in TOXIC_KINDS:
        return draw.target(rng), {}
    paths = rng.choice(_PATH_CHOICES)
    params: dict[str, Param] = {"paths": paths}
    if kind != "refuse":
        params["direction"] = rng.choice(("upstream", "downstream", "both"))
    if kind == "latency":
        ms = rng.randint(100, 2000)
        params |= {"ms": ms, "jitter_ms": rng.randint(0, ms // 4)}
    elif kind == "bandwidth":
        params["rate_kb_s"] = rng.randint(10, 1000)
    elif kind == "reset_peer":
        params["timeout_ms"] = rng.randint(0, 2000)
    elif kind == "slicer":
        params |= {"average_size": rng.randint(16, 256), "size_variation": rng.randint(0, 16)}
    elif kind == "limit_data":
        params["bytes_"] = rng.randint(1_000, 100_000)
    return draw.proxy_target(rng, paths), params


class _Rotation:
    """Which kinds may start at a time: with ``rotate_s``, a new subset of one to three kinds every
    ``rotate_s`` seconds, none at all (a quiet period) with probability ``quiet`` — Jepsen's rotating
    nemesis; without, every kind always."""

    def __init__(self, kinds: list[str], rotate_s: float | None, quiet: float) -> None:
        self.kinds = kinds
        self.rotate_s = rotate_s
        self.quiet = quiet
        self._subsets: dict[int, list[str]] = {}

    def at(self, rng: random.Random, now: float) -> tuple[list[str], float]:
        """The kinds allowed at ``now`` and when that choice ends."""
        if self.rotate_s is None:
            return self.kinds, float("inf")
        period = int(now // self.rotate_s)
        if period not in self._subsets:
            quiet = rng.random() < self.quiet
            size = rng.randint(1, min(3, len(self.kinds)))
            self._subsets[period] = [] if quiet else rng.sample(self.kinds, size)
        return self._subsets[period], (period + 1) * self.rotate_s


def generate_plan(
    seed: int,
    brokers: int = 3,
    duration_s: float = 60.0,
    kinds: tuple[str, ...] = KINDS,
    topic: str | None = None,
    min_fault_s: float = 2.0,
    max_fault_s: float = 10.0,
    max_gap_s: float = 5.0,
    *,
    group: str | None = None,
    partitions: int = 1,
    concurrency: int = 1,
    rotate_s: float | None = None,
    quiet: float = 0.0,
    transactional_id: str | None = None,
) -> Plan:
    """Faults until ``duration_s``, all drawn from ``seed``: the same arguments give the same plan.

    ``topic`` / ``group`` (e.g. :data:`RUN_TOPIC`, :data:`RUN_GROUP`) let targets be a partition's leader
    or follower (of ``partitions``) and the group's coordinator, and allow the :data:`TOPIC_KINDS`;
    ``transactional_id`` (a transactional worker's) lets them be its transaction coordinator.
    ``concurrency``: at most this many faults at once (1: one after another, a gap between);
    :data:`CLUSTER_KINDS` always run alone. ``rotate_s`` / ``quiet``: see :class:`_Rotation`.
    """
    unknown = [k for k in kinds if k not in ALL_KINDS]
    if unknown or not kinds:
        raise PlanError(f"kinds {unknown or kinds!r} not in {', '.join(ALL_KINDS)}")
    drawable = [k for k in kinds if topic is not None or k not in TOPIC_KINDS]
    if not drawable:
        raise PlanError(f"kinds {kinds!r} are operations on a topic: give generate_plan a topic")
    if not 0 < min_fault_s <= max_fault_s:
        raise PlanError(f"need 0 < min_fault_s <= max_fault_s (got {min_fault_s}, {max_fault_s})")
    if concurrency < 1 or partitions < 1 or brokers < 1:
        raise PlanError(
            f"concurrency, partitions and brokers must be >= 1 (got {concurrency}, {partitions}, {brokers})"
        )
    if (rotate_s is not None and rotate_s <= 0) or not 0 <= quiet < 1:
        raise PlanError(f"need rotate_s > 0 (or None) and 0 <= quiet < 1 (got {rotate_s}, {quiet})")
    draw = _Draw(brokers, topic, group, partitions, transactional_id)
    steps: tuple[FaultStep, ...] = ()
    # a mix whose every period fell quiet (0.65 % of seeds for RN1's 60 s runs) tests nothing: draw it again
    # from a seed derived from this one, so a seed still names one plan and every other plan is unchanged
    for attempt in range(EMPTY_REDRAWS + 1):
        rng = random.Random(seed if attempt == 0 else f"{seed}/{attempt}")
        rotation = _Rotation(drawable, rotate_s, quiet)
        steps = _draw_steps(rng, draw, rotation, duration_s, min_fault_s, max_fault_s, max_gap_s, concurrency)
        if steps:
            break
    return Plan(seed, brokers, steps, _ms(float(duration_s)))


EMPTY_REDRAWS: Final = 8
"""How many times :func:`generate_plan` draws again a plan in which no fault fit."""


def _draw_steps(
    rng: random.Random,
    draw: _Draw,
    rotation: _Rotation,
    duration_s: float,
    min_fault_s: float,
    max_fault_s: float,
    max_gap_s: float,
    concurrency: int,
) -> tuple[FaultStep, ...]:
    """The steps of one draw (see :func:`generate_plan`)."""
    steps: list[FaultStep] = []
    active: list[tuple[float, bool]] = []  # (end, whole cluster) of the steps placed so far
    now = _ms(rng.uniform(0, max_gap_s))
    for _ in range(10_000):  # bounded; duration_s ends it long before
        active = [a for a in active if a[0] > now]
        if len(active) >= concurrency or any(whole for _, whole in active):
            now = _ms(min(end for end, _ in active) + 0.5)  # wait for a slot
            continue
        allowed, until = rotation.at(rng, now)
        if not allowed:  # a quiet period
            now = _ms(until)
            if now >= duration_s:
                break
            continue
        length = _ms(rng.uniform(min_fault_s, max_fault_s))
        kind = rng.choice(allowed)
        if active and kind in CLUSTER_KINDS:  # alone: draw again once the others healed
            now = _ms(max(end for end, _ in active) + 0.5)
            continue
        target, params = _draw_step(rng, kind, draw)
        length = max(length, _held_at_least(params), min_window_s(kind))
        if now + length > duration_s:
            break
        steps.append(FaultStep(now, length, kind, target, tuple(sorted(params.items()))))
        active.append((now + length, kind in CLUSTER_KINDS))
        if concurrency > 1 and rng.random() < 0.5:  # the next one starts while this one holds
            now = _ms(now + rng.uniform(0.5, length))
        else:
            now = _ms(now + length + rng.uniform(0.5, max_gap_s))
    return tuple(steps)


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
    "clock_jump": ClockJump,
    "clock_drift": ClockDrift,
    "disk_full": DiskFull,
    "slow_disk": SlowDisk,
    "disk_error": DiskError,
    "power_loss": PowerLoss,
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


def _replication_cut(cluster: KafkaCluster, target: Target, **options: Any) -> Fault:
    if not isinstance(target, FollowerOf):
        raise PlanError(f"a replication_cut step targets a follower of a partition, not {target!r}")
    return ReplicationCut(cluster, target, LeaderOf(target.topic, target.partition), **options)


def _partition(cluster: KafkaCluster, target: Target, **options: Any) -> Fault:
    """Every broker its own side (the step's target is only its label): no quorum, no replication."""
    ids = [b.node_id for b in cluster.brokers] or list(range(1, cluster.config.brokers + 1))
    sides: list[list[Target]] = [[broker] for broker in ids]
    return Partition(cluster, sides, **options)


_BUILDERS["preferred_election"] = _preferred_election
_BUILDERS["reassign_replicas"] = _reassign_replicas
_BUILDERS["replication_cut"] = _replication_cut
_BUILDERS["partition"] = _partition


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
