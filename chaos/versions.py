"""Every pinned version of an external component, in one place.

Changing a value here changes the local image tags and build hashes, so ``chaos images ensure``
rebuilds what depends on it.
"""

from __future__ import annotations

KAFKA_VERSION = "4.1.1"
SCALA_BINARY_VERSION = "2.13"
# Kafka's POM carries log4j-api and log4j-core but no SLF4J binding; this one matches its log4j-api.
LOG4J_VERSION = "2.24.3"

TOXIPROXY_VERSION = "2.12.0"
TOXIPROXY_GO_PACKAGE = "github.com/Shopify/toxiproxy/v2/cmd/server"

DEBIAN_SUITE = "bookworm"
JRE_PACKAGE = "openjdk-17-jre-headless"
# Tools the base image carries besides the JRE: iptables/iproute2 serve the network-cut sidecar.
BASE_EXTRA_PACKAGES = ("iptables", "iproute2", "procps")

# Our own Ryuk-compatible reaper (chaos/cluster/images/context/reaper); bump when its source changes.
REAPER_VERSION = "1.0.0"

# Official images, for machines that can pull. Docker Hub names carry no registry host.
OFFICIAL_KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
OFFICIAL_TOXIPROXY_IMAGE = f"shopify/toxiproxy:{TOXIPROXY_VERSION}"
# testcontainers' reaper speaks the same protocol as ours.
OFFICIAL_RYUK_IMAGE = "testcontainers/ryuk:0.14.0"
