"""Remove what runs left behind: containers, networks and log directory volumes labelled
``chaos-harness=<run id>``.

A run is **live** while its reaper container (:func:`chaos.cluster.reaper.reaper_name`) runs: the reaper
starts before anything else of the run and goes last, so a run without one has ended or died. By default
only runs that are not live are removed; ``run_id`` removes that one run, ``everything`` every run.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from chaos.cluster.engine import LABEL, docker_client, labelled_containers
from chaos.cluster.reaper import reaper_name

_LIVE_REAPER_STATES = frozenset({"running", "created"})
"""``created``: the reaper of a run that is starting this instant; nothing else of that run exists yet."""


@dataclass(frozen=True)
class LiveRun:
    """A run left alone because its reaper runs: its id and how many of its resources remain."""

    run_id: str
    containers: int
    networks: int


@dataclass(frozen=True)
class SweepResult:
    containers: tuple[str, ...]
    networks: tuple[str, ...]
    live_runs: tuple[LiveRun, ...] = ()
    volumes: tuple[str, ...] = ()
    """The brokers' log directory volumes removed (a cluster's, with its run's label and the log dir role)."""


def sweep(run_id: str | None = None, *, everything: bool = False, client: Any = None) -> SweepResult:
    """Force-remove labelled containers (unpausing them first, with their anonymous volumes), then labelled
    networks, then the removed runs' log directory volumes (:func:`remove_run_volumes`: a volume with the
    run's label *and* the log directory role, which only a cluster creates; no other volume by label).

    ``run_id``: that run's resources, live or not. Otherwise every run that is not live; with
    ``everything``, every run's, live runs included (their sessions then fail). ``client``: a Docker client
    (default: the local engine's).
    """
    import docker.errors

    if run_id is not None and everything:
        raise ValueError("sweep: give run_id or everything, not both")
    client = client if client is not None else docker_client()
    selector = f"{LABEL}={run_id}" if run_id else LABEL
    # Networks first: every resource listed then belongs to a run whose reaper (started before anything
    # else of the run) was already there, so the container listing that decides liveness shows it.
    networks = client.networks.list(filters={"label": selector})
    containers = labelled_containers(selector, client=client)
    live: set[str] = set()
    if run_id is None and not everything:
        live = {
            run
            for c in containers
            if (run := c.labels.get(LABEL)) and c.name == reaper_name(run) and c.status in _LIVE_REAPER_STATES
        }

    removed_containers = []
    for container in containers:
        if container.labels.get(LABEL) in live:
            continue
        if container.status == "paused":
            with contextlib.suppress(docker.errors.APIError):
                container.unpause()
        try:
            container.remove(force=True, v=True)
            removed_containers.append(container.name)
        except docker.errors.NotFound:
            pass
    removed_networks = []
    for network in networks:
        if _network_run(network) in live:
            continue
        try:
            network.remove()
            removed_networks.append(network.name)
        except docker.errors.NotFound:
            pass

    removed_volumes = []
    for volume in _log_volumes(client, selector):
        if _volume_run(volume) in live:
            continue
        try:  # a volume still used by a container (one that could not be removed) stays
            volume.remove(force=True)
            removed_volumes.append(str(volume.name))
        except docker.errors.APIError:
            pass

    left_containers = Counter(c.labels.get(LABEL) for c in containers)
    left_networks = Counter(_network_run(n) for n in networks)
    live_runs = tuple(LiveRun(run, left_containers[run], left_networks[run]) for run in sorted(live))
    return SweepResult(tuple(removed_containers), tuple(removed_networks), live_runs, tuple(removed_volumes))


LOG_DIR_ROLE = "logdirs"
"""The role label of a cluster's log directory volumes and their keeper (chaos.cluster.cluster)."""
ROLE_LABEL = f"{LABEL}.role"


def _log_volumes(client: Any, selector: str) -> list[Any]:
    """The log directory volumes with label ``selector``: only those a cluster created carry the role."""
    listed = client.volumes.list(filters={"label": [selector, f"{ROLE_LABEL}={LOG_DIR_ROLE}"]})
    return list(listed)


def _volume_run(volume: Any) -> str | None:
    labels = volume.attrs.get("Labels") or {}
    run = labels.get(LABEL)
    return run if isinstance(run, str) else None


def remove_run_volumes(run_id: str, *, client: Any = None) -> list[str]:
    """Remove run ``run_id``'s log directory volumes; one still used by a container stays. Returns the names
    removed."""
    import docker.errors

    client = client if client is not None else docker_client()
    removed = []
    for volume in _log_volumes(client, f"{LABEL}={run_id}"):
        try:
            volume.remove(force=True)
            removed.append(str(volume.name))
        except docker.errors.APIError:  # in use (a container of the run still there) or already gone
            pass
    return removed


def _network_run(network: Any) -> str | None:
    labels = network.attrs.get("Labels") or {}
    run = labels.get(LABEL)
    return run if isinstance(run, str) else None
