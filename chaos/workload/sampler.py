"""A cluster-state sampler thread: controller, brokers, leaders/ISR, offline partitions, group state.

Every ``interval_s`` (default 1 s) it asks an AdminClient for ``describe_cluster``, ``describe_topics`` of the
watched topics and ``describe_consumer_groups`` of the watched group, and records one :class:`ClusterSample`.
A sample that fails (e.g. the controller is cut off) is recorded with its error. Samples are taken on a fixed
cadence: a slow sample (up to ``sample_timeout_s``) delays only itself; missed ticks are skipped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from chaos.errors import ConfigError, WorkloadError
from chaos.history.events import ClusterSample, PartitionState
from chaos.workload.common import ClientLogBridge, Sink, error_name, error_text
from chaos.workload.profiles import CI, TimeProfile, admin_config


class ClusterSampler:
    """Records a :class:`ClusterSample` about once per ``interval_s`` on its own thread until stopped."""

    def __init__(
        self,
        bootstrap_servers: str,
        sink: Sink,
        run_id: str,
        *,
        topics: Sequence[str] = (),
        group: str | None = None,
        interval_s: float = 1.0,
        sample_timeout_s: float = 2.0,
        process: str = "sampler",
        time_profile: TimeProfile = CI,
    ) -> None:
        if not 0.05 <= interval_s <= 1.0:
            raise ConfigError(
                f"ClusterSampler.interval_s: expected [0.05, 1.0] (at least 1/s); got {interval_s}"
            )
        if not sample_timeout_s > 0:
            raise ConfigError(f"ClusterSampler.sample_timeout_s: expected > 0; got {sample_timeout_s}")
        self._sink = sink
        self._run_id = run_id
        self._topics = list(topics)
        self._group = group
        self._interval = interval_s
        self._timeout = sample_timeout_s
        self._process = process
        self._logs = ClientLogBridge(sink, run_id, process)
        config: dict[str, Any] = admin_config(bootstrap_servers, process, time_profile)
        config.update(self._logs.callbacks())
        self._admin = AdminClient(config)
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
            limit = timeout_s if timeout_s is not None else 3 * self._timeout + 5
            self._thread.join(limit)
            if self._thread.is_alive():
                raise WorkloadError(f"ClusterSampler did not stop within {limit} s")
        self._logs.detach()

    def __enter__(self) -> ClusterSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self._sink(self.sample())
            self._admin.poll(0)  # serve error_cb / log callbacks
            next_at += self._interval
            now = time.monotonic()
            if next_at < now:  # a slow sample: skip the missed ticks rather than burst
                next_at = now
            self._stop.wait(next_at - now)

    def sample(self) -> ClusterSample:
        """Take one sample now (also usable without the thread)."""
        started = time.monotonic()
        fields: dict[str, Any] = {"group": self._group}
        try:
            cluster = self._admin.describe_cluster(request_timeout=self._timeout).result(self._timeout)
            fields["controller"] = cluster.controller.id if cluster.controller is not None else None
            fields["brokers"] = tuple(sorted(n.id for n in cluster.nodes))
            states: list[PartitionState] = []
            if self._topics:
                futures = self._admin.describe_topics(
                    TopicCollection(self._topics), request_timeout=self._timeout
                )
                for topic in self._topics:
                    desc = futures[topic].result(self._timeout)
                    for info in sorted(desc.partitions, key=lambda i: i.id):
                        leader = info.leader.id if info.leader is not None and info.leader.id >= 0 else None
                        states.append(
                            PartitionState(
                                topic=topic,
                                partition=info.id,
                                leader=leader,
                                isr=tuple(n.id for n in info.isr),
                                replicas=tuple(n.id for n in info.replicas),
                            )
                        )
            fields["partition_states"] = tuple(states)
            fields["offline_partitions"] = sum(1 for s in states if s.leader is None)
            fields["under_replicated"] = sum(1 for s in states if s.under_replicated)
            if self._group is not None:
                gdesc = self._admin.describe_consumer_groups([self._group], request_timeout=self._timeout)[
                    self._group
                ].result(self._timeout)
                state = gdesc.state
                fields["group_state"] = getattr(state, "name", str(state))
                fields["group_members"] = tuple(sorted(m.member_id for m in gdesc.members))
        except (KafkaException, TimeoutError, ValueError) as exc:
            self.failed += 1
            fields["error"] = error_name(exc)
            fields["message"] = error_text(exc) or repr(exc)
        self.samples += 1
        return ClusterSample(
            run_id=self._run_id,
            process=self._process,
            duration_ms=(time.monotonic() - started) * 1000,
            **fields,
        )
