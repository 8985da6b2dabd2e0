"""One broker of a cluster: its node id, container, proxies and ports.

Below both :mod:`chaos.cluster.cluster` (which starts brokers) and :mod:`chaos.cluster.introspect` (which
asks them questions), so that neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from chaos.cluster.config import MAX_CLIENT_PATHS
from chaos.cluster.containers import log_tail
from chaos.errors import ClusterError

if TYPE_CHECKING:
    from docker.models.containers import Container
    from testcontainers.core.container import DockerContainer


def client_path_names(extra: int) -> tuple[str, ...]:
    """The client paths of a cluster with ``extra`` extra ones: the shared ``ext``, then ``ext1`` ..."""
    return ("ext", *(f"ext{k}" for k in range(1, extra + 1)))


def unknown_client_path(path: str, known: tuple[str, ...]) -> ClusterError:
    return ClusterError(
        f"unknown client path {path!r}: this cluster has {', '.join(known)} "
        f"(more with ClusterConfig(client_paths=N), at most {MAX_CLIENT_PATHS})"
    )


INT_PROXY_BASE = 19000  # int-i listens on INT_PROXY_BASE + i inside the Toxiproxy container
CTL_PROXY_BASE = 19100


@dataclass
class Broker:
    """One broker: its node id, container, proxies and ports. Faults act on these handles."""

    node_id: int
    name: str
    ext_port: int
    container: DockerContainer = field(repr=False)
    client_ports: tuple[int, ...] = ()
    """The host ports of this broker's extra client paths ``ext1``, ``ext2``, ... in order."""

    @property
    def int_port(self) -> int:
        return INT_PROXY_BASE + self.node_id

    @property
    def ctl_port(self) -> int:
        return CTL_PROXY_BASE + self.node_id

    @property
    def bootstrap(self) -> str:
        """This broker's client address: its ``ext`` proxy on the host's loopback."""
        return self.address("ext")

    @property
    def client_paths(self) -> tuple[str, ...]:
        """This broker's client paths: the shared ``ext`` and the extra ``ext1``, ``ext2``, ..."""
        return client_path_names(len(self.client_ports))

    def client_port(self, path: str) -> int:
        """The host port of client path ``path`` (``ext`` or ``extK``) on the loopback."""
        if path == "ext":
            return self.ext_port
        if path in self.client_paths:
            return self.client_ports[int(path[3:]) - 1]
        raise unknown_client_path(path, self.client_paths)

    def address(self, path: str = "ext") -> str:
        """This broker's client address on client path ``path``."""
        return f"127.0.0.1:{self.client_port(path)}"

    def proxy(self, path: str) -> str:
        """The Toxiproxy proxy name of ``path`` for this broker: "ext", "int", "ctl" or a client path
        "extK"."""
        if path not in ("int", "ctl"):
            self.client_port(path)  # validates a client path
        return f"{path}-{self.node_id}"

    @property
    def docker(self) -> Container:
        """The docker-py container (kill/start/pause/unpause keep the container and its data)."""
        return self.container.get_wrapped_container()

    def status(self) -> str:
        wrapped = self.docker
        wrapped.reload()
        return str(wrapped.status)

    def log_tail(self, lines: int = 60) -> str:
        return log_tail(self.container, lines)
