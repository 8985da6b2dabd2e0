"""A KRaft cluster of N combined broker/controller nodes behind one Toxiproxy, on its own Docker network.

Topology (DESIGN.md, "Cluster topology"): per broker *i* three proxies in the Toxiproxy container,
all listening on ``0.0.0.0:<port>``:

* ``ext-i`` — clients. Port P is published on 127.0.0.1:P and broker *i* advertises ``127.0.0.1:P``,
  so a client bootstrapped through one proxy only ever learns proxy addresses.
* ``extK-i`` — client path K (``ClusterConfig.client_paths`` of them): listener ``EXTK`` of broker *i*,
  published and advertised like ``ext-i``. A client bootstrapped on path K (:meth:`KafkaCluster.bootstrap`)
  only ever learns path K's addresses, so a fault on its proxies cuts or slows it and not its colleagues.
* ``int-i`` — replication. The inter-broker listener is advertised as ``toxiproxy:<port>``.
* ``ctl-i`` — the KRaft quorum. Static voters are ``i@toxiproxy:<port>``.

Every container and the network carry ``chaos-harness=<run id>``. The run's reaper starts first and
holds a registration for the label until ``close()``, which also removes everything explicitly.

Log directories (``ClusterConfig.log_dir_mb``): each broker's is a tmpfs volume of that size, so a disk fault
fills it and not the host's disk. A local volume is mounted while a container uses it; a *keeper* container
(``<run>-logdirs``, every broker's volume at ``/logdirs/<node id>``) uses them all for the cluster's life,
so a broker's data survives its container's kill and start as it did in the container's own layer, and
disk faults reach a stopped broker's directory through it.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.cluster import introspect, wire
from chaos.cluster.broker import (
    CTL_PROXY_BASE,
    INT_PROXY_BASE,
    Broker,
    client_path_names,
    unknown_client_path,
)
from chaos.cluster.config import DEFAULT_LOG_DIR_MB, ClusterConfig, env_name
from chaos.cluster.containers import labelled, log_tail, publish_on_loopback, wait_for_log
from chaos.cluster.engine import LABEL, docker_client, labelled_containers
from chaos.cluster.logs import write_log
from chaos.cluster.ports import start_on_free_ports
from chaos.cluster.reaper import Reaper, reaper_name
from chaos.cluster.single import READY_LOG, new_cluster_id
from chaos.cluster.sweep import LOG_DIR_ROLE, remove_run_volumes
from chaos.cluster.toxiproxy import API_PORT, ProxySpec, Toxiproxy
from chaos.errors import ClusterError, ClusterStartTimeout
from chaos.run.events import PartitionState

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

    from chaos.cluster.images import ImageSet

TOXIPROXY_ALIAS = "toxiproxy"
EXTERNAL_PORT = 9092  # inside each broker container
CONTROLLER_PORT = 9093
INTERNAL_PORT = 9094
CLIENT_PATH_PORT_BASE = 9100  # listener EXTK listens on CLIENT_PATH_PORT_BASE + K inside each broker
ROLE_LABEL = f"{LABEL}.role"
LOG_DIR = "/var/lib/kafka/data"  # each broker's log.dirs, when it has a log directory of its own
LAYER_BACKING = "/var/lib/chaos/disk"  # the same volume again, under the fault layer mounted on LOG_DIR
KEEPER_LOG_ROOT = "/logdirs"  # broker i's log directory in the keeper: KEEPER_LOG_ROOT/i


class KafkaCluster:
    """N KRaft brokers behind Toxiproxy. Use as a context manager or call ``start()`` / ``close()``."""

    def __init__(
        self,
        images: ImageSet,
        config: ClusterConfig | None = None,
        run_id: str | None = None,
        run_dir: Path | None = None,
    ) -> None:
        self.images = images
        self.config = config or ClusterConfig()
        self.run_id = run_id or f"c{uuid.uuid4().hex[:10]}"
        self.run_dir = run_dir
        self.start_duration_s: float | None = None
        self.brokers: tuple[Broker, ...] = ()
        self._toxiproxy_container: DockerContainer | None = None
        self._toxiproxy: Toxiproxy | None = None
        self._reaper: Reaper | None = None
        self._network: Any = None
        self._log_keeper: Any = None
        self._admin: Any = None
        self._preferred = 0
        self._closed = False

    # ---------------------------------------------------------------- lifecycle

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> KafkaCluster:
        """Start reaper, network, Toxiproxy and all brokers together; wait until the cluster serves."""
        started = time.monotonic()
        try:
            self._start()
            self.wait_ready(self.config.start_timeout_s - (time.monotonic() - started))
        except BaseException:
            self.close()
            raise
        self.start_duration_s = time.monotonic() - started
        return self

    def _start(self) -> None:
        start_on_free_ports(
            self.config.brokers * (1 + self.config.client_paths) + 2,
            self._start_on,
            self._discard_attempt,
            what=f"cluster {self.run_id}",
        )

    def _discard_attempt(self) -> None:
        """Remove what a start attempt created (a port it chose was taken), for a fresh attempt."""
        from chaos.cluster.sweep import sweep

        if self._reaper is not None:
            self._reaper.close()
        sweep(self.run_id)  # by label: a container whose start failed is created, and holds its name
        self._reaper = self._network = self._toxiproxy_container = self._toxiproxy = None
        self._log_keeper = None
        self.brokers = ()

    def _start_on(self, ports: list[int]) -> None:
        n = self.config.brokers
        ext_ports, api_port, reaper_port = ports[:n], ports[n], ports[n + 1]
        path_ports = ports[n + 2 :]  # broker i's client path K: path_ports[(i - 1) * K_max + K - 1]
        paths = self.config.client_paths
        client_ports = [tuple(path_ports[(i - 1) * paths : i * paths]) for i in range(1, n + 1)]
        client = docker_client()

        self._reaper = Reaper(self.images.reaper, self.run_id, reaper_port)
        self._reaper.start()

        net_name = f"chaos-{self.run_id}"
        self._network = client.networks.create(net_name, driver="bridge", labels={LABEL: self.run_id})
        self._start_log_dirs()

        broker_names = [f"chaos-{self.run_id}-kafka-{i}" for i in range(1, n + 1)]
        self.brokers = tuple(
            Broker(
                i,
                broker_names[i - 1],
                ext_ports[i - 1],
                self._broker_container(i, broker_names[i - 1], ext_ports[i - 1], client_ports[i - 1]),
                client_ports[i - 1],
            )
            for i in range(1, n + 1)
        )

        proxy = labelled(
            self.images.toxiproxy,
            self.run_id,
            f"chaos-{self.run_id}-toxiproxy",
            **self._network_kwargs([TOXIPROXY_ALIAS]),
        ).with_command("-host=0.0.0.0")
        publish_on_loopback(proxy, API_PORT, api_port)
        for port in [*ext_ports, *path_ports]:
            publish_on_loopback(proxy, port, port)
        self._toxiproxy_container = proxy
        self._start_container(proxy, "Toxiproxy")
        self._toxiproxy = Toxiproxy(f"http://127.0.0.1:{api_port}")
        self._create_proxies()

        # All together: a broker logs "started" only once a majority of the quorum is up.
        for broker in self.brokers:
            self._start_container(broker.container, broker.name)

    def _create_proxies(self) -> None:
        """Wait for Toxiproxy's API, then create every broker's ext/int/ctl proxy (enabled, no toxic)."""
        assert self._toxiproxy is not None
        assert self._toxiproxy_container is not None
        deadline = time.monotonic() + 30
        while not self._toxiproxy.ready():
            if time.monotonic() > deadline:
                raise ClusterStartTimeout(
                    f"Toxiproxy's API did not answer within 30 s\n{log_tail(self._toxiproxy_container)}"
                )
            time.sleep(0.1)
        for broker in self.brokers:
            for spec in self.proxy_specs(broker):
                self._toxiproxy.create(spec)

    def log_volume(self, node_id: int) -> str:
        """The name of broker ``node_id``'s log directory volume (``ClusterConfig.log_dir_mb`` > 0)."""
        return f"chaos-{self.run_id}-logdir-{node_id}"

    def _start_log_dirs(self) -> None:
        """Create each broker's tmpfs log directory volume and start the keeper that holds them mounted."""
        size_mb = self.config.log_dir_mb
        if not size_mb:
            return
        client = docker_client()
        labels = {LABEL: self.run_id, ROLE_LABEL: LOG_DIR_ROLE}
        volumes = {}
        for node_id in range(1, self.config.brokers + 1):
            name = self.log_volume(node_id)
            client.volumes.create(
                name,
                driver="local",
                driver_opts={"type": "tmpfs", "device": "tmpfs", "o": f"size={size_mb}m,mode=1777"},
                labels=labels,
            )
            volumes[name] = {"bind": f"{KEEPER_LOG_ROOT}/{node_id}", "mode": "rw,nocopy"}
        try:
            self._log_keeper = client.containers.run(
                self.images.kafka,
                ["sh", "-c", "while :; do sleep 3600; done"],
                name=f"chaos-{self.run_id}-logdirs",
                volumes=volumes,
                network_mode="none",
                labels=labels,
                detach=True,
            )
        except Exception as exc:
            raise ClusterError(
                f"could not start the keeper of the brokers' log directories: {exc}\n"
                "  fix: the engine must mount tmpfs volumes (`docker volume create --opt type=tmpfs "
                "--opt device=tmpfs --opt o=size=64m t`); or start the cluster with "
                "ClusterConfig(log_dir_mb=0) (no disk faults then)"
            ) from exc

    def log_dir_keeper(self) -> tuple[Any, str]:
        """The keeper container and the directory under which it mounts each broker's log directory
        (``<that>/<node id>``); ClusterError when this cluster's brokers have no log directories of
        their own."""
        if self._log_keeper is None:
            raise ClusterError(
                f"cluster {self.run_id} has no log directories of its own (ClusterConfig.log_dir_mb=0)\n"
                f"  fix: start it with ClusterConfig(log_dir_mb={DEFAULT_LOG_DIR_MB}) to run disk faults; a "
                f"scenario asks for it with Scenario(cluster=ClusterNeeds(log_dir_mb={DEFAULT_LOG_DIR_MB}))"
            )
        return self._log_keeper, KEEPER_LOG_ROOT

    def toxiproxy_container_id(self) -> str:
        """The Toxiproxy container's id (a sidecar joins its network namespace with it)."""
        if self._toxiproxy_container is None:
            raise ClusterError("the cluster is not started: call start() or use it as a context manager")
        return str(self._toxiproxy_container.get_wrapped_container().id)

    def reset_toxiproxy(self) -> None:
        """Restart the Toxiproxy container and recreate every proxy: no toxic, every proxy enabled.

        The last resort of a toxic's heal: when a client closes its connection while a latency toxic holds
        data for it, Toxiproxy 2.12 can wedge that link so that removing the toxic never returns (Toxiproxy
        issue 558: the toxic blocks writing to a writer that has exited). Connections through the proxies
        drop for about a second; clients and brokers reconnect to the same ports. It removes *every* toxic
        and disabled proxy: call it through ``chaos.faults.toxics.restart_toxiproxy``, which records the
        faults it healed that way (this package does not know about faults).
        """
        if self._toxiproxy_container is None or self._toxiproxy is None:
            raise ClusterError("the cluster is not started: call start() or use it as a context manager")
        self._toxiproxy_container.get_wrapped_container().restart(timeout=1)
        self._create_proxies()

    def _network_kwargs(self, aliases: list[str]) -> dict[str, Any]:
        client = docker_client()
        name = self._network.name
        return {
            "network": name,
            "networking_config": {name: client.api.create_endpoint_config(aliases=aliases)},
        }

    def _broker_container(
        self, node_id: int, name: str, ext_port: int, client_ports: tuple[int, ...]
    ) -> DockerContainer:
        voters = ",".join(
            f"{i}@{TOXIPROXY_ALIAS}:{CTL_PROXY_BASE + i}" for i in range(1, self.config.brokers + 1)
        )
        paths = [(f"EXT{k}", CLIENT_PATH_PORT_BASE + k, port) for k, port in enumerate(client_ports, 1)]
        env = {
            "CLUSTER_ID": self._cluster_id,
            "KAFKA_NODE_ID": str(node_id),
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": ",".join(
                [
                    f"EXTERNAL://0.0.0.0:{EXTERNAL_PORT}",
                    f"INTERNAL://0.0.0.0:{INTERNAL_PORT}",
                    f"CONTROLLER://0.0.0.0:{CONTROLLER_PORT}",
                    *(f"{listener}://0.0.0.0:{inside}" for listener, inside, _ in paths),
                ]
            ),
            "KAFKA_ADVERTISED_LISTENERS": ",".join(
                [
                    f"EXTERNAL://127.0.0.1:{ext_port}",
                    f"INTERNAL://{TOXIPROXY_ALIAS}:{INT_PROXY_BASE + node_id}",
                    *(f"{listener}://127.0.0.1:{published}" for listener, _, published in paths),
                ]
            ),
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": ",".join(
                f"{listener}:PLAINTEXT"
                for listener in ("EXTERNAL", "INTERNAL", "CONTROLLER", *(p[0] for p in paths))
            ),
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": voters,
            "KAFKA_HEAP_OPTS": f"-Xmx{self.config.heap} -Xms{self.config.heap}",
            "KAFKA_JVM_PERFORMANCE_OPTS": self.config.jvm_opts,
        }
        if self.config.log_dir_mb:
            env["KAFKA_LOG_DIRS"] = LOG_DIR
        if self.config.fake_clock:
            env["CHAOS_FAKE_CLOCK"] = "1"
        docker_kwargs = self._network_kwargs([f"kafka-{node_id}"])
        if self.config.disk_layer:  # the entry point mounts LOG_DIR through faultfs over LAYER_BACKING
            env["CHAOS_DISK_LAYER"] = "1"
            docker_kwargs |= {"devices": ["/dev/fuse:/dev/fuse:rwm"], "cap_add": ["SYS_ADMIN"]}
        for prop, value in self.config.broker_config().items():
            env[env_name(prop)] = value
        container = labelled(self.images.kafka, self.run_id, name, **docker_kwargs)
        if self.config.log_dir_mb:
            container.with_volume_mapping(self.log_volume(node_id), LOG_DIR, "rw,nocopy")
        if self.config.disk_layer:
            container.with_volume_mapping(self.log_volume(node_id), LAYER_BACKING, "rw,nocopy")
        return container.with_envs(**env)

    @property
    def _cluster_id(self) -> str:
        if not hasattr(self, "_kraft_cluster_id"):
            self._kraft_cluster_id = new_cluster_id()
        return self._kraft_cluster_id

    def _start_container(self, container: DockerContainer, what: str) -> None:
        try:
            container.start()
        except Exception as exc:
            raise ClusterError(f"{what} container failed to start: {exc}\n{log_tail(container)}") from exc

    def proxy_specs(self, broker: Broker) -> list[ProxySpec]:
        """The proxies of ``broker`` (ext, int, ctl, then its client paths) with their listen and upstream
        addresses."""
        upstream = broker.name
        return [
            ProxySpec(broker.proxy("ext"), f"0.0.0.0:{broker.ext_port}", f"{upstream}:{EXTERNAL_PORT}"),
            ProxySpec(broker.proxy("int"), f"0.0.0.0:{broker.int_port}", f"{upstream}:{INTERNAL_PORT}"),
            ProxySpec(broker.proxy("ctl"), f"0.0.0.0:{broker.ctl_port}", f"{upstream}:{CONTROLLER_PORT}"),
            *(
                ProxySpec(
                    broker.proxy(path),
                    f"0.0.0.0:{broker.client_port(path)}",
                    f"{upstream}:{CLIENT_PATH_PORT_BASE + k}",
                )
                for k, path in enumerate(broker.client_paths[1:], 1)
            ),
        ]

    def wait_ready(self, timeout_s: float) -> None:
        """Every broker logged started, the quorum has a leader and metadata lists all N brokers."""
        deadline = time.monotonic() + max(timeout_s, 1.0)
        for broker in self.brokers:
            wait_for_log(broker.container, READY_LOG, max(deadline - time.monotonic(), 0.5))
        last = ""
        while time.monotonic() < deadline:
            try:
                seen = introspect.registered_brokers(self)
                leader = self.controller_id()
                if len(seen) == len(self.brokers) and leader > 0:
                    return
                last = f"brokers {sorted(seen)}, quorum leader {leader}"
            except Exception as exc:  # not ready yet; the error goes into the timeout message
                last = str(exc)
            time.sleep(0.25)
        tails = "\n".join(f"--- {b.name}\n{b.log_tail(30)}" for b in self.brokers)
        raise ClusterStartTimeout(
            f"cluster {self.run_id} not ready within {timeout_s:.0f} s ({last})\n{tails}\n"
            f"  fix: check memory/CPU (`docker stats`), then `chaos clean` and retry"
        )

    def close(self) -> None:
        """Save broker logs (when a run dir is set), then remove every container, the network, the reaper."""
        if self._closed:
            return
        self._closed = True
        if self.run_dir is not None:
            with contextlib.suppress(Exception):
                self.capture_logs(self.run_dir)
        if self._admin is not None:
            self._admin = None
        if self._toxiproxy is not None:
            self._toxiproxy.close()
        from chaos.cluster.sweep import sweep

        containers = [b.container for b in self.brokers]
        if self._toxiproxy_container is not None:
            containers.append(self._toxiproxy_container)
        for container in containers:
            with contextlib.suppress(Exception):
                wrapped = container.get_wrapped_container()
                if wrapped is not None:
                    if wrapped.status == "paused":
                        wrapped.unpause()
                    wrapped.remove(force=True, v=True)
        if self._reaper is not None:
            reaper = reaper_name(self.run_id)
            # sidecars and anything else of this run, except the reaper (it goes last)
            with contextlib.suppress(Exception):
                for leftover in labelled_containers(f"{LABEL}={self.run_id}"):
                    if leftover.name != reaper:
                        leftover.remove(force=True, v=True)
        if self._network is not None:
            with contextlib.suppress(Exception):
                self._network.remove()
        with contextlib.suppress(Exception):  # the log directories, once no container holds them
            remove_run_volumes(self.run_id)
        if self._reaper is not None:
            self._reaper.close()
        with contextlib.suppress(Exception):
            sweep(self.run_id)

    # ---------------------------------------------------------------- access

    @property
    def toxiproxy(self) -> Toxiproxy:
        if self._toxiproxy is None:
            raise ClusterError("the cluster is not started: call start() or use it as a context manager")
        return self._toxiproxy

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's ext proxy, comma-separated."""
        return ",".join(b.bootstrap for b in self.brokers)

    @property
    def client_paths(self) -> tuple[str, ...]:
        """The client paths: ``ext`` (shared by every client by default) and ``ext1`` .. ``extN``."""
        return client_path_names(self.config.client_paths)

    def bootstrap(self, path: str = "ext") -> str:
        """Every broker's address on client ``path``, comma-separated: a client bootstrapped here only
        talks to the cluster through ``path``'s proxies (``extK-i``)."""
        if path not in self.client_paths:
            raise unknown_client_path(path, self.client_paths)
        return ",".join(b.address(path) for b in self.brokers)

    def client_path_of(self, bootstrap_servers: str) -> str | None:
        """The client path whose addresses ``bootstrap_servers`` lists (any order), or ``None``."""
        wanted = {s.strip() for s in bootstrap_servers.split(",") if s.strip()}
        for path in self.client_paths:
            if wanted and wanted <= {b.address(path) for b in self.brokers}:
                return path
        return None

    def broker(self, node_id: int) -> Broker:
        for broker in self.brokers:
            if broker.node_id == node_id:
                return broker
        raise ClusterError(f"no broker {node_id}: this cluster has node ids 1..{len(self.brokers)}")

    def broker_bootstrap(self, node_id: int) -> str:
        return self.broker(node_id).bootstrap

    def admin(self) -> Any:
        """A confluent-kafka AdminClient bootstrapped through every ext proxy (shared)."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(
                {"bootstrap.servers": self.bootstrap_servers, "socket.timeout.ms": 10000}
            )
        return self._admin

    def probe_order(self) -> Iterator[Broker]:
        """Brokers to ask for state, the last one that answered first."""
        n = len(self.brokers)
        for k in range(n):
            yield self.brokers[(self._preferred + k) % n]

    def answered(self, broker: Broker) -> None:
        self._preferred = self.brokers.index(broker)

    def restart_broker(
        self, node_id: int, timeout_s: float = 90.0, *, wait: bool = True, fresh: bool = False
    ) -> float:
        """Start a killed/stopped broker's same container (data kept); wait for "started" since now
        (``wait=False``: return once the container runs). ``fresh``: a running container is killed and
        started again (a process an earlier start left stuck before it registered).

        Returns the seconds until it logged started; logs are read ``since=`` the restart time.
        """
        return self.restart_brokers((node_id,), timeout_s, wait=wait, fresh=fresh)

    def restart_brokers(
        self, node_ids: Sequence[int], timeout_s: float = 90.0, *, wait: bool = True, fresh: bool = False
    ) -> float:
        """:meth:`restart_broker` for several brokers: every container starts before any is waited for (a
        quorum of them down registers only together); ``timeout_s`` bounds the whole wait."""
        since = time.time()
        started = time.monotonic()
        brokers = [self.broker(node_id) for node_id in node_ids]
        for broker in brokers:
            wrapped = broker.docker
            wrapped.reload()
            if wrapped.status == "paused":
                wrapped.unpause()
            if fresh and wrapped.status == "running":
                wrapped.kill()
                wrapped.wait(timeout=30)
                wrapped.reload()
            if wrapped.status != "running":
                wrapped.start()
        if wait:
            deadline = started + timeout_s
            for broker in brokers:
                left = max(deadline - time.monotonic(), 0.5)
                wait_for_log(broker.container, re.escape(READY_LOG), left, since=since)
        return time.monotonic() - started

    def capture_logs(self, directory: Path, since: float | None = None) -> list[Path]:
        """Write each broker's log (and Toxiproxy's) to ``directory`` as ``<name>.log.gz``
        (:mod:`chaos.cluster.logs` reads them back); returns the files. ``since`` (epoch seconds): only the
        lines from then on — a run's own window, so its evidence never comes from an earlier run on the
        session's shared cluster; ``None``: the whole log."""
        items: list[tuple[str, DockerContainer]] = [
            (f"broker-{b.node_id}", b.container) for b in self.brokers
        ]
        if self._toxiproxy_container is not None:
            items.append(("toxiproxy", self._toxiproxy_container))

        def capture(stem: str, container: DockerContainer) -> Path:
            try:
                wrapped = container.get_wrapped_container()
                raw = wrapped.logs(timestamps=True, since=since) if since else wrapped.logs(timestamps=True)
            except Exception as exc:  # a removed container has no logs; say so in the file
                raw = f"(logs unavailable: {exc})\n".encode()
            return write_log(directory, stem, raw)

        with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="capture-logs") as pool:
            return list(pool.map(capture, *zip(*items, strict=True)))

    # ---------------------------------------------------------------- introspection (see introspect.py)

    def controller_id(self) -> int:
        return introspect.controller_id(self)

    def describe_partitions(
        self, topics: list[str] | None = None, via: int | None = None
    ) -> list[PartitionState]:
        """Leader, replicas and ISR per partition; ``via`` reads one broker's view (see introspect)."""
        return introspect.describe_partitions(self, topics, via)

    def offline_partitions(self, topics: list[str] | None = None) -> list[PartitionState]:
        return [p for p in self.describe_partitions(topics) if p.offline]

    def under_replicated_partitions(self, topics: list[str] | None = None) -> list[PartitionState]:
        return [p for p in self.describe_partitions(topics) if p.under_replicated]

    def partition(self, topic: str, partition: int, via: int | None = None) -> PartitionState:
        return introspect.partition(self, topic, partition, via)

    def group_coordinator(self, group: str) -> int:
        return introspect.group_coordinator(self, group)

    def txn_coordinator(self, transactional_id: str) -> int:
        """The transaction coordinator of ``transactional_id`` (the leader of its __transaction_state
        partition)."""
        return introspect.group_coordinator(self, transactional_id, key_type=wire.TRANSACTION_KEY)

    def describe_group(self, group: str) -> wire.WireGroup:
        """The group's state and member ids from its coordinator (raw DescribeGroups, no AdminClient)."""
        return introspect.describe_group(self, group)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 3,
        config: dict[str, str] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        introspect.create_topic(self, name, partitions, replication_factor, config or {}, timeout_s)

    def topic_configs(self, name: str, keys: Sequence[str], timeout_s: float = 10.0) -> dict[str, str]:
        """The effective values of topic ``name``'s configs ``keys`` (:func:`introspect.topic_configs`)."""
        return introspect.topic_configs(self, name, keys, timeout_s)

    def delete_records(self, topic: str, partition: int, before: int, timeout_s: float = 30.0) -> int:
        """Delete a partition's records below ``before``; returns its new log start offset."""
        return introspect.delete_records(self, topic, partition, before, timeout_s)

    def delete_topics(self, names: list[str], timeout_s: float = 30.0) -> None:
        introspect.delete_topics(self, names, timeout_s)

    def set_group_config(self, group: str, settings: dict[str, str], timeout_s: float = 30.0) -> None:
        """Set dynamic configs of consumer group ``group`` (:func:`introspect.set_group_config`)."""
        introspect.set_group_config(self, group, settings, timeout_s)

    def topics(self, *, internal: bool = True) -> set[str]:
        """The cluster's topics; ``internal=False``: without Kafka's own (``__consumer_offsets``…)."""
        return introspect.topics(self, internal=internal)

    def wait_healthy(self, timeout_s: float = 60.0) -> None:
        introspect.wait_healthy(self, timeout_s)
