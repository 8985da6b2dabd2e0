"""Honest heals without Docker: iptables chains per fault, failed heals retried, Toxiproxy restarts recorded.

A fake engine runs the sidecars' ``sh -c`` scripts against a tiny in-memory model of iptables (per
backend: chains and their rules, with iptables' own errors), one model per broker network namespace.
"""

from __future__ import annotations

import re
import shlex
import time
from typing import Any

import docker.errors
import pytest

import chaos.cluster.engine
import chaos.faults.network as network
from chaos.cluster.toxiproxy import ProxySpec
from chaos.errors import FaultError, ToxiproxyError
from chaos.faults.base import Fault, FaultLog, FaultRecord
from chaos.faults.heal import heal_all
from chaos.faults.network import BACKENDS, NetworkCut, Partition, ReplicationCut
from chaos.faults.toxics import Latency, Refuse

BUILTINS = ("INPUT", "FORWARD", "OUTPUT")


class Netns:
    """iptables' filter table in one network namespace, for each backend (they do not see each other)."""

    def __init__(self) -> None:
        self.chains: dict[str, dict[str, list[list[str]]]] = {b: {c: [] for c in BUILTINS} for b in BACKENDS}
        self.broken: set[str] = set()  # backends that cannot do anything (no nft support, say)
        self.fail: dict[tuple[str, str], int] = {}  # (backend, option) -> how many next calls fail
        self.lying_delete = False  # -X answers 0 but keeps the chain
        self.packets = 7  # what each rule's counter shows (-L -v)
        self.named_packets: dict[str, int] = {}  # per rule comment (the meter's proxy names), else packets
        self.commands: list[list[str]] = []

    @staticmethod
    def _normal(spec: list[str]) -> list[str]:
        """What iptables stores: ``-p tcp --dport`` gains its implicit ``-m tcp``."""
        if spec[:2] == ["-p", "tcp"] and "--dport" in spec and "-m" not in spec:
            return ["-p", "tcp", "-m", "tcp", *spec[2:]]
        return spec

    def run(self, argv: list[str]) -> tuple[int, str]:
        self.commands.append(argv)
        binary, wait, option, *args = argv
        assert wait == "-w", argv
        if binary in self.broken:
            return 1, f"{binary}: Failed to initialize nft: Protocol not supported"
        if self.fail.get((binary, option), 0) > 0:
            self.fail[binary, option] -= 1
            return 4, f"{binary}: Resource temporarily unavailable."
        chains = self.chains[binary]
        if option == "-S":
            lines = [f"-P {c} ACCEPT" for c in BUILTINS]
            lines += [f"-N {c}" for c in chains if c not in BUILTINS]
            lines += [" ".join(["-A", c, *rule]) for c, rules in chains.items() for rule in rules]
            return 0, "\n".join(lines) + "\n"
        chain, spec = args[0], args[1:]
        if option == "-N":
            if chain in chains:
                return 1, f"{binary}: Chain already exists."
            chains[chain] = []
            return 0, ""
        if chain not in chains:
            return 1, f"{binary}: No chain/target/match by that name."
        if option in ("-A", "-I"):
            if option == "-I":
                spec = spec[1:]  # the position: always 1 here
            target = spec[spec.index("-j") + 1]
            if target not in ("DROP", "ACCEPT", "RETURN") and target not in chains:
                return 2, f"{binary}: Couldn't load target `{target}'"
            rule = self._normal(spec)
            chains[chain].insert(0, rule) if option == "-I" else chains[chain].append(rule)
            return 0, ""
        if option == "-D":
            rule = self._normal(spec)
            if rule not in chains[chain]:
                return 1, f"{binary}: Bad rule (does a matching rule exist in that chain?)."
            chains[chain].remove(rule)
            return 0, ""
        if option == "-F":
            chains[chain] = []
            return 0, ""
        if option == "-L":  # -L CHAIN -v -x -n: the packets each rule matched
            assert spec == ["-v", "-x", "-n"], argv
            lines = [f"Chain {chain} (1 references)", "    pkts      bytes target     prot opt in out"]
            for rule in chains[chain]:
                name = rule[rule.index("--comment") + 1] if "--comment" in rule else None
                n = self.named_packets.get(name, self.packets) if name else self.packets
                lines.append(
                    f"{n} {n * 60} {rule[-1]} 6 -- * * 0.0.0.0/0 0.0.0.0/0"
                    + (f" /* {name} */" if name else "")
                )
            return 0, "\n".join(lines) + "\n"
        if option == "-X":
            if any(rule[-2:] == ["-j", chain] for rules in chains.values() for rule in rules):
                return 1, f"{binary}: Too many links."
            if chains[chain]:
                return 1, f"{binary}: Directory not empty."
            if not self.lying_delete:
                del chains[chain]
            return 0, ""
        raise AssertionError(f"the fake does not know {argv}")

    def rules(self, backend: str = "iptables") -> list[str]:
        return [" ".join(["-A", c, *r]) for c, rules in self.chains[backend].items() for r in rules]

    def user_chains(self, backend: str = "iptables") -> list[str]:
        return [c for c in self.chains[backend] if c not in BUILTINS]

    def options(self) -> list[str]:
        return [f"{c[0]} {c[2]}" for c in self.commands]


class FakeContainer:
    """A broker container or a sidecar: a status, a network namespace, reload/remove."""

    def __init__(self, name: str, netns: Netns, run: dict[str, Any] | None = None) -> None:
        self.name = name
        self.id = f"id-{name}"
        self.netns = netns
        self.status = "running"
        self.removed = False
        self.run = run or {}

    def reload(self) -> None:
        if self.removed:
            raise docker.errors.NotFound(f"No such container: {self.name}")

    def remove(self, force: bool = False) -> None:
        self.removed = True

    def unpause(self) -> None:
        self.status = "running"

    def exec_run(self, cmd: list[str]) -> tuple[int, bytes]:
        if self.removed or self.status != "running":
            raise docker.errors.APIError(f"container {self.name} is not running")
        assert cmd[:2] == ["sh", "-c"], cmd
        code, out = 0, []
        for part in cmd[2].split(" && "):
            code, text = self.netns.run(shlex.split(part))
            out.append(text)
            if code:
                break
        return code, "".join(out).encode()


class FakeContainers:
    """``docker_client().containers``: starts sidecars in a broker's namespace, lists them."""

    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine

    def run(self, image: str, command: list[str], **kwargs: Any) -> FakeContainer:
        broker = self.engine.brokers[kwargs["network_mode"].removeprefix("container:")]
        if broker.removed or broker.status not in ("running", "paused"):
            raise docker.errors.APIError("cannot join network of a non running container")
        sidecar = FakeContainer(kwargs["name"], broker.netns, {"image": image, "command": command, **kwargs})
        self.engine.sidecars.append(sidecar)
        return sidecar

    def list(
        self, all: bool = False, filters: dict[str, Any] | None = None, ignore_removed: bool = False
    ) -> list[FakeContainer]:
        assert filters is not None
        assert "chaos-harness=cfake" in filters["label"]
        return self.engine.live()


class FakeEngine:
    """``docker_client()``: the broker containers by id and every sidecar started."""

    def __init__(self) -> None:
        self.containers = FakeContainers(self)
        self.brokers: dict[str, FakeContainer] = {}
        self.sidecars: list[FakeContainer] = []

    def live(self) -> list[FakeContainer]:
        return [s for s in self.sidecars if not s.removed]


class FakeToxiproxy:
    def __init__(self) -> None:
        self.toxics: set[tuple[str, str]] = set()
        self.disabled: set[str] = set()
        self.wedged: set[str] = set()  # proxies whose toxics cannot be removed (Toxiproxy#558)
        self.stuck: set[str] = set()  # proxies whose toxics cannot be removed one by one, but reset works

    def add_toxic(self, proxy: str, name: str, *args: Any) -> None:
        self.toxics.add((proxy, name))

    def remove_toxic(self, proxy: str, name: str) -> None:
        if proxy in self.wedged | self.stuck:
            raise ToxiproxyError(f"Toxiproxy did not answer DELETE /proxies/{proxy}/toxics/{name}")
        self.toxics.discard((proxy, name))

    def set_enabled(self, proxy: str, enabled: bool) -> None:
        (self.disabled.discard if enabled else self.disabled.add)(proxy)

    def reset(self) -> None:
        if self.wedged:
            raise ToxiproxyError("Toxiproxy did not answer POST /reset")
        self.toxics.clear()
        self.disabled.clear()


class FakeBroker:
    def __init__(self, node_id: int, container: FakeContainer) -> None:
        self.node_id = node_id
        self.name = container.name
        self.docker = container
        self.int_port = 19000 + node_id
        self.ctl_port = 19100 + node_id

    def proxy(self, path: str) -> str:
        return f"{path}-{self.node_id}"

    def status(self) -> str:
        return self.docker.status


class FakeCluster:
    def __init__(self, engine: FakeEngine, brokers: int = 3) -> None:
        self.run_id = "cfake"
        self.images = None  # the sidecar's image is stubbed below
        self.toxiproxy = FakeToxiproxy()
        self.restarts = 0
        self.restart_fails = False
        self.brokers = tuple(
            FakeBroker(i, FakeContainer(f"chaos-cfake-kafka-{i}", Netns())) for i in range(1, brokers + 1)
        )
        engine.brokers.update({b.docker.id: b.docker for b in self.brokers})
        self.toxiproxy_docker = FakeContainer("chaos-cfake-toxiproxy", Netns())
        engine.brokers[self.toxiproxy_docker.id] = self.toxiproxy_docker  # the meter joins its namespace

    def toxiproxy_container_id(self) -> str:
        return self.toxiproxy_docker.id

    def proxy_specs(self, broker: FakeBroker) -> list[ProxySpec]:
        ports = {"ext": 9000, "int": 19000, "ctl": 19100}
        return [
            ProxySpec(broker.proxy(path), f"0.0.0.0:{base + broker.node_id}", f"{broker.name}:9092")
            for path, base in ports.items()
        ]

    def broker(self, node_id: int) -> FakeBroker:
        for broker in self.brokers:
            if broker.node_id == node_id:
                return broker
        raise FaultError(f"no broker {node_id}")

    def netns(self, node_id: int) -> Netns:
        return self.broker(node_id).docker.netns

    def reset_toxiproxy(self) -> None:
        if self.restart_fails:
            raise ToxiproxyError("the Toxiproxy container did not restart")
        self.restarts += 1
        self.toxiproxy_docker.netns = Netns()  # a restarted container: a new namespace
        self.toxiproxy.wedged.clear()
        self.toxiproxy.reset()

    def restart_broker(self, node_id: int, timeout_s: float = 90.0, *, fresh: bool = False) -> float:
        self.broker(node_id).docker.status = "running"
        return 0.0


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    fake = FakeEngine()
    monkeypatch.setattr(network, "docker_client", lambda: fake)
    monkeypatch.setattr(chaos.cluster.engine, "docker_client", lambda: fake)
    monkeypatch.setattr(network, "sidecar_image", lambda images=None: "chaos-harness/jre-base:test")
    return fake


@pytest.fixture
def cluster(engine: FakeEngine) -> FakeCluster:
    return FakeCluster(engine)


def _k(cluster: FakeCluster) -> Any:
    """The fake where the library wants a KafkaCluster."""
    return cluster


def _events(log: FaultLog) -> list[tuple[str, FaultRecord]]:
    events: list[tuple[str, FaultRecord]] = []
    log.subscribe(lambda action, record: events.append((action, record)))
    return events


def _make(kind: Any, cluster: FakeCluster, *args: Any, log: FaultLog | None = None, **kwargs: Any) -> Any:
    return kind(cluster, *args, log=log or FaultLog(), **kwargs)


# ---- one chain per fault ----------------------------------------------------------------------------


def test_a_network_cut_installs_its_own_chain_and_jumps(cluster: FakeCluster) -> None:
    cut = _make(NetworkCut, cluster, 1).inject()
    assert re.fullmatch(r"CHAOS-[0-9a-f]{8}", cut.chain)
    netns = cluster.netns(1)
    assert netns.user_chains() == [cut.chain]
    assert netns.rules() == [
        f"-A INPUT ! -i lo -j {cut.chain}",
        f"-A OUTPUT ! -o lo -j {cut.chain}",
        f"-A {cut.chain} -j DROP",
    ]
    assert cluster.netns(2).rules() == []
    cut.heal()
    assert (netns.rules(), netns.user_chains()) == ([], [])
    assert not any(c[2] in ("-F", "-X") and c[3] in BUILTINS for c in netns.commands)


def test_two_faults_on_one_broker_heal_independently(cluster: FakeCluster) -> None:
    netns = cluster.netns(1)
    netns.run(["iptables", "-w", "-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT"])  # not ours
    foreign = "-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT"
    cut = _make(NetworkCut, cluster, 1).inject()
    fetch = _make(ReplicationCut, cluster, 1, 2).inject()
    assert cut.chain != fetch.chain
    cut.heal()
    assert netns.user_chains() == [fetch.chain]
    assert netns.rules() == [
        foreign,
        f"-A OUTPUT -j {fetch.chain}",
        f"-A {fetch.chain} -p tcp -m tcp --dport 19002 -j DROP",
    ]
    fetch.heal()
    assert (netns.rules(), netns.user_chains()) == ([foreign], [])
    assert [c for c in netns.commands if c[2] == "-F"] == [
        ["iptables", "-w", "-F", cut.chain],
        ["iptables", "-w", "-F", fetch.chain],
    ]


def test_a_partition_puts_one_chain_in_every_broker_and_removes_them(cluster: FakeCluster) -> None:
    split = _make(Partition, cluster, [[1], [2, 3]]).inject()
    for node_id in (1, 2, 3):
        assert cluster.netns(node_id).user_chains() == [split.chain]
    assert cluster.netns(1).rules()[1:] == [
        f"-A {split.chain} -p tcp -m tcp --dport {port} -j DROP" for port in (19002, 19102, 19003, 19103)
    ]
    split.heal()
    assert all(cluster.netns(n).rules() == [] and cluster.netns(n).user_chains() == [] for n in (1, 2, 3))


# ---- the backend that installed it ------------------------------------------------------------------


def test_the_backend_that_installed_the_chain_removes_it(cluster: FakeCluster) -> None:
    netns = cluster.netns(1)
    netns.broken.add("iptables")
    cut = _make(NetworkCut, cluster, 1).inject()
    assert netns.user_chains("iptables-legacy") == [cut.chain]
    installed = len(netns.commands)
    cut.heal()
    assert {c[0] for c in netns.commands[installed:]} == {"iptables-legacy"}
    assert netns.rules("iptables-legacy") == []
    assert netns.user_chains("iptables-legacy") == []
    assert any(cut.chain in n and "iptables-legacy" in n for n in cut.record.notes)


def test_a_partial_install_is_undone_before_the_other_backend(cluster: FakeCluster) -> None:
    netns = cluster.netns(1)
    netns.fail["iptables", "-I"] = 1  # the chain and its DROP exist, the first jump failed
    cut = _make(NetworkCut, cluster, 1).inject()
    assert (netns.rules("iptables"), netns.user_chains("iptables")) == ([], [])
    assert netns.user_chains("iptables-legacy") == [cut.chain]
    cut.heal()
    assert netns.user_chains("iptables-legacy") == []


def test_every_backend_failing_fails_the_inject_and_leaves_nothing(
    cluster: FakeCluster, engine: FakeEngine
) -> None:
    netns = cluster.netns(1)
    netns.broken.update(BACKENDS)
    log = FaultLog()
    cut = _make(NetworkCut, cluster, 1, log=log)
    with pytest.raises(FaultError, match="with every backend"):
        cut.inject()
    assert not cut.active
    assert log.active() == []
    assert engine.live() == []


# ---- a failed heal is recorded, kept active and retried ---------------------------------------------


def test_a_failed_removal_raises_and_the_fault_stays_active(cluster: FakeCluster) -> None:
    log = FaultLog()
    events = _events(log)
    cut = _make(NetworkCut, cluster, 1, log=log).inject()
    cluster.netns(1).fail["iptables", "-X"] = 1
    with pytest.raises(FaultError) as raised:
        cut.heal()
    message = str(raised.value)
    assert "broker 1" in message
    assert cut.chain in message
    assert "fix:" in message
    assert cut.active
    assert log.active() == [cut]
    (record,) = log.records()
    assert record.healed_at is None
    assert record.heal_attempts == 1
    assert record.error is not None
    assert record.error.startswith("heal failed")
    assert [action for action, _ in events] == ["inject"]  # a failed attempt is no heal event

    before = time.time()
    cut.heal()  # the retry
    (record,) = log.records()
    assert not cut.active
    assert log.active() == []
    assert record.healed_at is not None
    assert record.healed_at >= before
    assert (record.error, record.heal_attempts) == (None, 2)
    assert any("heal attempt 1 failed" in note for note in record.notes)
    assert [action for action, _ in events] == ["inject", "heal"]
    assert cluster.netns(1).user_chains() == []


def test_the_check_after_removal_catches_a_leftover(cluster: FakeCluster) -> None:
    cut = _make(NetworkCut, cluster, 1).inject()
    cluster.netns(1).lying_delete = True
    with pytest.raises(FaultError, match=rf"{cut.chain} in broker 1's namespace .* still there"):
        cut.heal()
    assert cut.active
    assert cut.record.healed_at is None


def test_only_the_brokers_not_yet_cleaned_are_retried(cluster: FakeCluster) -> None:
    split = _make(Partition, cluster, [[1], [2, 3]]).inject()
    cluster.netns(2).fail["iptables", "-F"] = 1
    with pytest.raises(FaultError, match="broker 2"):
        split.heal()
    assert [cluster.netns(n).user_chains() for n in (1, 2, 3)] == [[], [split.chain], []]
    counts = [len(cluster.netns(n).commands) for n in (1, 2, 3)]
    split.heal()
    assert [len(cluster.netns(n).commands) for n in (1, 3)] == [counts[0], counts[2]]
    assert cluster.netns(2).user_chains() == []
    assert not split.active


def test_heal_all_retries_a_failed_heal_until_it_succeeds(cluster: FakeCluster) -> None:
    log = FaultLog()
    cut = _make(NetworkCut, cluster, 2, log=log).inject()
    cluster.netns(2).fail["iptables", "-D"] = 2
    actions = heal_all(_k(cluster), log, backoff_s=0)
    assert f"healed {cut!r} (attempt 3)" in actions
    (record,) = log.records()
    assert record.healed_at is not None
    assert (record.error, record.heal_attempts) == (None, 3)
    assert cluster.netns(2).rules() == []


def test_heal_all_gives_up_after_its_attempts_and_says_so(cluster: FakeCluster) -> None:
    log = FaultLog()
    cut = _make(NetworkCut, cluster, 2, log=log).inject()
    cluster.netns(2).fail["iptables", "-D"] = 10
    with pytest.raises(FaultError, match=r"1 fault\(s\) of run cfake still not healed after their retries"):
        heal_all(_k(cluster), log, backoff_s=0)
    (record,) = log.records()
    assert (record.healed_at, record.heal_attempts) == (None, 3)
    assert record.error is not None
    assert "heal failed" in record.error
    assert log.active() == [cut]
    assert cluster.netns(2).user_chains() == [cut.chain]  # honest: the cut is still there


def test_heal_all_heals_the_faults_of_other_logs_on_its_cluster(cluster: FakeCluster) -> None:
    theirs = FaultLog()
    cut = _make(NetworkCut, cluster, 3, log=theirs).inject()
    heal_all(_k(cluster), FaultLog(), backoff_s=0)
    assert not cut.active
    (record,) = theirs.records()
    assert record.healed_at is not None
    assert cluster.netns(3).user_chains() == []


# ---- the sidecar or the broker gone -------------------------------------------------------------------


@pytest.mark.parametrize("how", ["expired", "removed"])
def test_a_gone_sidecar_is_replaced_by_a_new_one_in_the_brokers_namespace(
    cluster: FakeCluster, engine: FakeEngine, how: str
) -> None:
    cut = _make(NetworkCut, cluster, 1).inject()
    (first,) = engine.sidecars
    if how == "expired":
        first.status = "exited"
    else:
        first.removed = True
    cut.heal()
    assert len(engine.sidecars) == 2
    second = engine.sidecars[1]
    assert second.run["network_mode"] == f"container:{cluster.broker(1).docker.id}"
    assert second.run["cap_add"] == ["NET_ADMIN"]
    assert cluster.netns(1).user_chains() == []
    assert engine.live() == []
    assert not cut.active


def test_a_stopped_broker_took_its_rules_along_healed_with_a_note(
    cluster: FakeCluster, engine: FakeEngine
) -> None:
    cut = _make(NetworkCut, cluster, 1).inject()
    engine.sidecars[0].status = "exited"  # the sidecar died with the namespace it shared
    cluster.broker(1).docker.status = "exited"
    cut.heal()
    assert not cut.active
    assert len(engine.sidecars) == 1  # no new sidecar: there is no namespace to join
    assert any("network namespace" in note and cut.chain in note for note in cut.record.notes)
    assert cut.record.error is None


def test_a_restarted_broker_has_a_clean_namespace_the_heal_checks(
    cluster: FakeCluster, engine: FakeEngine
) -> None:
    cut = _make(NetworkCut, cluster, 1).inject()
    engine.sidecars[0].removed = True
    cluster.broker(1).docker.netns = Netns()  # restarted: a new namespace
    cut.heal()
    assert not cut.active
    assert cluster.broker(1).docker.netns.options() == ["iptables -S"]  # nothing there, nothing to do


def test_a_sidecar_dying_during_the_heal_fails_it_and_the_retry_starts_another(
    cluster: FakeCluster, engine: FakeEngine
) -> None:
    cut = _make(NetworkCut, cluster, 1).inject()
    first = engine.sidecars[0]
    counts = first.exec_run

    def dies(cmd: list[str]) -> tuple[int, bytes]:
        if " -L " in cmd[2]:  # the measure of its effect still works; the removal finds it dead
            return counts(cmd)
        first.status = "exited"
        raise docker.errors.APIError(f"container {first.name} is not running")

    first.exec_run = dies  # type: ignore[method-assign]
    with pytest.raises(FaultError, match=f"could not remove chain {cut.chain} from broker 1"):
        cut.heal()
    assert cut.active
    cut.heal()
    assert len(engine.sidecars) == 2
    assert cluster.netns(1).user_chains() == []


def test_a_failed_inject_on_the_second_broker_removes_the_first(cluster: FakeCluster) -> None:
    cluster.netns(2).broken.update(BACKENDS)
    split = _make(Partition, cluster, [[1], [2, 3]])
    with pytest.raises(FaultError, match="broker 2"):
        split.inject()
    assert not split.active
    assert split.record.error is not None
    assert split.record.error.startswith("inject failed")
    assert cluster.netns(1).user_chains() == []


# ---- base: what a failed heal leaves --------------------------------------------------------------------


class Stubborn(Fault):
    kind = "stubborn"

    def __init__(self, *args: Any, failures: list[BaseException], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failures = failures

    def _inject(self) -> None:
        if self.failures and isinstance(self.failures[0], ValueError):
            raise self.failures.pop(0)

    def _heal(self) -> None:
        if self.failures:
            raise self.failures.pop(0)


def test_a_failed_undo_of_a_failed_inject_keeps_both_errors(cluster: FakeCluster) -> None:
    log = FaultLog()
    fault = _make(Stubborn, cluster, 1, log=log, failures=[ValueError("inject broke"), OSError("undo broke")])
    with pytest.raises(FaultError, match="undo broke"):
        fault.inject()
    (record,) = log.records()
    assert fault.active
    assert record.error == "inject failed: inject broke; heal failed: undo broke"
    fault.heal()
    (record,) = log.records()
    assert (record.error, record.heal_attempts) == ("inject failed: inject broke", 2)


def test_ctrl_c_in_a_heal_stays_ctrl_c_and_the_fault_stays_active(cluster: FakeCluster) -> None:
    fault = _make(Stubborn, cluster, 1, failures=[KeyboardInterrupt()]).inject()
    with pytest.raises(KeyboardInterrupt):
        fault.heal()
    assert fault.active


# ---- Toxiproxy restarts ---------------------------------------------------------------------------------


def test_a_toxiproxy_restart_records_the_toxics_it_removed(cluster: FakeCluster) -> None:
    mine, theirs = FaultLog(), FaultLog()
    events = _events(theirs)
    wedged = _make(Latency, cluster, 1, ms=500, log=mine).inject()
    other = _make(Latency, cluster, 2, ms=100, log=theirs).inject()
    refused = _make(Refuse, cluster, 3, paths=("ext",), log=theirs).inject()
    cluster.toxiproxy.wedged.add("ext-1")
    wedged.heal()
    assert cluster.restarts == 1
    assert any("healed by a Toxiproxy restart" in note for note in wedged.record.notes)
    for fault in (other, refused):
        assert not fault.active
        assert fault.record.healed_at is not None
        assert fault.record.notes[-1].startswith("healed by a Toxiproxy restart")
    assert [action for action, _ in events] == ["inject", "inject", "heal", "heal"]


def test_heal_all_records_a_toxic_its_reset_removed(cluster: FakeCluster) -> None:
    log = FaultLog()
    toxic = _make(Latency, cluster, 1, ms=500, log=log).inject()
    cluster.toxiproxy.stuck.add("ext-1")  # its removal fails, and so does the restart; POST /reset works
    cluster.restart_fails = True
    actions = heal_all(_k(cluster), log, backoff_s=0)
    assert f"healed {toxic!r} by Toxiproxy's reset" in actions
    assert not toxic.active
    assert toxic.record.heal_attempts == 3
    assert toxic.record.notes[-1] == "healed by Toxiproxy's reset (heal_all)"
    assert cluster.toxiproxy.toxics == set()


# ---- the proof that a cut landed -----------------------------------------------------------------------


def test_a_cut_that_need_not_land_says_so_in_its_effect(cluster: FakeCluster) -> None:
    cut = _make(NetworkCut, cluster, 1)
    cut.must_land = False
    cluster.netns(1).packets = 0
    cut.inject().heal()
    assert cut.record.effect is not None
    assert (cut.record.effect.observed, cut.record.effect.required) == (False, False)


def test_a_toxic_lands_when_packets_crossed_its_proxies(cluster: FakeCluster, engine: FakeEngine) -> None:
    toxiproxy = cluster.toxiproxy_docker.netns
    toxiproxy.named_packets = {"ext-1": 100, "ext-2": 5}
    toxic = _make(Latency, cluster, 1, ms=500).inject()
    toxiproxy.named_packets = {"ext-1": 130, "ext-2": 900}  # ext-1: 30 more in each of its two rules
    toxic.heal()
    assert toxic.record.effect is not None
    assert toxic.record.effect.observed
    assert toxic.record.effect.evidence == "60 packets crossed its proxies while it held (ext-1: 60)"
    meters = [c for c in engine.sidecars if c.name == "chaos-cfake-meter"]
    assert len(meters) == 1  # one meter per cluster, in Toxiproxy's namespace
    assert "-j CHAOS-METER" in " ".join(toxiproxy.rules())


def test_a_toxic_on_a_proxy_nothing_used_did_nothing(cluster: FakeCluster) -> None:
    cluster.toxiproxy_docker.netns.named_packets = {"ext-2": 5}
    toxic = _make(Latency, cluster, 2, ms=500, direction="both").inject()
    toxic.heal()
    assert toxic.record.effect is not None
    assert not toxic.record.effect.observed
    assert "no packet crossed its proxies while it held (ext-2: 0)" in toxic.record.effect.evidence


def test_a_refusal_lands_when_connection_attempts_reached_its_closed_ports(cluster: FakeCluster) -> None:
    toxiproxy = cluster.toxiproxy_docker.netns
    toxiproxy.named_packets = {"ext-1": 10, "int-1": 4, "ctl-1": 7}
    refuse = _make(Refuse, cluster, 1).inject()
    toxiproxy.named_packets = {"ext-1": 13, "int-1": 4, "ctl-1": 7}  # 3 more SYNs on ext, each rule
    refuse.heal()
    assert refuse.record.effect is not None
    assert refuse.record.effect.observed
    assert refuse.record.effect.evidence == (
        "6 packets were turned away at its proxies while it held (ext-1: 6, int-1: 0, ctl-1: 0)"
    )


def test_a_refusal_nobody_dialled_did_nothing(cluster: FakeCluster) -> None:
    cluster.toxiproxy_docker.netns.named_packets = {"ext-2": 5}
    refuse = _make(Refuse, cluster, 2, paths=("ext",)).inject()
    refuse.heal()
    assert refuse.record.effect is not None
    assert not refuse.record.effect.observed
    assert "no packet crossed its proxies while it held (ext-2: 0)" in refuse.record.effect.evidence


def test_no_effect_is_claimed_across_a_toxiproxy_restart(cluster: FakeCluster) -> None:
    cluster.toxiproxy_docker.netns.named_packets = {"ext-1": 100}
    wedged = _make(Latency, cluster, 1, ms=500).inject()
    cluster.toxiproxy.wedged.add("ext-1")
    wedged.heal()  # measured before the heal restarts Toxiproxy: landed or not, from the same meter
    assert wedged.record.effect is not None
    assert cluster.restarts == 1
    cluster.toxiproxy_docker.netns.named_packets = {"ext-2": 3}
    after = _make(Latency, cluster, 2, ms=500).inject()  # a new meter in the new namespace
    after.heal()
    assert after.record.effect is not None
    assert not after.record.effect.observed


def test_a_toxic_without_a_meter_says_why(cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_image(images: object = None) -> str:
        raise FaultError("a network fault needs an image with iptables for its sidecar")

    monkeypatch.setattr(network, "sidecar_image", no_image)
    toxic = _make(Latency, cluster, 1, ms=500).inject()
    toxic.heal()
    assert toxic.record.effect is None
    assert any("no traffic meter: a network fault needs an image" in n for n in toxic.record.notes), (
        toxic.record.notes
    )
    assert toxic.record.healed_at is not None


def test_a_cut_lands_when_its_drop_rules_matched_packets(cluster: FakeCluster) -> None:
    split = _make(Partition, cluster, [[1], [2, 3]]).inject()
    for broker in (1, 2, 3):
        cluster.netns(broker).packets = 0
    cluster.netns(2).packets = 5  # two DROP rules (broker 1's int and ctl ports) matched 5 packets each
    split.heal()
    assert split.record.effect is not None
    assert split.record.effect.observed
    evidence = "its rules dropped 10 packets (broker 1: 0, broker 2: 10, broker 3: 0)"
    assert split.record.effect.evidence == evidence


def test_a_cut_no_packet_crossed_did_nothing(cluster: FakeCluster) -> None:
    cut = _make(NetworkCut, cluster, 1).inject()
    cluster.netns(1).packets = 0
    cut.heal()
    assert cut.record.effect is not None
    assert not cut.record.effect.observed
    assert "dropped no packet (broker 1: 0)" in cut.record.effect.evidence
    assert cluster.netns(1).user_chains() == []  # measured, then healed as ever
