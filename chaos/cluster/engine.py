"""The Docker engine connection shared by image provisioning, the cluster and the doctor."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from chaos.errors import DockerUnavailable

if TYPE_CHECKING:
    import docker

LABEL = "chaos-harness"
"""Every container and network the harness starts carries ``chaos-harness=<run id>``."""

SETUP_HINT = "make setup  (installs Debian's docker.io if needed and starts dockerd; see README)"


@functools.cache
def docker_client() -> docker.DockerClient:
    """A client for the local engine; raises DockerUnavailable with the fix when none answers."""
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        raise DockerUnavailable(f"no Docker engine answers ({exc})", SETUP_HINT) from exc
    return client


def engine_version() -> str:
    """The engine's version string, e.g. ``20.10.24+dfsg1``."""
    return str(docker_client().version().get("Version", "unknown"))


def labelled_containers(
    labels: str | list[str], *, stopped: bool = True, client: docker.DockerClient | None = None
) -> list[Any]:
    """The containers carrying every label of ``labels`` (``key`` or ``key=value``), stopped ones too
    unless ``stopped=False``. A container removed while it is listed is left out, not an error: docker-py
    inspects each listed container, and the reaper, a heal or a sweep may remove one in between."""
    engine = client if client is not None else docker_client()
    return list(engine.containers.list(all=stopped, filters={"label": labels}, ignore_removed=True))
