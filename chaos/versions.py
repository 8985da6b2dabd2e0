"""Every pinned version of an external component, in one place.

Changing a value here changes the local image tags and build hashes, so ``chaos images ensure``
rebuilds what depends on it.
"""

from __future__ import annotations

import os
from typing import Literal

KAFKA_VERSION = "4.4.0"
"""The default Kafka version: a cluster, an image, a smoke test without ``--kafka-version``."""
SUPPORTED_KAFKA_VERSIONS: tuple[str, ...] = ("3.9.2", "4.0.2", "4.1.1", "4.4.0")
"""The Kafka versions a cluster can run (KRaft only): the last 3.x, then the newest of each 4.x line tried."""
KAFKA_VERSION_ENV = "CHAOS_KAFKA_VERSION"


def chosen_kafka_version(option: str | None = None) -> str:
    """The Kafka version asked for: ``option`` (a flag), else ``$CHAOS_KAFKA_VERSION``, else the default.
    Not checked here: a cluster's configuration and the image provisioning refuse an unsupported one."""
    return option or os.environ.get(KAFKA_VERSION_ENV) or KAFKA_VERSION


SCALA_BINARY_VERSION = "2.13"
# Kafka 4's POM carries log4j-api and log4j-core but no SLF4J binding; this one matches its log4j-api.
LOG4J_VERSION = "2.24.3"
# Kafka 3.x logs through reload4j (log4j 1 API); its POM carries neither reload4j nor the SLF4J binding.
RELOAD4J_VERSION = "1.2.25"
SLF4J_VERSION = "1.7.36"

KafkaLogging = Literal["log4j2", "reload4j"]


def kafka_major(version: str) -> int:
    """The major version of a Kafka release (``3`` for ``3.9.2``)."""
    return int(version.split(".")[0])


def kafka_logging(version: str) -> KafkaLogging:
    """The logging backend of a Kafka release: log4j 2 from 4.0 on (KIP-653), reload4j before."""
    return "reload4j" if kafka_major(version) < 4 else "log4j2"


TOXIPROXY_VERSION = "2.12.0"
TOXIPROXY_GO_PACKAGE = "github.com/Shopify/toxiproxy/v2/cmd/server"

DEBIAN_SUITE = "bookworm"
JRE_PACKAGE = "openjdk-17-jre-headless"
# Tools the base image carries besides the JRE: iptables/iproute2 serve the network-cut sidecar, libfaketime
# the clock faults (the local Kafka image preloads it: chaos.faults.clock).
BASE_EXTRA_PACKAGES = ("iptables", "iproute2", "procps", "libfaketime")

# Our own Ryuk-compatible reaper (chaos/cluster/images/context/reaper); bump when its source changes.
REAPER_VERSION = "1.0.0"

# Official images, for machines that can pull. Docker Hub names carry no registry host.
OFFICIAL_KAFKA_REPOSITORY = "apache/kafka"  # one tag per release: apache/kafka:<version>
OFFICIAL_TOXIPROXY_IMAGE = f"shopify/toxiproxy:{TOXIPROXY_VERSION}"
# testcontainers' reaper speaks the same protocol as ours.
OFFICIAL_RYUK_IMAGE = "testcontainers/ryuk:0.14.0"
