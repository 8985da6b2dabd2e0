"""A composed no-fault workload: N producers and an M-member group on the run's topic, plus the sampler.

:func:`run_workload` is what the throughput acceptance run and the kill -9 test drive; ``python -m
chaos.scenario.record_workload`` runs it in a child process with its own :class:`~chaos.history.Recorder`
and prints progress lines, so a test can SIGKILL it mid-run and know what the history must hold.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final, Literal

from chaos.errors import ConfigError
from chaos.run.context import RunContext
from chaos.run.events import Delivery, Event, SendOutcome
from chaos.workload.common import Sink
from chaos.workload.configs import ConfigValue
from chaos.workload.consumer import CommitStrategy, ConsumerGroup, MemberSpec, Processing
from chaos.workload.producer import ProducerSpec, ProducerStats, ProducerWorker
from chaos.workload.sampler import ClusterSampler

# Batching for throughput runs (docs/workload.md, "Throughput"): librdkafka's linger.ms=5 default makes
# batches of a few records per partition at these rates, so the brokers, Toxiproxy and the producer's
# threads spend their CPU on requests rather than records; consumers otherwise fetch as soon as one byte
# is there. Neither setting changes a delivery guarantee.
THROUGHPUT_PRODUCER: Final[tuple[tuple[str, ConfigValue], ...]] = (("linger.ms", 50),)
THROUGHPUT_CONSUMER: Final[tuple[tuple[str, ConfigValue], ...]] = (
    ("fetch.min.bytes", 65536),
    ("fetch.wait.max.ms", 100),
)


@dataclass(frozen=True)
class WorkloadPlan:
    """What :func:`run_workload` runs on the run's topic and group with the run's client profile. ``rate``
    is per producer (``None`` = as fast as possible)."""

    producers: int = 2
    members: int = 3
    rate: float | None = 3000.0
    duration_s: float = 60.0
    mode: Literal["thread", "process"] = "thread"  # measured faster: see docs/workload.md, Throughput
    strategy: CommitStrategy = "commit_after"
    batch_size: int = 500
    catch_up_s: float = 30.0
    sampler: bool = True
    producer_overrides: tuple[tuple[str, ConfigValue], ...] = ()
    consumer_overrides: tuple[tuple[str, ConfigValue], ...] = ()
    processing: Processing = field(default_factory=Processing)

    def __post_init__(self) -> None:
        if not 1 <= self.producers <= 16 or not 1 <= self.members <= 16:
            raise ConfigError("WorkloadPlan: expected 1..16 producers and 1..16 members")
        if not 0 < self.duration_s <= 3600 or not 0 <= self.catch_up_s <= 600:
            raise ConfigError("WorkloadPlan: expected duration_s in (0, 3600] and catch_up_s in [0, 600]")

    def to_data(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> WorkloadPlan:
        data = dict(data)
        data["processing"] = Processing(**data["processing"])
        data["producer_overrides"] = tuple(tuple(p) for p in data["producer_overrides"])
        data["consumer_overrides"] = tuple(tuple(p) for p in data["consumer_overrides"])
        return cls(**data)


@dataclass(frozen=True)
class WorkloadResult:
    """Counts of one run (the history holds the detail)."""

    producers: tuple[ProducerStats, ...]
    acked: int
    delivered_values: int
    deliveries: int
    events: int
    produce_s: float
    caught_up_s: float
    elapsed_s: float

    @property
    def acked_rate(self) -> float:
        """Acknowledged messages per second over the producing phase."""
        return self.acked / self.produce_s if self.produce_s > 0 else 0.0


class _Counter:
    """A sink wrapper counting acked and delivered values, so the run can wait for the group to catch up."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self.acked: set[str] = set()
        self.delivered: set[str] = set()
        self.deliveries = 0
        self.events = 0

    def __call__(self, event: Event) -> None:
        self._sink(event)
        self.events += 1  # approximate under threads; exact counts come from the history
        if type(event) is SendOutcome:
            if event.outcome == "ok":
                with self._lock:
                    self.acked.add(event.value_id)
        elif type(event) is Delivery and event.value_id is not None:
            with self._lock:
                self.delivered.add(event.value_id)
                self.deliveries += 1

    def missing(self) -> int:
        with self._lock:
            return len(self.acked - self.delivered)


def run_workload(context: RunContext, plan: WorkloadPlan) -> WorkloadResult:
    """Start the sampler and the group, run the producers for ``duration_s``, wait (bounded by
    ``catch_up_s``) until the group has seen every acked value, then stop everything gracefully."""
    counter = _Counter(context.sink)
    counted = replace(context, sink=counter)
    started = time.monotonic()
    sampler = ClusterSampler(counted, group=True).start() if plan.sampler else None
    specs = [
        MemberSpec(
            name=f"consumer-{i}",
            overrides=plan.consumer_overrides,
            strategy=plan.strategy,
            processing=plan.processing,
            batch_size=plan.batch_size,
            duration_s=plan.duration_s + plan.catch_up_s + 60.0,
        )
        for i in range(plan.members)
    ]
    group = ConsumerGroup(counted, specs, mode=plan.mode)
    producers = [
        ProducerWorker(
            counted,
            ProducerSpec(
                name=f"producer-{i}",
                rate=plan.rate,
                duration_s=plan.duration_s,
                overrides=plan.producer_overrides,
            ),
        )
        for i in range(plan.producers)
    ]
    try:
        group.start()
        for producer in producers:
            producer.start()
        stats = tuple(p.join() for p in producers)
        produce_s = max(s.elapsed_s for s in stats)
        waited = time.monotonic()
        deadline = waited + plan.catch_up_s
        while counter.missing() and time.monotonic() < deadline:
            time.sleep(0.1)
        caught_up = time.monotonic() - waited
    finally:
        try:
            group.stop()
        finally:
            if sampler is not None:
                sampler.stop()
    return WorkloadResult(
        producers=stats,
        acked=sum(s.ok for s in stats),
        delivered_values=len(counter.delivered),
        deliveries=counter.deliveries,
        events=counter.events,
        produce_s=produce_s,
        caught_up_s=caught_up,
        elapsed_s=time.monotonic() - started,
    )
