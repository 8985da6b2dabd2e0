"""Which images the harness needs, where each comes from, and how a choice is named."""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass

from chaos import versions
from chaos.errors import ConfigError

ENV_SOURCE = "CHAOS_IMAGES"
ENV_MIRROR = "CHAOS_REGISTRY_MIRROR"
_MIRROR = re.compile(r"[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[a-z0-9._-]+)*")


class Role(enum.StrEnum):
    """An image's job in a cluster."""

    KAFKA = "kafka"
    TOXIPROXY = "toxiproxy"
    REAPER = "reaper"


class Source(enum.StrEnum):
    """Where images come from: pulled official ones, locally built ones, or official when pullable."""

    OFFICIAL = "official"
    LOCAL = "local"
    AUTO = "auto"

    @classmethod
    def parse(cls, value: str | None) -> Source:
        """``value`` or ``$CHAOS_IMAGES`` or auto; anything else is a ConfigError naming the choices."""
        raw = (value or os.environ.get(ENV_SOURCE) or cls.AUTO.value).strip().lower()
        try:
            return cls(raw)
        except ValueError:
            choices = ", ".join(s.value for s in cls)
            raise ConfigError(
                f"image source {raw!r} is not one of {choices} "
                f"(set {ENV_SOURCE}, or pass --source / --chaos-images)"
            ) from None


def registry_mirror() -> str | None:
    """``$CHAOS_REGISTRY_MIRROR``: a registry (``host[:port][/path]``) that serves the official images under
    their own repository names; ``None`` when unset."""
    mirror = os.environ.get(ENV_MIRROR, "").strip()
    if not mirror:
        return None
    if not _MIRROR.fullmatch(mirror):
        raise ConfigError(
            f"{ENV_MIRROR}={mirror!r} is not a registry address: write host[:port][/path], no scheme and no "
            "trailing slash (e.g. 127.0.0.1:5000 or mirror.example.internal/dockerhub)"
        )
    return mirror


def official_ref(role: Role, kafka_version: str = versions.KAFKA_VERSION) -> str:
    """The official image for ``role`` (Kafka's of ``kafka_version``): ``CHAOS_<ROLE>_IMAGE`` when set (a
    full reference, used as it is), else the official name, under ``$CHAOS_REGISTRY_MIRROR`` when set."""
    override = os.environ.get(f"CHAOS_{role.value.upper()}_IMAGE")
    if override:
        return override
    name = official_name(role, kafka_version)
    mirror = registry_mirror()
    return f"{mirror}/{name}" if mirror else name


def official_name(role: Role, kafka_version: str = versions.KAFKA_VERSION) -> str:
    """The official repository and tag of ``role``'s image, as a registry or a mirror serves it."""
    return {
        Role.KAFKA: f"{versions.OFFICIAL_KAFKA_REPOSITORY}:{kafka_version}",
        Role.TOXIPROXY: versions.OFFICIAL_TOXIPROXY_IMAGE,
        Role.REAPER: versions.OFFICIAL_RYUK_IMAGE,
    }[role]


@dataclass(frozen=True)
class ImageSet:
    """The image references a cluster starts, and where each came from."""

    kafka: str
    toxiproxy: str
    reaper: str
    sources: tuple[tuple[Role, Source], ...]

    def ref(self, role: Role) -> str:
        return {Role.KAFKA: self.kafka, Role.TOXIPROXY: self.toxiproxy, Role.REAPER: self.reaper}[role]

    def source(self, role: Role) -> Source:
        return dict(self.sources)[role]
