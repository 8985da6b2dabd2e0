"""A test that fails in the middle of faults leaves nothing behind (checked in a pytester session).

The inner session's first test creates a topic and the group coordinators' __consumer_offsets, injects a
pause, a network cut, a refused proxy and a latency toxic, then fails. Its second test runs on the same
session cluster and asserts nothing is left: no paused broker, no iptables sidecar, no toxic, every proxy
enabled, every ISR full, the test's topic deleted — and Kafka's internal topic kept. After the inner session
no container or network of its run exists.
"""

from __future__ import annotations

import os

import docker.errors  # noqa: F401  # before pytester's sys.modules snapshot: see below
import pytest

# pytester restores sys.modules after a test; had docker been first imported inside one, later tests
# would catch the re-imported docker.errors classes while the cached client raised the old ones.

pytestmark = pytest.mark.integration

INNER = """
from pathlib import Path

from chaos.cluster.engine import LABEL, docker_client, labelled_containers
from chaos.faults.network import NetworkCut
from chaos.faults.process import Pause
from chaos.faults.toxics import Latency, Refuse


def test_fails_in_the_middle_of_faults(kafka_cluster):
    Path("run_id.txt").write_text(kafka_cluster.run_id)
    kafka_cluster.create_topic("left-behind", partitions=1, replication_factor=3)
    kafka_cluster.group_coordinator("cleanup-probe")  # creates __consumer_offsets if it is not there yet
    Latency(kafka_cluster, 1, ms=300).inject()
    Refuse(kafka_cluster, 2, paths=("ext",)).inject()
    NetworkCut(kafka_cluster, 3).inject()
    Pause(kafka_cluster, 1).inject()
    assert False, "boom in the middle of four faults"


def test_next_test_finds_everything_healed(kafka_cluster):
    assert Path("run_id.txt").read_text() == kafka_cluster.run_id, "the cluster was rebuilt, not healed"
    assert [b.status() for b in kafka_cluster.brokers] == ["running"] * 3
    sidecars = labelled_containers([f"{LABEL}={kafka_cluster.run_id}", f"{LABEL}.role=netcut"])
    assert sidecars == []
    proxies = kafka_cluster.toxiproxy.proxies()
    assert all(p["enabled"] and p["toxics"] == [] for p in proxies.values())
    assert "left-behind" not in kafka_cluster.topics()
    # the internal topic the failed test created is Kafka's: kept (nothing here would recreate it)
    assert "__consumer_offsets" in kafka_cluster.topics()
    assert "__consumer_offsets" not in kafka_cluster.topics(internal=False)
    assert kafka_cluster.under_replicated_partitions() == []
"""


@pytest.mark.own_cluster
def test_failing_test_leaves_no_fault_and_no_container(pytester: pytest.Pytester) -> None:
    from chaos.cluster.engine import LABEL, docker_client, labelled_containers

    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--chaos-report-dir={pytester.path / 'reports'}", timeout=600
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*boom in the middle of four faults*"])
    run_id = (pytester.path / "run_id.txt").read_text()
    selector = {"label": f"{LABEL}={run_id}"}
    assert labelled_containers(f"{LABEL}={run_id}") == []
    assert docker_client().networks.list(filters=selector) == []
    assert os.path.isdir(pytester.path / "reports")
