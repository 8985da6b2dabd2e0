"""Fixed loopback host ports, chosen before containers start (advertised addresses must not change)."""

from __future__ import annotations

import socket


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
