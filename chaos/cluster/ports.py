"""Fixed loopback host ports, chosen before containers start (advertised addresses must not change).

A port is free when chosen, then released before Docker binds it: another process can take it in between.
:func:`start_on_free_ports` retries a start with fresh ports when Docker reports one of them taken.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from typing import Final, TypeVar

from chaos.errors import ClusterError

PORT_ATTEMPTS: Final = 3
"""Starts tried, each with fresh ports, before a taken port fails the start."""
_TAKEN_MARKERS: Final = ("port is already allocated", "address already in use")

T = TypeVar("T")


def free_loopback_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free on 127.0.0.1 when asked."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


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
        f"  fix: see what holds it (`{holder}`); stop whatever keeps taking loopback ports in the "
        f"ephemeral range, or run fewer sessions at once, then retry"
    )


def taken_port_message(exc: BaseException) -> str | None:
    """The Docker error in ``exc`` or its causes saying a host port is taken (already allocated, or in
    use), or ``None``. Only Docker's own errors count: a container's log tail quoted in a wrapping error
    may mention a bind failure inside the container, which fresh host ports would not cure."""
    import docker.errors

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, docker.errors.APIError):
            text = str(current)
            if any(marker in text.lower() for marker in _TAKEN_MARKERS):
                return text
        current = current.__cause__ or current.__context__
    return None
