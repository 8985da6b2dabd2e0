"""Faults applied by Toxiproxy on a broker's proxies: refuse (proxy disabled) and toxics.

Paths: ``ext`` (clients), ``int`` (replication towards the broker), ``ctl`` (quorum towards the
broker), and the extra client paths ``ext1``, ``ext2``, ... Given a client as target instead of a broker
(:mod:`chaos.faults.client`), a fault acts on that client's own path on every broker.
Directions: ``downstream`` (broker → caller, i.e. responses), ``upstream`` (caller → broker, requests) or
``both``. Toxics are applied with toxicity 1.0; any randomness is drawn by the
harness (the plan), never by Toxiproxy, whose ``-seed`` does not reach toxics.

When removing a toxic fails (a link wedged by Toxiproxy#558 blocks the removal), its heal restarts
Toxiproxy (:func:`restart_toxiproxy`), which removes every toxic and enables every proxy of the cluster.
The other Toxiproxy faults still active on the cluster are then *recorded healed at that moment* with the
note "healed by a Toxiproxy restart", whichever log they record into — not re-applied: that is what
happened to them, it needs no second round of calls to a server that just misbehaved, and a scenario
that needs its toxic back injects a new fault. ``heal_all``'s ``POST /reset`` is recorded the same way
(:func:`forget_proxy_faults`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from chaos.cluster.broker import client_path_names
from chaos.cluster.config import MAX_CLIENT_PATHS
from chaos.errors import FaultError, ToxiproxyError
from chaos.faults.base import NOT_MEASURED, Effect, Fault, FaultLog, Param, live_faults
from chaos.faults.client import Connected, as_client_target
from chaos.faults.meter import forget_meter, meter_problem, proxy_packets
from chaos.faults.targets import AnyTarget, Client

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster
    from chaos.cluster.toxiproxy import Stream

Path = str
"""``ext``, ``int``, ``ctl`` or a client path ``extK``."""
Direction = Literal["upstream", "downstream", "both"]
ALL_PATHS: tuple[Path, ...] = ("ext", "int", "ctl")
RESTART_NOTE: Final = "healed by a Toxiproxy restart"


def forget_proxy_faults(cluster: KafkaCluster, note: str, cause: Fault | None = None) -> list[Fault]:
    """Record every live Toxiproxy fault of ``cluster`` (but ``cause``) healed now with ``note``: a reset
    or restart of Toxiproxy removed it. Returns those faults."""
    return [
        fault
        for fault in live_faults(cluster)
        if fault is not cause and isinstance(fault, Refuse | Toxic) and fault.mark_healed(note)
    ]


def restart_toxiproxy(cluster: KafkaCluster, cause: Fault | None = None) -> list[Fault]:
    """Restart Toxiproxy (:meth:`KafkaCluster.reset_toxiproxy`) and record the Toxiproxy faults it healed
    besides ``cause``; returns them."""
    cluster.reset_toxiproxy()
    forget_meter(cluster)  # a restarted container has a new network namespace: the meter's is gone
    note = RESTART_NOTE if cause is None else f"{RESTART_NOTE} (the heal of {cause!r} could not remove it)"
    return forget_proxy_faults(cluster, note, cause)


_ANY_PATH = (*ALL_PATHS, *client_path_names(MAX_CLIENT_PATHS))


def _fault_paths(target: AnyTarget, paths: tuple[Path, ...], default: tuple[Path, ...]) -> tuple[Path, ...]:
    """The paths a proxy fault acts on: ``paths`` for a broker; a client target's own path."""
    if isinstance(target, Client):
        if target.path is None:
            raise FaultError(f"client {target.name} has no client path: build the target with on_client()")
        if paths not in (default, (target.path,)):
            raise FaultError(f"a fault on client {target.name} acts on its path {target.path}, not {paths!r}")
        return (target.path,)
    bad = [p for p in paths if p not in _ANY_PATH]
    if bad or not paths:
        raise FaultError(f"paths {paths!r} must be a non-empty subset of {ALL_PATHS} or client paths extK")
    return paths


class _ProxyFault(Fault):
    """A fault on proxies: a broker's ``paths``, or a client's path on every broker."""

    paths: tuple[Path, ...]

    def resolve_brokers(self) -> tuple[int, ...]:
        return () if isinstance(self.target, Client) else super().resolve_brokers()

    _packets_before: dict[str, int] | None = None
    _activity = "crossed"

    def _proxies(self) -> list[str]:
        if isinstance(self.target, Client):
            return [broker.proxy(self.paths[0]) for broker in self.cluster.brokers]
        (broker_id,) = self.brokers
        broker = self.cluster.broker(broker_id)
        return [broker.proxy(p) for p in self.paths]

    def _start_measure(self) -> None:
        """Read the packet meter once the fault is in place (the meter's first start must not delay it)."""
        try:
            self._packets_before = proxy_packets(self.cluster)
        except FaultError as exc:
            self.note(f"{NOT_MEASURED}: {exc}")
        if self._packets_before is None and (problem := meter_problem(self.cluster)):
            self.note(f"{NOT_MEASURED}: {problem}")

    def _effect(self) -> Effect | None:
        """Landed when packets reached one of its proxies' listen ports while it held (the cluster's packet
        meter, :mod:`chaos.faults.meter`): the traffic it stood in — for a toxic, the bytes it worked on;
        for a refusal, the connection attempts it turned away."""
        if self._packets_before is None:
            return None
        after = proxy_packets(self.cluster)
        if after is None:
            return None
        moved = {p: after.get(p, 0) - self._packets_before.get(p, 0) for p in self._proxies()}
        if any(n < 0 for n in moved.values()):  # a new meter (Toxiproxy restarted): counts began anew
            return None
        total = sum(moved.values())
        detail = ", ".join(f"{proxy}: {n}" for proxy, n in moved.items())
        if total:
            return Effect(True, f"{total} packets {self._activity} its proxies while it held ({detail})")
        return Effect(False, f"no packet crossed its proxies while it held ({detail}): nothing used them")


class Refuse(_ProxyFault):
    """Disable the broker's proxies on ``paths`` (or a client's path on every broker): connects are refused
    and open connections closed at once."""

    kind = "refuse"

    def __init__(
        self,
        cluster: KafkaCluster,
        target: AnyTarget | Connected,
        paths: tuple[Path, ...] = ALL_PATHS,
        log: FaultLog | None = None,
    ) -> None:
        target = as_client_target(cluster, target)
        super().__init__(cluster, target, log)
        self.paths = _fault_paths(target, paths, ALL_PATHS)

    def params(self) -> dict[str, Param]:
        return {"paths": tuple(self.paths)}

    _activity = "were turned away at"

    def _inject(self) -> None:
        for proxy in self._proxies():
            self.cluster.toxiproxy.set_enabled(proxy, False)
        self._start_measure()

    def _heal(self) -> None:
        for proxy in self._proxies():
            self.cluster.toxiproxy.set_enabled(proxy, True)


class Toxic(_ProxyFault):
    """A Toxiproxy toxic of ``toxic_type`` with ``attributes`` on the broker's ``paths`` (or a client's path
    on every broker)."""

    kind = "toxic"
    toxic_type = ""

    def __init__(
        self,
        cluster: KafkaCluster,
        target: AnyTarget | Connected,
        attributes: dict[str, int],
        paths: tuple[Path, ...] = ("ext",),
        direction: Direction = "downstream",
        log: FaultLog | None = None,
        toxic_type: str | None = None,
    ) -> None:
        target = as_client_target(cluster, target)
        super().__init__(cluster, target, log)
        paths = _fault_paths(target, paths, ("ext",))
        if direction not in ("upstream", "downstream", "both"):
            raise FaultError(f"direction {direction!r} must be upstream, downstream or both")
        self.toxic_type = toxic_type or self.toxic_type
        if not self.toxic_type:
            raise FaultError(
                "a Toxic needs a toxic_type (latency, bandwidth, reset_peer, slicer, limit_data, ...)"
            )
        self.attributes = dict(attributes)
        self.paths = paths
        self.direction = direction
        self._applied: list[tuple[str, str]] = []

    def params(self) -> dict[str, Param]:
        return {"paths": tuple(self.paths), "direction": self.direction, **self.attributes}

    def _streams(self) -> list[Stream]:
        if self.direction == "both":
            return ["upstream", "downstream"]
        return [self.direction]

    def _inject(self) -> None:
        for proxy in self._proxies():
            for stream in self._streams():
                name = f"chaos-{self.toxic_type}-{stream}"
                self.cluster.toxiproxy.add_toxic(proxy, name, self.toxic_type, stream, self.attributes, 1.0)
                self._applied.append((proxy, name))
        self._start_measure()

    def _heal(self) -> None:
        while self._applied:
            proxy, name = self._applied[-1]
            try:
                self.cluster.toxiproxy.remove_toxic(proxy, name)
            except ToxiproxyError as exc:
                # A wedged link (Toxiproxy#558) never lets the removal return: start Toxiproxy afresh.
                others = restart_toxiproxy(self.cluster, cause=self)
                self._applied.clear()
                self.note(
                    f"{RESTART_NOTE}: removing {name} from {proxy} failed ({str(exc).splitlines()[0]}); "
                    f"the restart also healed {len(others)} other Toxiproxy fault(s)"
                )
                return
            self._applied.pop()


class Latency(Toxic):
    kind = "latency"
    toxic_type = "latency"

    def __init__(
        self,
        cluster: KafkaCluster,
        target: AnyTarget | Connected,
        ms: int,
        jitter_ms: int = 0,
        paths: tuple[Path, ...] = ("ext",),
        direction: Direction = "downstream",
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, {"latency": ms, "jitter": jitter_ms}, paths, direction, log)


class Bandwidth(Toxic):
    kind = "bandwidth"
    toxic_type = "bandwidth"

    def __init__(
        self,
        cluster: KafkaCluster,
        target: AnyTarget | Connected,
        rate_kb_s: int,
        paths: tuple[Path, ...] = ("ext",),
        direction: Direction = "downstream",
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, {"rate": rate_kb_s}, paths, direction, log)


class ResetPeer(Toxic):
    """Connections are reset (RST) after ``timeout_ms`` (0: at once when data arrives)."""

    kind = "reset_peer"
    toxic_type = "reset_peer"

    def __init__(
        self,
        cluster: KafkaCluster,
        target: AnyTarget | Connected,
        timeout_ms: int = 0,
        paths: tuple[Path, ...] = ("ext",),
        direction: Direction = "downstream",
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, {"timeout": timeout_ms}, paths, direction, log)


class Slicer(Toxic):
    kind = "slicer"
    toxic_type = "slicer"

    def __init__(
        self,
        cluster: KafkaCluster,
        target: AnyTarget | Connected,
        average_size: int = 64,
        size_variation: int = 32,
        delay_us: int = 1000,
        paths: tuple[Path, ...] = ("ext",),
        direction: Direction = "downstream",
        log: FaultLog | None = None,
    ) -> None:
        attributes = {"average_size": average_size, "size_variation": size_variation, "delay": delay_us}
        super().__init__(cluster, target, attributes, paths, direction, log)


class LimitData(Toxic):
    """Close the connection after ``bytes_`` bytes have passed."""

    kind = "limit_data"
    toxic_type = "limit_data"

    def __init__(
        self,
        cluster: KafkaCluster,
        target: AnyTarget | Connected,
        bytes_: int,
        paths: tuple[Path, ...] = ("ext",),
        direction: Direction = "downstream",
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, {"bytes": bytes_}, paths, direction, log)
