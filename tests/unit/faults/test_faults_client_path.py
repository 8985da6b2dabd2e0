"""Network faults on one client's own path: the cluster's client paths (listeners, proxies, addresses), the
target a client object becomes, and which proxies a cut or a toxic on it touches — every broker's proxy of
that path, no other. Toxiproxy is a recording stand-in here; tests/integration/test_client_path.py cuts a
real member on a real cluster."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from chaos.cluster.broker import Broker
from chaos.cluster.cluster import KafkaCluster
from chaos.cluster.config import ClusterConfig
from chaos.cluster.images import ImageSet
from chaos.errors import ClusterError, ConfigError, FaultError
from chaos.faults.base import FaultLog
from chaos.faults.client import on_client
from chaos.faults.targets import Client
from chaos.faults.toxics import Latency, Refuse, Toxic

EXT = (9001, 9002, 9003)
PATHS = ((9011, 9012), (9021, 9022), (9031, 9032))  # broker i's ext1, ext2


class RecordingToxiproxy:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def set_enabled(self, proxy: str, enabled: bool) -> None:
        self.calls.append(("enabled", proxy, enabled))

    def add_toxic(
        self, proxy: str, name: str, kind: str, stream: str, attrs: dict[str, int], tox: float
    ) -> None:
        self.calls.append(("add", proxy, name, kind, stream))

    def remove_toxic(self, proxy: str, name: str) -> None:
        self.calls.append(("remove", proxy, name))


@dataclass
class Worker:
    """A client of the run as the faults see it: a name and the context it was started on."""

    name: str
    context: Any


def cluster(client_paths: int = 2) -> KafkaCluster:
    kafka = KafkaCluster(
        ImageSet("kafka:x", "toxiproxy:x", "reaper:x", ()), ClusterConfig(client_paths=client_paths)
    )
    kafka.brokers = tuple(
        Broker(i, f"kafka-{i}", EXT[i - 1], None, PATHS[i - 1][:client_paths])  # type: ignore[arg-type]
        for i in (1, 2, 3)
    )
    kafka._toxiproxy = RecordingToxiproxy()  # type: ignore[assignment]
    return kafka


def on(kafka: KafkaCluster, name: str, path: str) -> Worker:
    return Worker(name, SimpleNamespace(bootstrap_servers=kafka.bootstrap(path)))


def test_each_client_path_has_its_own_addresses_and_proxies_on_every_broker() -> None:
    kafka = cluster()
    assert kafka.client_paths == ("ext", "ext1", "ext2")
    assert kafka.bootstrap() == kafka.bootstrap_servers == "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003"
    assert kafka.bootstrap("ext2") == "127.0.0.1:9012,127.0.0.1:9022,127.0.0.1:9032"
    specs = kafka.proxy_specs(kafka.broker(2))
    assert [(s.name, s.listen, s.upstream) for s in specs[3:]] == [
        ("ext1-2", "0.0.0.0:9021", "kafka-2:9101"),
        ("ext2-2", "0.0.0.0:9022", "kafka-2:9102"),
    ]
    assert kafka.client_path_of("127.0.0.1:9031,127.0.0.1:9011") == "ext1"  # any order, a subset
    assert kafka.client_path_of("127.0.0.1:9999") is None
    with pytest.raises(ClusterError, match=r"unknown client path 'ext3'.*client_paths=N"):
        kafka.bootstrap("ext3")
    with pytest.raises(ClusterError, match="unknown client path"):
        kafka.broker(1).proxy("ext3")


def test_client_paths_are_validated() -> None:
    assert ClusterConfig(client_paths=0).client_paths == 0
    for bad in (-1, 5, True, "2"):
        with pytest.raises(ConfigError, match="client_paths"):
            ClusterConfig(client_paths=bad)  # type: ignore[arg-type]


def test_a_cut_on_a_client_disables_its_path_on_every_broker_and_nothing_else() -> None:
    kafka = cluster()
    toxiproxy = kafka.toxiproxy
    log = FaultLog()
    doomed = on(kafka, "doomed", "ext1")
    with Refuse(kafka, doomed, log=log) as fault:
        assert toxiproxy.calls == [("enabled", f"ext1-{i}", False) for i in (1, 2, 3)]  # type: ignore[attr-defined]
    assert toxiproxy.calls[3:] == [("enabled", f"ext1-{i}", True) for i in (1, 2, 3)]  # type: ignore[attr-defined]
    (record,) = log.records()
    assert (record.kind, record.target, record.brokers) == ("refuse", "doomed", ())
    assert dict(record.params)["paths"] == ("ext1",)
    assert record.healed_at is not None
    assert record.error is None
    assert fault.target == Client("doomed", "ext1")


def test_a_toxic_on_two_clients_of_one_path_slows_that_path_only() -> None:
    kafka = cluster()
    a, b = on(kafka, "a", "ext2"), on(kafka, "b", "ext2")
    log = FaultLog()
    with Latency(kafka, on_client(kafka, a, b), ms=300, direction="both", log=log):
        pass
    added = [c[1:] for c in kafka.toxiproxy.calls if c[0] == "add"]  # type: ignore[attr-defined]
    assert added == [
        (f"ext2-{i}", "chaos-latency-upstream", "latency", "upstream")
        if stream == "upstream"
        else (f"ext2-{i}", "chaos-latency-downstream", "latency", "downstream")
        for i in (1, 2, 3)
        for stream in ("upstream", "downstream")
    ]
    removed = [c[1] for c in kafka.toxiproxy.calls if c[0] == "remove"]  # type: ignore[attr-defined]
    assert sorted(removed) == sorted(p for p, *_ in added)
    assert log.records()[0].target == "a+b"


def test_a_broker_fault_can_act_on_one_client_path_of_that_broker() -> None:
    kafka = cluster()
    with Toxic(kafka, 2, {"timeout": 0}, paths=("ext1",), toxic_type="timeout"):
        pass
    assert [c[1] for c in kafka.toxiproxy.calls] == ["ext1-2", "ext1-2"]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("clients", "message"),
    [
        ((("shared", "ext"),), r"shared client path 'ext'.*client_path='ext1'"),
        ((("a", "ext1"), ("b", "ext2")), "different paths"),
        ((), "at least one client"),
    ],
)
def test_a_client_not_on_a_path_of_its_own_is_refused_with_the_fix(
    clients: tuple[tuple[str, str], ...], message: str
) -> None:
    kafka = cluster()
    with pytest.raises(FaultError, match=message):
        on_client(kafka, *(on(kafka, name, path) for name, path in clients))


def test_a_client_of_another_cluster_and_a_mismatched_path_are_refused() -> None:
    kafka = cluster()
    stranger = Worker("stranger", SimpleNamespace(bootstrap_servers="127.0.0.1:1234"))
    with pytest.raises(FaultError, match="not bootstrapped on a client path"):
        Refuse(kafka, stranger)
    with pytest.raises(FaultError, match="acts on its path ext1"):
        Refuse(kafka, on(kafka, "doomed", "ext1"), paths=("ext2",))
    with pytest.raises(FaultError, match="no client path"):
        Refuse(kafka, Client("frozen-only"))
    assert kafka.toxiproxy.calls == []  # type: ignore[attr-defined]
