"""The run's reaper: a Ryuk-compatible container that removes the run's resources if this process dies.

It is started first with the run's label (``CHAOS_REAPER_LABEL=chaos-harness=<run id>``); the cluster
connects, registers ``label=chaos-harness=<run id>`` and keeps the socket open for its lifetime. The reaper
accepts that one filter from that one client only (anything else is answered ``ERR`` and closed). When that
client has been gone for ``RYUK_RECONNECTION_TIMEOUT`` it removes the containers (with their anonymous
volumes) and networks with that label, never a volume by label, and exits. ``close()`` of a healthy run
removes everything explicitly; the reaper covers kill -9 and crashes. While it runs, the run is live:
``chaos clean`` leaves it alone (:mod:`chaos.cluster.sweep`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from typing import TYPE_CHECKING

from chaos.cluster.containers import labelled, log_tail, publish_on_loopback, wait_for_log
from chaos.cluster.engine import LABEL
from chaos.errors import ClusterError

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

REAPER_PORT = 8080
STARTED_LOG = r" Started!"
_ANSWER_LIMIT = 1024


def reaper_name(run_id: str) -> str:
    """The container name of ``run_id``'s reaper: running means the run is live."""
    return f"chaos-{run_id}-reaper"


def _docker_socket() -> str:
    host = os.environ.get("DOCKER_HOST", "")
    return host.removeprefix("unix://") if host.startswith("unix://") else "/var/run/docker.sock"


class Reaper:
    """The reaper container and the open registration socket."""

    def __init__(self, image: str, run_id: str, host_port: int, reconnection_timeout: str = "10s") -> None:
        self.run_id = run_id
        self.host_port = host_port
        self.label = f"{LABEL}={run_id}"
        # auto_remove: the reaper skips itself when it reaps, so it must vanish on its own when it exits
        self.container: DockerContainer = labelled(
            image, run_id, reaper_name(run_id), auto_remove=True
        ).with_envs(
            CHAOS_REAPER_LABEL=self.label,
            RYUK_RECONNECTION_TIMEOUT=reconnection_timeout,
            RYUK_PORT=str(REAPER_PORT),
        )
        self.container.with_volume_mapping(_docker_socket(), "/var/run/docker.sock", mode="rw")
        publish_on_loopback(self.container, REAPER_PORT, host_port)
        self._socket: socket.socket | None = None

    def start(self, timeout_s: float = 30.0) -> None:
        try:
            self.container.start()
        except Exception as exc:
            raise ClusterError(
                f"the reaper container failed to start: {exc}\n{log_tail(self.container)}\n"
                f"  fix: `chaos images ensure` builds the reaper image; `chaos clean` removes leftovers"
            ) from exc
        wait_for_log(self.container, STARTED_LOG, timeout_s)
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                sock = socket.create_connection(("127.0.0.1", self.host_port), timeout=5)
            except OSError as exc:
                last = exc
                time.sleep(0.2)
                continue
            try:
                sock.sendall(f"label={self.label}\n".encode())
                answer = _read_line(sock)
            except OSError as exc:
                sock.close()
                last = exc
                time.sleep(0.2)
                continue
            if answer == "ACK":
                sock.settimeout(None)
                self._socket = sock
                return
            sock.close()
            # The reaper registers one client, once: a retry would be refused too.
            raise ClusterError(
                f"the reaper refused to register label {self.label}: {answer}\n{log_tail(self.container)}\n"
                f"  fix: retry the run (another process registered with this reaper first)"
            )
        raise ClusterError(
            f"could not register label {self.label} with the reaper on 127.0.0.1:{self.host_port}: "
            f"{last}\n{log_tail(self.container)}"
        )

    def close(self) -> None:
        """Disconnect and remove the reaper now (call after the run's resources are gone)."""
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None
        with contextlib.suppress(Exception):
            self.container.get_wrapped_container().remove(force=True)


def _read_line(sock: socket.socket) -> str:
    """One answer line (``ACK`` or ``ERR ...``), without its newline; raise OSError when the reaper closes
    the connection first."""
    data = b""
    while not data.endswith(b"\n") and len(data) < _ANSWER_LIMIT:
        chunk = sock.recv(_ANSWER_LIMIT - len(data))
        if not chunk:
            raise ConnectionResetError(f"the reaper closed the connection after {data!r}")
        data += chunk
    return data.decode(errors="replace").strip()
