"""Fixed loopback host ports, chosen before containers start (advertised addresses must not change).

Ports are drawn below the kernel's ephemeral range. Toxiproxy listens inside its container on the same
port numbers the host publishes, and Docker's embedded DNS server listens on a random *ephemeral* port
inside every container on a user-defined network (``127.0.0.11:<port>``): a proxy given that number
cannot bind (seen in `.ci/run`: "listen tcp 0.0.0.0:34015: bind: address already in use"). Below the
range, neither that server nor an outgoing connection on the host is ever handed a chosen port.

A port is free when chosen, then released before Docker binds it: another process can take it in between.
:func:`start_on_free_ports` retries a start with fresh ports when Docker (or Toxiproxy) reports one taken.
"""

from __future__ import annotations

import random
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from chaos.errors import ClusterError, ProxyPortTaken

PORT_ATTEMPTS: Final = 3
"""Starts tried, each with fresh ports, before a taken port fails the start."""
_TAKEN_MARKERS: Final = ("port is already allocated", "address already in use")

T = TypeVar("T")


PORT_FLOOR: Final = 16384
"""The lowest port chosen (well above the registered services' usual ports)."""
EPHEMERAL_LOW: Final = 32768
"""Where Linux's default ephemeral range starts — a container's network namespace's, whatever the host's."""
_EPHEMERAL_RANGE: Final = Path("/proc/sys/net/ipv4/ip_local_port_range")


def free_loopback_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free on 127.0.0.1 when asked, drawn at random below the
    ephemeral range (see the module); the kernel's own picks only if too few are free there."""
    sockets: list[socket.socket] = []
    candidates = list(range(PORT_FLOOR, _ephemeral_low()))
    random.shuffle(candidates)
    try:
        for port in candidates:
            if len(sockets) == count:
                break
            _bind(sockets, port)
        while len(sockets) < count:
            _bind(sockets, 0)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _bind(sockets: list[socket.socket], port: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        if port == 0:
            raise
        return
    sockets.append(s)


def _ephemeral_low() -> int:
    try:
        host_low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return EPHEMERAL_LOW
    return max(PORT_FLOOR, min(host_low, EPHEMERAL_LOW))


def start_on_free_ports(
    count: int,
    start: Callable[[list[int]], T],
    undo: Callable[[], None],
    *,
    what: str,
    attempts: int = PORT_ATTEMPTS,
) -> T:
    """``start(ports)`` with ``count`` fresh :func:`free_loopback_ports`; its result.

    When it fails because Docker found one of the ports taken (:func:`taken_port_message`), ``undo()``
    removes what that attempt started and, up to ``attempts`` starts in all, it is retried with fresh
    ports; then :class:`ClusterError` names the port and the fix. Any other failure propagates as it is.
    """
    for attempt in range(1, attempts + 1):
        ports = free_loopback_ports(count)
        try:
            return start(ports)
        except Exception as exc:
            message = taken_port_message(exc)
            if message is None:
                raise
            undo()
            if attempt == attempts:
                raise _taken_error(what, ports, message, attempts) from exc
    raise AssertionError("unreachable")  # pragma: no cover


def _taken_error(what: str, ports: list[int], message: str, attempts: int) -> ClusterError:
    port = next((p for p in ports if re.search(rf":{p}\b", message)), None)
    named = f"port {port}" if port is not None else f"one of the ports {ports}"
    holder = f"ss -ltnp | grep :{port}" if port is not None else "ss -ltnp"
    return ClusterError(
        f"{what}: {named} on 127.0.0.1 was taken by another process between choosing it and Docker "
        f"binding it, {attempts} starts in a row (Docker: {message})\n"
        f"  fix: see what holds it (`{holder}`); stop whatever keeps taking loopback ports from "
        f"{PORT_FLOOR} up, or run fewer sessions at once, then retry"
    )


def taken_port_message(exc: BaseException) -> str | None:
    """The Docker error in ``exc`` or its causes saying a host port is taken (already allocated, or in
    use) — or Toxiproxy's, that it cannot listen on one (it listens on the published numbers) — or
    ``None``. Only those count: a container's log tail quoted in a wrapping error may mention a bind
    failure inside the container, which fresh host ports would not cure."""
    import docker.errors

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ProxyPortTaken):
            return str(current)
        if isinstance(current, docker.errors.APIError):
            text = str(current)
            if any(marker in text.lower() for marker in _TAKEN_MARKERS):
                return text
        current = current.__cause__ or current.__context__
    return None
