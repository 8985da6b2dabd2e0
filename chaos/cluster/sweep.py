"""Remove whatever earlier runs left behind: every container and network labelled ``chaos-harness``."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from chaos.cluster.engine import LABEL, docker_client


@dataclass(frozen=True)
class SweepResult:
    containers: tuple[str, ...]
    networks: tuple[str, ...]


def sweep(run_id: str | None = None) -> SweepResult:
    """Force-remove labelled containers (unpausing them first), then labelled networks.

    With ``run_id`` only that run's resources go; without it, every run's.
    """
    import docker.errors

    client = docker_client()
    selector = f"{LABEL}={run_id}" if run_id else LABEL
    removed_containers = []
    for container in client.containers.list(all=True, filters={"label": selector}):
        if container.status == "paused":
            with contextlib.suppress(docker.errors.APIError):
                container.unpause()
        try:
            container.remove(force=True, v=True)
            removed_containers.append(container.name)
        except docker.errors.NotFound:
            pass
    removed_networks = []
    for network in client.networks.list(filters={"label": selector}):
        try:
            network.remove()
            removed_networks.append(network.name)
        except docker.errors.NotFound:
            pass
    return SweepResult(tuple(removed_containers), tuple(removed_networks))
