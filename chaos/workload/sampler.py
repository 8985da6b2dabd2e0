"""A cluster-state sampler thread: controller, brokers, leaders/ISR, offline partitions, group state.

Every ``interval_s`` (default 1 s) it sends raw requests (``chaos.cluster.wire``) to one broker of the
bootstrap list at a time — Metadata for the watched topics, DescribeQuorum for the active controller,
FindCoordinator + DescribeGroups for the watched group — and records one :class:`ClusterSample`. The
first broker that answers serves the sample; the next sample starts with it. A sample no broker answers
is recorded with its error.

No AdminClient on purpose: its requests stay queued on a dead broker (every sample failed while a broker
was down), and a timed-out ``describe_consumer_groups`` can abort the whole process inside librdkafka
(librdkafka#4605: assertion ``eonce->refcnt > 0``; it killed two of our test sessions under CPU starvation).
Samples are taken on a fixed cadence: a slow sample delays only itself; missed ticks are skipped.

With ``controller=False`` and no group it is the light introspection a scenario runs beside its workload
(``ScenarioRun.introspect``: process ``introspect``, one Metadata request per sample).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from chaos.cluster import wire
from chaos.cluster.introspect import partition_states
from chaos.errors import ClusterError, ConfigError, WorkloadError
from chaos.run.context import RunContext, bootstrap_addresses
from chaos.run.events import ClusterSample

__all__ = ["ClusterSampler", "bootstrap_addresses", "group_state_name"]


def group_state_name(state: str) -> str:
    """DescribeGroups' ``PreparingRebalance`` as the admin API spells it: ``PREPARING_REBALANCE``."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", state).upper()


class ClusterSampler:
    """Records a :class:`ClusterSample` about once per ``interval_s`` on its own thread until stopped.

    It watches ``topics`` (default: the run's topic) and, with ``group``, the run's group.
    """

    def __init__(
        self,
        context: RunContext,
        *,
        topics: Sequence[str] | None = None,
        group: bool = False,
        interval_s: float = 1.0,
        sample_timeout_s: float = 2.0,
        process: str = "sampler",
        controller: bool = True,
    ) -> None:
        if not 0.05 <= interval_s <= 5.0:
            raise ConfigError(f"ClusterSampler.interval_s: expected [0.05, 5.0] s; got {interval_s}")
        if not sample_timeout_s > 0:
            raise ConfigError(f"ClusterSampler.sample_timeout_s: expected > 0; got {sample_timeout_s}")
        self._addresses = bootstrap_addresses(context.bootstrap_servers)
        self._sink = context.sink
        self._run_id = context.run_id
        self._topics = list(topics) if topics is not None else [context.topic]
        self._group = context.group if group else None
        self._interval = interval_s
        self._timeout = sample_timeout_s
        self._process = process
        self._controller = controller
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        self.failed = 0

    def start(self) -> ClusterSampler:
        if self._thread is not None:
            raise WorkloadError("ClusterSampler already started; build a new one")
        self._thread = threading.Thread(target=self._loop, name=f"sampler-{self._run_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        self._stop.set()
        if self._thread is not None:
            limit = timeout_s if timeout_s is not None else (len(self._addresses) + 2) * self._timeout + 5
            self._thread.join(limit)
            if self._thread.is_alive():
                raise WorkloadError(f"ClusterSampler did not stop within {limit} s")

    def __enter__(self) -> ClusterSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._sink(self.sample())
            next_at += self._interval
            now = time.monotonic()
            if next_at < now:  # a slow sample: skip the missed ticks rather than burst
                next_at = now
            self._stop.wait(next_at - now)

    def sample(self) -> ClusterSample:
        """Take one sample now (also usable without the thread)."""
        started = time.monotonic()
        fields: dict[str, Any] = {"group": self._group}
        errors: list[str] = []
        unreachable = True
        for index, (host, port) in enumerate(self._addresses):
            try:
                fields.update(self._ask(host, port))
            except (OSError, ClusterError, ValueError) as exc:
                errors.append(f"{host}:{port}: {type(exc).__name__}: {exc}")
                unreachable = unreachable and isinstance(exc, OSError)
                continue
            if index:  # start with the broker that answered next time
                self._addresses.insert(0, self._addresses.pop(index))
            break
        else:
            self.failed += 1
            # NO_BROKER_ANSWERED: no socket answered; KAFKA_ERROR: brokers answered with error codes
            # (e.g. 15/16 while the group's coordinator moves).
            fields["error"] = "NO_BROKER_ANSWERED" if unreachable else "KAFKA_ERROR"
            fields["message"] = "; ".join(errors)[:1000]
        self.samples += 1
        return ClusterSample(
            run_id=self._run_id,
            process=self._process,
            duration_ms=(time.monotonic() - started) * 1000,
            **fields,
        )

    def _ask(self, host: str, port: int) -> dict[str, Any]:
        meta = wire.metadata(host, port, self._topics, self._timeout)
        if meta.topic_errors:
            raise ClusterError(f"metadata topic errors {dict(meta.topic_errors)}")
        states = partition_states(meta)
        fields: dict[str, Any] = {
            "controller": wire.quorum_leader(host, port, self._timeout) if self._controller else None,
            "brokers": tuple(node for node, _, _ in meta.brokers),
            "partition_states": states,
            "offline_partitions": sum(1 for s in states if s.leader is None),
            "under_replicated": sum(1 for s in states if s.under_replicated),
        }
        if self._group is not None:
            error, node = wire.find_group_coordinator(host, port, self._group, self._timeout)
            if error:
                raise ClusterError(f"FindCoordinator error code {error}")
            address = next(((h, p) for n, h, p in meta.brokers if n == node), None)
            if address is None:
                raise ClusterError(f"coordinator {node} is not in the metadata's brokers")
            group = wire.describe_group(*address, self._group, self._timeout)
            if group.error:
                raise ClusterError(f"DescribeGroups error code {group.error}")
            fields["group_state"] = group_state_name(group.state)
            fields["group_members"] = group.members
        return fields
