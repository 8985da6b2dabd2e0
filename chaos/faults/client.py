"""Faults on one client process of the run instead of a broker: recorded, retried and healed like any other.

:class:`ClientPause` freezes a client that runs in a child process (a process member, a
:class:`~chaos.workload.ProcessProducer`, a transactional producer or worker) with SIGSTOP until its heal
sends SIGCONT: no thread of it runs — no heartbeat, no poll, no timer — while its sockets stay open, as in a
long GC pause or a stalled host. Its history events name the client (``target`` ``producer-0``) and touch no
broker. This package does not import the workload: any object with the :class:`Freezable` methods will do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultLog
from chaos.faults.targets import Client

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster


class Freezable(Protocol):
    """A client process that can be frozen and thawed (every ``ChildProcess`` of :mod:`chaos.workload`)."""

    @property
    def name(self) -> str: ...

    @property
    def running(self) -> bool: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class ClientPause(Fault):
    """SIGSTOP ``client`` until the heal (SIGCONT). A client that has exited meanwhile (stopped or killed by
    the run) is healed with a note: there is nothing left to thaw."""

    kind = "client_pause"

    def __init__(self, cluster: KafkaCluster, client: Freezable, log: FaultLog | None = None) -> None:
        super().__init__(cluster, Client(client.name), log)
        self.client = client

    def resolve_brokers(self) -> tuple[int, ...]:
        return ()

    def _inject(self) -> None:
        if not self.client.running:
            raise FaultError(
                f"client {self.client.name} is not running: start it before freezing it (a thread worker "
                "cannot be frozen — use a process member or run.process_producer())"
            )
        self.client.pause()

    def _heal(self) -> None:
        if not self.client.running:
            self.note(f"client {self.client.name} had exited: nothing to thaw")
            return
        self.client.resume()
