"""Image provisioning: official images where they can be pulled, local builds where they cannot.

``ensure_images()`` is the one entry point the cluster uses; the source comes from the argument,
``$CHAOS_IMAGES``, or ``auto``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chaos import versions
from chaos.cluster.engine import docker_client
from chaos.cluster.images.catalog import ENV_SOURCE, ImageSet, Role, Source, official_ref
from chaos.cluster.images.local import ROLE_IMAGE, ensure_local, image_present, recipes
from chaos.errors import ConfigError, ImagePullFailed
from chaos.progress import console, step

__all__ = ["ImageSet", "ImageStatus", "Role", "Source", "ensure_images", "image_status", "pull_official"]


def pull_official(role: Role, kafka_version: str = versions.KAFKA_VERSION) -> str:
    """Pull the official image for ``role`` unless present; raise ImagePullFailed saying how to go local —
    when the engine refuses the pull, and when it does not answer in time or drops the connection (a slow
    or unreachable registry), so ``auto`` falls back to the local build in either case."""
    import docker.errors
    import requests.exceptions
    import urllib3.exceptions

    ref = official_ref(role, kafka_version)
    if image_present(ref):
        return ref
    repository, _, tag = ref.rpartition(":")
    try:
        with step(f"pulling {ref}"):
            docker_client().images.pull(repository, tag=tag)
    except (
        docker.errors.APIError,
        requests.exceptions.RequestException,
        urllib3.exceptions.HTTPError,
    ) as exc:
        if isinstance(exc, docker.errors.APIError):
            reason = exc.explanation or str(exc)
        else:
            reason = f"{type(exc).__name__}: {exc}"
        raise ImagePullFailed(
            reason,
            f"cannot pull the official {role.value} image {ref}: {reason}\n"
            f"  fix: this host may reach no container registry; build the images here instead with "
            f"{ENV_SOURCE}=local (or {ENV_SOURCE}=auto), e.g. `{ENV_SOURCE}=local chaos images ensure`",
        ) from exc
    return ref


_UNREACHABLE = re.compile(
    r"timeout|timed out|deadline exceeded|connection refused|no such host|network is unreachable"
    r"|connection reset|EOF"
    r"|ConnectionError|ReadTimeout",
    re.IGNORECASE,
)


def registry_of(ref: str) -> str:
    """The registry host of an image reference (``""``: the engine's default registry)."""
    first, slash, _ = ref.partition("/")
    return first if slash and ("." in first or ":" in first or first == "localhost") else ""


def _ensure_role(role: Role, source: Source, kafka_version: str, unreachable: set[str]) -> tuple[str, Source]:
    """``role``'s image from ``source``. ``auto`` falls back to the local build when the pull fails, and
    skips the pull at once when an earlier pull found the same registry unreachable (``unreachable``)."""
    if source is Source.LOCAL:
        return ensure_local(ROLE_IMAGE[role], kafka_version=kafka_version), Source.LOCAL
    if source is Source.OFFICIAL:
        return pull_official(role, kafka_version), Source.OFFICIAL
    ref = official_ref(role, kafka_version)
    registry = registry_of(ref)
    if registry in unreachable and not image_present(ref):
        console.print(f"  [dim]{ref}: its registry did not answer a moment ago; using the local build[/dim]")
        return ensure_local(ROLE_IMAGE[role], kafka_version=kafka_version), Source.LOCAL
    try:
        return pull_official(role, kafka_version), Source.OFFICIAL
    except ImagePullFailed as exc:
        why = exc.reason.rsplit(": ", 1)[-1]
        if _UNREACHABLE.search(exc.reason):
            unreachable.add(registry)
        console.print(f"  [dim]{ref} cannot be pulled ({why}); using the local build[/dim]")
        return ensure_local(ROLE_IMAGE[role], kafka_version=kafka_version), Source.LOCAL


def ensure_images(
    source: Source | str | None = None, *, kafka_version: str = versions.KAFKA_VERSION
) -> ImageSet:
    """Make every image a cluster of ``kafka_version`` needs present, pulling or building as ``source``
    says."""
    if kafka_version not in versions.SUPPORTED_KAFKA_VERSIONS:
        raise ConfigError(
            f"Kafka {kafka_version!r} is not supported: choose one of "
            f"{', '.join(versions.SUPPORTED_KAFKA_VERSIONS)} (chaos/versions.py)"
        )
    chosen = source if isinstance(source, Source) else Source.parse(source)
    unreachable: set[str] = set()
    resolved = {role: _ensure_role(role, chosen, kafka_version, unreachable) for role in Role}
    return ImageSet(
        kafka=resolved[Role.KAFKA][0],
        toxiproxy=resolved[Role.TOXIPROXY][0],
        reaper=resolved[Role.REAPER][0],
        sources=tuple((role, src) for role, (_, src) in resolved.items()),
    )


@dataclass(frozen=True)
class ImageStatus:
    """One row of ``chaos images list``."""

    name: str
    official: str | None
    official_present: bool
    local_tag: str
    local_state: str


def image_status(kafka_version: str = versions.KAFKA_VERSION) -> list[ImageStatus]:
    """The official and local image of every role (and the local-only base), with what is present; Kafka's
    of ``kafka_version``."""
    rows = []
    by_image = {name: role for role, name in ROLE_IMAGE.items()}
    for name, local in recipes(kafka_version).items():
        role = by_image.get(name)
        official = official_ref(role, kafka_version) if role else None
        rows.append(
            ImageStatus(
                name, official, image_present(official) if official else False, local.tag, local.state()
            )
        )
    return rows
