"""Faults on one client of the run instead of a broker: recorded, retried and healed like any other.

Network faults on a client: a client started on a client path of its own (``ext1``, ... — the cluster's
extra listeners, :meth:`KafkaCluster.bootstrap`) talks to every broker through that path's proxies only, so
:class:`~chaos.faults.toxics.Refuse` (a cut) or any toxic (``Latency``, ``Bandwidth``, ``ResetPeer``, a
``Toxic`` of type ``timeout``) given the client itself as target acts on that path on every broker: the
client, and only the clients on its path, lose or slow their traffic while their colleagues on the shared
``ext`` path keep working. :func:`on_client` turns the client into that target.

:class:`ClientPause` freezes a client that runs in a child process (a process member, a
:class:`~chaos.workload.ProcessProducer`, a transactional producer or worker) with SIGSTOP until its heal
sends SIGCONT: no thread of it runs — no heartbeat, no poll, no timer — while its sockets stay open, as in a
long GC pause or a stalled host. Its history events name the client (``target`` ``producer-0``) and touch no
broker. This package does not import the workload: any object with the :class:`Freezable` methods will do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from chaos.errors import FaultError
from chaos.faults.base import Effect, Fault, FaultLog
from chaos.faults.targets import (
    ActiveController,
    AnyTarget,
    Client,
    CoordinatorOf,
    FollowerOf,
    LeaderOf,
    TxnCoordinatorOf,
)

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster


class Freezable(Protocol):
    """A client process that can be frozen and thawed (every ``ChildProcess`` of :mod:`chaos.workload`)."""

    @property
    def name(self) -> str: ...

    @property
    def running(self) -> bool: ...

    @property
    def pid(self) -> int | None: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...


class _Bootstrapped(Protocol):
    @property
    def bootstrap_servers(self) -> str: ...


class Connected(Protocol):
    """A client of the run with the context it was started on (every worker of :mod:`chaos.workload`)."""

    @property
    def name(self) -> str: ...

    @property
    def context(self) -> _Bootstrapped: ...


def on_client(cluster: KafkaCluster, *clients: Connected) -> Client:
    """The target of a network fault on ``clients``: their client path, which they must share and which must
    not be the shared ``ext`` path (a fault there would hit every client of the run)."""
    if not clients:
        raise FaultError("on_client: name at least one client (a member or producer of the run)")
    paths = {c.name: cluster.client_path_of(c.context.bootstrap_servers) for c in clients}
    for name, path in paths.items():
        if path is None:
            raise FaultError(
                f"client {name} is not bootstrapped on a client path of this cluster "
                f"({', '.join(cluster.client_paths)}): start it with the run's context"
            )
        if path == "ext":
            raise FaultError(
                f"client {name} is on the shared client path 'ext': a network fault there would hit every "
                "client of the run; start it on a path of its own, e.g. run.member(name, client_path='ext1')"
            )
    if len(set(paths.values())) > 1:
        raise FaultError(f"clients on different paths {paths}: one network fault acts on one client path")
    (path,) = set(paths.values())
    return Client("+".join(paths), path)


def as_client_target(cluster: KafkaCluster, target: AnyTarget | Connected) -> AnyTarget:
    """``target`` itself, or a client object's :func:`on_client` target."""
    if isinstance(
        target, int | Client | LeaderOf | FollowerOf | ActiveController | CoordinatorOf | TxnCoordinatorOf
    ):
        return target
    return on_client(cluster, target)


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

    def _effect(self) -> Effect | None:
        """Landed when the kernel showed the client's process stopped (state ``T`` in /proc) just before the
        heal; None when the process has gone (nothing to read)."""
        state = process_state(self.client.pid)
        if state is None:
            return None
        if state in "Tt":
            return Effect(True, f"process {self.client.pid} was stopped (state {state}) just before the heal")
        return Effect(
            False, f"process {self.client.pid} was in state {state}, not stopped: something thawed it"
        )

    def _heal(self) -> None:
        if not self.client.running:
            self.note(f"client {self.client.name} had exited: nothing to thaw")
            return
        self.client.resume()


def process_state(pid: int | None) -> str | None:
    """The kernel's state letter of process ``pid`` (``S`` sleeping, ``T`` stopped, ...); None when gone."""
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name in parentheses may hold spaces
    return fields[0] if fields else None
