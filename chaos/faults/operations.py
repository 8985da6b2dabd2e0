"""Cluster operations as faults: what an operator does to a running cluster, recorded like any fault.

An operation's window runs from its start to its end: ``inject()`` starts it and waits until the cluster
shows it done (bounded), ``heal()`` ends the window — and undoes what can be undone. Used as a context
manager (``with run.fault(AddPartitions, topic, 6): ...``) the window covers what the block does beside it.

- :class:`AddPartitions`: grow a topic (CreatePartitions). Irreversible: Kafka cannot remove partitions, so
  the heal only ends the window. With ``auto.offset.reset=latest`` a group that learns of the new partitions
  after records were written to them skips those records — the classic loss this operation replays.
- :class:`PreferredElection`: move each partition's leadership back to its preferred replica (the first of
  its replicas) where another replica leads (ElectLeaders, ``PREFERRED``) — what
  ``auto.leader.rebalance.enable`` or an operator's ``kafka-leader-election.sh`` does after a broker came
  back. Leadership moves under load; the heal only ends the window.

- :class:`ReassignReplicas`: move a partition to other brokers (AlterPartitionReassignments) and, by
  default, back at the heal: the replicas copy the partition under load, leadership moves with the list.
- :class:`RemoveBroker`: stop a broker and unregister it (KRaft); the heal starts it again.

The topic operations' target is a topic, not a broker: the history names them ``topic <name>``.
confluent-kafka has no reassignment or unregister call: :mod:`chaos.cluster.wire` speaks them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from chaos.errors import ClusterError, FaultError, KafkaErrorAnswer
from chaos.faults.base import Effect, Fault, FaultLog, Param
from chaos.faults.process import container_effect
from chaos.faults.targets import ActiveController, Target

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster
    from chaos.run.events import PartitionState

OPERATION_TIMEOUT_S: Final = 30.0
_POLL_S: Final = 0.25


def _poll(fault: Fault, what: str, done: Callable[[], bool], timeout_s: float) -> None:
    """Call ``done`` until it holds. A :class:`ClusterError` from it is "no answer yet" — a request the
    brokers forward to a busy or electing controller — named if ``timeout_s`` runs out; a
    :class:`KafkaErrorAnswer` is an answer, final."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            if done():
                return
        except KafkaErrorAnswer:
            raise
        except ClusterError as exc:
            last = f" (last: {str(exc).splitlines()[0]})"
        if time.monotonic() >= deadline:
            raise FaultError(
                f"{fault.kind} on {fault.target_text}: {what} not seen in {timeout_s:.0f} s{last}\n"
                "  fix: check the other brokers are up and the quorum has a leader"
            )
        time.sleep(_POLL_S)


class _TopicOperation(Fault):
    """A fault on a topic: no broker is hit; the record's target is ``topic <name>``."""

    def __init__(
        self,
        cluster: KafkaCluster,
        topic: str,
        timeout_s: float = OPERATION_TIMEOUT_S,
        log: FaultLog | None = None,
    ) -> None:
        if not isinstance(topic, str) or not topic:
            raise FaultError(f"{type(self).__name__}: expected a topic name; got {topic!r}")
        if not timeout_s > 0:
            raise FaultError(f"{type(self).__name__}: timeout_s must be > 0 seconds; got {timeout_s!r}")
        super().__init__(cluster, ActiveController(), log)
        self.topic = topic
        self.timeout_s = timeout_s

    def resolve_brokers(self) -> tuple[int, ...]:
        return ()

    @property
    def target_text(self) -> str:
        return f"topic {self.topic}"

    def _partitions(self) -> list[PartitionState]:
        return [p for p in self.cluster.describe_partitions([self.topic]) if p.topic == self.topic]

    def _wait(self, what: str, done: Callable[[list[PartitionState]], bool]) -> list[PartitionState]:
        """Poll the topic's partitions until ``done(partitions)``; FaultError naming ``what`` after the
        timeout."""
        deadline = time.monotonic() + self.timeout_s
        last: list[PartitionState] = []
        error: Exception | None = None
        while True:
            try:
                last = self._partitions()
            except Exception as exc:  # a metadata read that failed: try again until the deadline
                last, error = [], exc
            else:
                error = None
                if done(last):
                    return last
            if time.monotonic() >= deadline:
                seen = ", ".join(f"p{p.partition} leader {p.leader}" for p in last) or f"nothing ({error})"
                raise FaultError(
                    f"{self.kind} on topic {self.topic}: {what} not seen within {self.timeout_s:.0f} s "
                    f"(last seen: {seen})\n  fix: check the brokers are up (a fault still active?), or give "
                    "the operation a longer timeout_s"
                )
            time.sleep(_POLL_S)

    def _heal(self) -> None:
        """Nothing to undo (see the subclass); the window ends."""


class AddPartitions(_TopicOperation):
    """Grow ``topic`` to ``count`` partitions and wait until each has a leader. Irreversible."""

    kind = "add_partitions"

    def __init__(
        self,
        cluster: KafkaCluster,
        topic: str,
        count: int,
        timeout_s: float = OPERATION_TIMEOUT_S,
        log: FaultLog | None = None,
    ) -> None:
        if type(count) is not int or count < 2:
            raise FaultError(f"AddPartitions: count is the topic's new partition count (>= 2); got {count!r}")
        super().__init__(cluster, topic, timeout_s, log)
        self.count = count
        self.before: int | None = None

    def params(self) -> dict[str, Param]:
        return {"topic": self.topic, "count": self.count}

    def _inject(self) -> None:
        from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]  # exported, not in __all__

        before = len(self._partitions())
        if before == 0:
            raise FaultError(f"add_partitions: topic {self.topic} does not exist (create it first)")
        if self.count <= before:
            raise FaultError(
                f"add_partitions: topic {self.topic} has {before} partitions already; count={self.count} "
                "must be more (Kafka only adds partitions)"
            )
        self.before = before
        futures = self.cluster.admin().create_partitions(
            [NewPartitions(self.topic, self.count)], request_timeout=self.timeout_s
        )
        for future in futures.values():
            future.result(self.timeout_s)
        self._wait(
            f"{self.count} partitions with a leader",
            lambda ps: len(ps) == self.count and all(p.leader is not None for p in ps),
        )
        self.note(f"{before} -> {self.count} partitions (irreversible: the heal only ends the window)")

    def _effect(self) -> Effect | None:
        """Landed when the topic's metadata shows the new count (read just before the heal)."""
        if self.before is None:
            return None
        now = len(self._partitions())
        return Effect(
            now >= self.count, f"topic {self.topic}: {self.before} -> {now} partitions in the metadata"
        )


class PreferredElection(_TopicOperation):
    """Elect the preferred replica leader of every partition of ``topic`` (or of ``partitions``) that
    another replica leads, and wait until it leads. A partition whose preferred replica is out of the ISR
    cannot move: the operation fails naming it."""

    kind = "preferred_election"

    def __init__(
        self,
        cluster: KafkaCluster,
        topic: str,
        partitions: tuple[int, ...] | None = None,
        timeout_s: float = OPERATION_TIMEOUT_S,
        log: FaultLog | None = None,
    ) -> None:
        if partitions is not None and (
            not isinstance(partitions, tuple) or not all(type(p) is int and p >= 0 for p in partitions)
        ):
            raise FaultError(
                f"PreferredElection: partitions must be a tuple of partition numbers; got {partitions!r}"
            )
        super().__init__(cluster, topic, timeout_s, log)
        self.partitions = partitions
        self.moved: dict[int, tuple[int | None, int]] = {}

    def params(self) -> dict[str, Param]:
        return self._as_params(topic=self.topic, partitions=self.partitions)

    def _chosen(self, states: list[PartitionState]) -> list[PartitionState]:
        return [p for p in states if self.partitions is None or p.partition in self.partitions]

    def idle_reason(self) -> str | None:
        states = self._chosen(self._partitions())
        if states and all(p.replicas and p.leader == p.replicas[0] for p in states):
            return "every partition asked is led by its preferred replica already"
        return None

    def _effect(self) -> Effect | None:
        """Landed when some leadership moved to its preferred replica (seen in the metadata by the inject)."""
        if not self.moved:
            return Effect(
                False, "every partition asked was led by its preferred replica already: nothing moved"
            )
        moves = ", ".join(f"p{p}: {old} -> {new}" for p, (old, new) in sorted(self.moved.items()))
        return Effect(True, f"leadership moved ({moves}), seen in the metadata")

    def _inject(self) -> None:
        from confluent_kafka import ElectionType, TopicPartition

        states = self._chosen(self._partitions())
        if not states:
            raise FaultError(f"preferred_election: topic {self.topic} has none of the partitions asked")
        away = [p for p in states if p.replicas and p.leader != p.replicas[0]]
        if not away:
            self.note("every partition already led by its preferred replica: nothing moved")
            return
        # no timeout keywords: confluent-kafka 2.16's binding raises SystemError on them; the result's
        # wait below is bounded
        future = self.cluster.admin().elect_leaders(
            ElectionType.PREFERRED, [TopicPartition(self.topic, p.partition) for p in away]
        )
        errors = {
            tp.partition: error
            for tp, error in future.result(self.timeout_s).items()
            if error is not None and error.name() != "ELECTION_NOT_NEEDED"
        }
        if errors:
            raise FaultError(
                f"preferred_election on topic {self.topic}: "
                + ", ".join(f"p{p}: {e.name()}" for p, e in sorted(errors.items()))
                + "\n  fix: the preferred replica must be alive and in the ISR (heal the faults on it first)"
            )
        wanted = {p.partition: p.replicas[0] for p in away}
        self._wait(
            "the preferred replicas leading",
            lambda ps: all(p.leader == wanted[p.partition] for p in ps if p.partition in wanted),
        )
        self.moved = {p.partition: (p.leader, wanted[p.partition]) for p in away}
        self.note(
            "moved " + ", ".join(f"p{p}: {old} -> {new}" for p, (old, new) in sorted(self.moved.items()))
        )


class ReassignReplicas(_TopicOperation):
    """Move ``topic``-``partition`` to ``replicas`` (AlterPartitionReassignments; the first is the preferred
    leader) and wait until exactly those replicas hold it, all in the ISR — the replicas copy the
    partition meanwhile. ``revert`` (default): the heal moves it back to the replicas it had, and waits the
    same way; else the heal only ends the window."""

    kind = "reassign_replicas"

    def __init__(
        self,
        cluster: KafkaCluster,
        topic: str,
        partition: int,
        replicas: tuple[int, ...],
        revert: bool = True,
        timeout_s: float = OPERATION_TIMEOUT_S,
        log: FaultLog | None = None,
    ) -> None:
        if type(partition) is not int or partition < 0:
            raise FaultError(f"ReassignReplicas: partition must be a partition number; got {partition!r}")
        if (
            not isinstance(replicas, tuple)
            or not replicas
            or len(set(replicas)) != len(replicas)
            or not all(type(b) is int for b in replicas)
        ):
            raise FaultError(
                f"ReassignReplicas: replicas must be a tuple of distinct broker ids (the first leads); "
                f"got {replicas!r}"
            )
        for broker_id in replicas:
            cluster.broker(broker_id)  # names the cluster's ids when one is not there
        super().__init__(cluster, topic, timeout_s, log)
        self.partition = partition
        self.replicas = replicas
        self.revert = revert
        self.original: tuple[int, ...] | None = None

    def params(self) -> dict[str, Param]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "replicas": self.replicas,
            "revert": self.revert,
        }

    def _move(self, replicas: tuple[int, ...]) -> None:
        from chaos.cluster.introspect import alter_reassignments

        def asked() -> bool:
            alter_reassignments(self.cluster, self.topic, {self.partition: replicas})
            return True

        # forwarded to the controller, which commits it: no broker may answer for a while (see RemoveBroker);
        # asking again for the same replicas is harmless
        _poll(self, f"AlterPartitionReassignments of p{self.partition} answered", asked, self.timeout_s)
        self._wait(
            f"partition {self.partition} on replicas {list(replicas)}, all in the ISR",
            lambda ps: any(
                p.partition == self.partition
                and set(p.replicas) == set(replicas)
                and set(replicas) <= set(p.isr)
                for p in ps
            ),
        )

    def _state(self) -> PartitionState | None:
        return next((p for p in self._partitions() if p.partition == self.partition), None)

    def idle_reason(self) -> str | None:
        state = self._state()
        if state is not None and tuple(state.replicas) == self.replicas:
            return f"p{self.partition} is on replicas {list(self.replicas)} already"
        return None

    def _effect(self) -> Effect | None:
        """Landed when the partition's metadata lists the new replicas (read just before the heal) and they
        differ from the ones it had."""
        if self.original is None:
            return None
        state = self._state()
        now = list(state.replicas) if state is not None else None
        if tuple(self.original) == self.replicas:
            return Effect(False, f"p{self.partition} was on replicas {now} already: nothing moved")
        observed = now == list(self.replicas)
        return Effect(
            observed,
            f"p{self.partition}: replicas {list(self.original)} -> {now} in the metadata (asked "
            f"{list(self.replicas)})",
        )

    def _inject(self) -> None:
        state = self._state()
        if state is None:
            raise FaultError(f"reassign_replicas: topic {self.topic} has no partition {self.partition}")
        self.original = state.replicas
        self._move(self.replicas)
        self.note(f"p{self.partition}: replicas {list(state.replicas)} -> {list(self.replicas)}")

    def _heal(self) -> None:
        if not self.revert or self.original is None or self.original == self.replicas:
            return
        self._move(self.original)
        self.note(f"p{self.partition}: replicas back to {list(self.original)}")


class RemoveBroker(Fault):
    """Take a broker out of the cluster: stop it (``docker stop``: a controlled shutdown moves its
    leaderships), wait until the cluster fences it, then remove its registration (KRaft UnregisterBroker) —
    what an operator does to decommission a node. Its partitions keep it in their replica lists (Kafka does
    not move them by itself): they stay under-replicated. The heal starts the same container again and
    waits until the broker registers anew (a broker that does not — its registration removed again by an
    unregistration the quorum applied late — is restarted once more)."""

    kind = "remove_broker"
    stops_brokers = True

    def __init__(
        self,
        cluster: KafkaCluster,
        target: Target,
        timeout_s: float = OPERATION_TIMEOUT_S,
        restart_timeout_s: float = 90.0,
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, log)
        self.timeout_s = timeout_s
        self.restart_timeout_s = restart_timeout_s

    def _registered(self) -> set[int]:
        from chaos.cluster.introspect import registered_brokers

        return registered_brokers(self.cluster)

    def _inject(self) -> None:
        from chaos.cluster.introspect import unregister_broker

        (broker_id,) = self.brokers
        self.cluster.broker(broker_id).docker.stop(timeout=30)
        _poll(self, f"broker {broker_id} fenced", lambda: broker_id not in self._registered(), self.timeout_s)

        # every broker may time out for a while (the controller busy just after the fencing, or electing a
        # new quorum leader when the broker stopped led it; 2 cores under load): ask again until the
        # restart's deadline; an answer with a Kafka error code is final
        def unregistered() -> bool:
            unregister_broker(self.cluster, broker_id)
            return True

        _poll(self, f"broker {broker_id} unregistered", unregistered, self.restart_timeout_s)
        self.note(f"broker {broker_id} stopped and unregistered")

    def _effect(self) -> Effect | None:
        """Landed when the quorum's registrations lack the broker (read just before the heal); when no broker
        answers then (the quorum down under another fault), when its container was still stopped — the
        inject saw it fenced and unregistered."""
        (broker_id,) = self.brokers
        try:
            registered = sorted(self._registered())
        except ClusterError as exc:
            held = container_effect(self, ("exited", "dead"), "stopped")
            why = str(exc).splitlines()[0]
            return Effect(held.observed, f"{held.evidence}; the registrations could not be read then ({why})")
        return Effect(
            broker_id not in registered,
            f"registered brokers just before the heal: {registered} (broker {broker_id} "
            f"{'absent' if broker_id not in registered else 'registered again: something restarted it'})",
        )

    def _heal(self) -> None:
        (broker_id,) = self.brokers
        if self.interrupted:
            self.cluster.restart_broker(broker_id, self.restart_timeout_s, wait=False)
            return
        self.cluster.restart_broker(broker_id, self.restart_timeout_s)
        registered_again = f"broker {broker_id} registered again"
        try:
            _poll(self, registered_again, lambda: broker_id in self._registered(), self.timeout_s)
        except FaultError as exc:
            # UnregisterBroker names no broker epoch: one the quorum applied late (its request timed out
            # while the quorum was down, then went through) removes the registration of the broker we just
            # started, which then heartbeats with a stale epoch forever (STALE_BROKER_EPOCH) and never
            # registers again. A new process registers anew.
            self.note(f"{str(exc).splitlines()[0]}: restarting its process to register anew")
            self.cluster.broker(broker_id).docker.stop(timeout=30)
            self.cluster.restart_broker(broker_id, self.restart_timeout_s)
            _poll(self, registered_again, lambda: broker_id in self._registered(), self.timeout_s)
