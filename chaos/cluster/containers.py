"""Starting labelled containers and waiting for them, with their logs in every error."""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Any

from chaos.cluster.engine import LABEL
from chaos.errors import ClusterStartTimeout

# testcontainers' own Ryuk would publish its port on every interface; the harness runs its reaper itself.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

LOG_TAIL_LINES = 60


def labelled(image: str, run_id: str, name: str, **docker_kwargs: Any) -> DockerContainer:
    """A container definition carrying the run's label and a recognisable name.

    ``docker_kwargs`` go to the engine's create call (testcontainers keeps one such dict, so every
    extra setting must be passed here, not through a later ``with_kwargs``).
    """
    from testcontainers.core.container import DockerContainer

    return DockerContainer(image).with_name(name).with_kwargs(labels={LABEL: run_id}, **docker_kwargs)


def publish_on_loopback(container: DockerContainer, container_port: int, host_port: int) -> DockerContainer:
    """Publish ``container_port`` on 127.0.0.1:``host_port`` only, never on every interface."""
    # testcontainers' with_bind_ports takes no host IP; its ``ports`` map goes to docker-py, which does.
    binding: Any = ("127.0.0.1", host_port)
    container.ports[f"{container_port}/tcp"] = binding
    return container


def log_tail(container: DockerContainer, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of the container's output ("" when it has none or is gone)."""
    try:
        raw = container.get_wrapped_container().logs(tail=lines)
    except Exception:  # the container may already be gone; the tail is best effort
        return ""
    return str(raw.decode(errors="replace"))


def wait_for_log(
    container: DockerContainer, pattern: str, timeout_s: float, since: float | None = None
) -> None:
    """Wait until the container's log matches ``pattern``; raise with the log tail when it does not."""
    regex = re.compile(pattern)
    wrapped = container.get_wrapped_container()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        wrapped.reload()
        # ``since`` stays a float: whole seconds could match a previous start's line after a quick restart
        logs = wrapped.logs(since=since).decode(errors="replace")
        if regex.search(logs):
            return
        if wrapped.status in ("exited", "dead"):
            break
        time.sleep(0.25)
    raise ClusterStartTimeout(
        f"{wrapped.name} did not log /{pattern}/ within {timeout_s:.0f} s (status {wrapped.status}); "
        f"last lines:\n{log_tail(container)}"
    )
