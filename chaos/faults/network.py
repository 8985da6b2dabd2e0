"""Silent network faults from iptables inside a broker's network namespace.

A sidecar (the local JRE base image, which carries iptables, or ``$CHAOS_NETCUT_IMAGE``:
:func:`sidecar_image`) runs with ``network_mode=container:<broker>`` and NET_ADMIN, so its rules apply to
the broker's own interfaces.
Rules DROP (never REJECT): peers and clients see silence, not a reset — the seed's "network cut".
A sidecar carries the run's label, so the reaper and ``chaos clean`` remove it if the process dies.

**One chain per fault.** Each fault owns a chain ``CHAOS-<8 hex>`` (:attr:`IptablesFault.chain`) in every
broker namespace it cuts: the DROP rules live in the chain, and the fault adds only jumps to it from
INPUT/OUTPUT. It installs with ``iptables`` or, when that fails, ``iptables-legacy`` (a partial install is
undone first) and remembers which. Heal, per broker and with that same binary: list the rules (``-S``),
delete exactly the jumps to its chain, flush and delete the chain — each command's exit code checked —
then list again and raise :class:`~chaos.errors.FaultError` (naming the broker, the chain and the fix) if
anything of the chain is left. It never flushes INPUT/OUTPUT, so two faults on one broker heal
independently. The rules live in the broker's namespace, not in the sidecar: when the sidecar is gone
(its sleep ended, or it was killed), heal starts a fresh one in the broker's namespace; when the broker
itself is stopped or removed, its namespace — and the chain — went with it, and heal records that as a
note instead of failing. A failed heal leaves the fault active (``chaos.faults.base``) and keeps the
brokers not yet cleaned for the next attempt.

Shapes:

* ``NetworkCut(b)`` — everything to and from b except loopback: "one broker alone", clients included.
* ``Partition(groups)`` — brokers in different groups cannot reach each other on the replication and
  quorum paths; clients still reach everyone. Every peer path goes to a per-broker proxy port
  (int-j, ctl-j), so each broker drops its *outgoing* packets to the other side's proxy ports. That
  covers both directions of every peer connection (a connection is always opened towards a proxy
  port) — something Toxiproxy alone cannot do, since all peers of j share j's proxy.
* ``IsolateFromQuorum(b)`` — ``Partition([[b], rest])``: b is cut from the quorum and replication but
  still serves clients.
* ``ReplicationCut(f, l)`` — follower f cannot fetch from leader l; quorum and client paths stay open, so f
  silently leaves l's ISR. With three combined broker/controller nodes, a full cut of the follower plus a
  crash of the leader would leave one voter of three — no quorum, so no ISR change, no fencing and no
  election could be observed (docs/catalog.md ISR2/L4 need all three).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shlex
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chaos.cluster.cluster import ROLE_LABEL
from chaos.cluster.engine import LABEL, docker_client, labelled_containers
from chaos.errors import FaultError
from chaos.faults.base import Effect, Fault, FaultLog, Param
from chaos.faults.targets import Target, resolve

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster
    from chaos.cluster.images import ImageSet

SIDECAR_ROLE = "netcut"
NETCUT_IMAGE_ENV: Final = "CHAOS_NETCUT_IMAGE"
SIDECAR_LIFETIME_S = 3600  # the sidecar's sleep; heal does not need it (it starts another if it is gone)
CHAIN_PREFIX: Final = "CHAOS-"
BACKENDS: Final = ("iptables", "iptables-legacy")
GONE_STATES: Final = ("created", "exited", "dead", "removing")  # no network namespace any more

Command = list[str]
Jump = tuple[str, list[str]]  # (built-in chain, match arguments before ``-j <chain>``)


def sidecar_image(images: ImageSet | None = None) -> str:
    """The image the sidecar runs: ``$CHAOS_NETCUT_IMAGE`` (any image with ``iptables`` and ``sleep``, e.g.
    your own base image pinned by digest), else the local JRE base (it carries iptables), built once if
    missing — unless the cluster runs official images (``images``): a session that chose not to build is
    then told the fix instead of starting a root-only debootstrap mid-fault."""
    from chaos.cluster.images.catalog import Role, Source
    from chaos.cluster.images.local import ensure_local, image_present, recipes

    override = os.environ.get(NETCUT_IMAGE_ENV, "").strip()
    if override:
        return override
    tag = recipes()["jre-base"].tag
    if images is not None and images.source(Role.KAFKA) is Source.OFFICIAL and not image_present(tag):
        raise FaultError(
            "a network fault needs an image with iptables for its sidecar, and this session runs official "
            f"images without the local {tag}\n"
            f"  fix: set {NETCUT_IMAGE_ENV} to an image that carries iptables (pin it by digest), or build "
            "the local one once as root: `chaos images build jre-base`"
        )
    return ensure_local("jre-base")


@dataclass
class _Cut:
    """One fault's chain in one broker's namespace, the binary that installed it, the sidecar used."""

    broker_id: int
    chain: str
    backend: str
    sidecar: Any | None


def run_in(sidecar: Any, commands: list[Command]) -> tuple[int, str]:
    """Run iptables commands in the sidecar, stopping at the first that fails; (exit code, output)."""
    script = " && ".join(shlex.join(command) for command in commands)
    code, output = sidecar.exec_run(["sh", "-c", script])
    return int(code), output.decode(errors="replace") if isinstance(output, bytes) else str(output)


def _install_commands(backend: str, chain: str, rules: list[Command], jumps: list[Jump]) -> list[Command]:
    """Create the chain with its rules first, then the jumps: the cut starts when it is complete."""
    commands = [[backend, "-w", "-N", chain]]
    commands += [[backend, "-w", "-A", chain, *rule] for rule in rules]
    commands += [[backend, "-w", "-I", builtin, "1", *match, "-j", chain] for builtin, match in jumps]
    return commands


def _mentions(line: str, chain: str) -> bool:
    try:
        return chain in shlex.split(line)
    except ValueError:  # unbalanced quotes in a foreign rule's comment: fall back to a plain search
        return chain in line.split()


def _jumps_to(words: list[str], chain: str) -> bool:
    return any(w in ("-j", "-g") and target == chain for w, target in itertools.pairwise(words))


def _removal_commands(backend: str, chain: str, listing: str) -> list[Command]:
    """From ``iptables -S``: delete each jump to ``chain`` (as listed), then flush and delete the chain."""
    commands: list[Command] = []
    has_chain = False
    for line in listing.splitlines():
        if not _mentions(line, chain):
            continue
        words = shlex.split(line)
        if words[:2] == ["-N", chain]:
            has_chain = True
        elif words[0] == "-A" and words[1] != chain and _jumps_to(words, chain):  # from INPUT, OUTPUT
            commands.append([backend, "-w", "-D", *words[1:]])
    if has_chain:
        commands += [[backend, "-w", "-F", chain], [backend, "-w", "-X", chain]]
    return commands


def _start_sidecar(cluster: KafkaCluster, broker_id: int, for_heal: bool = False) -> Any:
    """A sidecar in ``broker_id``'s namespace. ``for_heal``: a paused broker will do, and a broker whose
    namespace is gone (stopped, removed) gives None instead of an error."""
    import docker.errors

    broker = cluster.broker(broker_id)
    wrapped = broker.docker
    try:
        wrapped.reload()
        status = str(wrapped.status)
    except docker.errors.NotFound:
        status = "removed"
    if for_heal and status in (*GONE_STATES, "removed"):
        return None
    if status != "running" and not (for_heal and status == "paused"):
        doing = "heal the cut (retry when it has settled)" if for_heal else "inject a network fault"
        raise FaultError(f"broker {broker_id} is {status}: cannot {doing}; it needs the broker running")
    name = f"chaos-{cluster.run_id}-netcut-{broker_id}-{uuid.uuid4().hex[:6]}"
    return start_sidecar_in(cluster, str(wrapped.id), name, SIDECAR_ROLE)


def start_sidecar_in(cluster: KafkaCluster, container_id: str, name: str, role: str) -> Any:
    """A labelled iptables sidecar (NET_ADMIN, sleeping) in the network namespace of ``container_id``."""
    return docker_client().containers.run(
        sidecar_image(cluster.images),
        ["sleep", str(SIDECAR_LIFETIME_S)],
        name=name,
        network_mode=f"container:{container_id}",
        cap_add=["NET_ADMIN"],
        labels={LABEL: cluster.run_id, ROLE_LABEL: role},
        detach=True,
    )


def sidecar_usable(sidecar: Any) -> bool:
    """Whether ``sidecar`` is still there and running (a removed or stopped one is not)."""
    if sidecar is None:
        return False
    try:
        sidecar.reload()
    except Exception:  # removed (docker.errors.NotFound) or the engine cannot say: start another
        return False
    return str(sidecar.status) == "running"


def _fix(cluster: KafkaCluster, cut: _Cut) -> str:
    name = cluster.broker(cut.broker_id).name
    b = cut.backend
    return (
        f"  fix: heal_all(cluster) retries; by hand: docker run --rm --network container:{name} "
        f"--cap-add NET_ADMIN <jre-base image> sh -c '{b} -S | grep {cut.chain}', delete those jumps "
        f"(-D), then `{b} -F {cut.chain}; {b} -X {cut.chain}`; or remove the run: "
        f"chaos clean --run-id {cluster.run_id}"
    )


def _remove_chain(cluster: KafkaCluster, cut: _Cut, *, backend_may_be_broken: bool = False) -> str | None:
    """Remove ``cut``'s jumps and chain with its backend and verify nothing of it is left.

    Returns a note when there was nothing to remove because the broker's namespace is gone; raises
    FaultError naming the broker, chain and fix when a command fails or something is left.
    ``backend_may_be_broken``: undoing a failed install, where a backend that cannot even list was not
    able to install anything either.
    """
    if not sidecar_usable(cut.sidecar):
        remove_sidecar(cut.sidecar)
        cut.sidecar = _start_sidecar(cluster, cut.broker_id, for_heal=True)
        if cut.sidecar is None:
            return (
                f"broker {cut.broker_id} is not running: its network namespace, and chain {cut.chain} "
                f"with it, are gone (nothing to remove)"
            )
    where = f"iptables chain {cut.chain} in broker {cut.broker_id}'s namespace ({cut.backend})"
    listing_command = [cut.backend, "-w", "-S"]
    code, listing = run_in(cut.sidecar, [listing_command])
    if code != 0:
        if backend_may_be_broken:
            return None
        raise FaultError(f"could not list {where} (exit {code}): {listing[-500:]}\n{_fix(cluster, cut)}")
    removals = _removal_commands(cut.backend, cut.chain, listing)
    if removals:
        # removals print nothing when they succeed: the output is the listing that checks them
        code, listing = run_in(cut.sidecar, [*removals, listing_command])
        if code != 0:
            raise FaultError(
                f"could not remove {where} (exit {code}): {listing[-500:]}\n{_fix(cluster, cut)}"
            )
        left = [line for line in listing.splitlines() if _mentions(line, cut.chain)]
        if left:
            raise FaultError(
                f"{where} still there after its removal: {'; '.join(left)}\n{_fix(cluster, cut)}"
            )
    return None


_COMMENT = re.compile(r"/\* (\S+) \*/")


def rule_counters(sidecar: Any, backend: str, chain: str) -> list[tuple[int, str, str | None]]:
    """Each rule of ``chain`` as (packets matched, target, its comment or None), from ``iptables -L CHAIN
    -v -x -n`` in the sidecar's namespace; raises FaultError when the listing fails."""
    code, listing = run_in(sidecar, [[backend, "-w", "-L", chain, "-v", "-x", "-n"]])
    if code != 0:
        raise FaultError(f"listing {chain} failed (exit {code}): {listing[-200:]}")
    rules = []
    for line in listing.splitlines():
        words = line.split()
        if len(words) > 2 and words[0].isdigit():
            named = _COMMENT.search(line)
            rules.append((int(words[0]), words[2], named.group(1) if named else None))
    return rules


def remove_sidecar(sidecar: Any) -> None:
    """Remove a sidecar (its faults' rules are removed by their heal, not by this)."""
    if sidecar is None:
        return
    with contextlib.suppress(Exception):
        sidecar.remove(force=True)


def remove_all_sidecars(cluster: KafkaCluster) -> list[str]:
    """Remove every iptables sidecar of this run; returns their names. The rules are the faults' to
    remove (``heal_all`` heals every live fault first): a heal does not need its sidecar."""
    removed = []
    selector = [f"{LABEL}={cluster.run_id}", f"{ROLE_LABEL}={SIDECAR_ROLE}"]
    for sidecar in labelled_containers(selector):
        remove_sidecar(sidecar)
        removed.append(str(sidecar.name))
    return removed


class IptablesFault(Fault):
    """Base of the iptables faults: its own chain :attr:`chain` in each broker namespace it cuts."""

    def __init__(self, cluster: KafkaCluster, target: Target, log: FaultLog | None = None) -> None:
        super().__init__(cluster, target, log)
        self.chain = f"{CHAIN_PREFIX}{uuid.uuid4().hex[:8]}"
        self._cuts: list[_Cut] = []

    def _cut(self, broker_id: int, rules: list[Command], jumps: list[Jump]) -> None:
        """Install this fault's chain with ``rules`` in ``broker_id``'s namespace, jumped to by ``jumps``."""
        cut = _Cut(broker_id, self.chain, BACKENDS[0], _start_sidecar(self.cluster, broker_id))
        self._cuts.append(cut)  # from here on, heal cleans it up whatever happens
        failures = []
        for backend in BACKENDS:
            cut.backend = backend
            code, output = run_in(cut.sidecar, _install_commands(backend, self.chain, rules, jumps))
            if code == 0:
                self.note(f"chain {self.chain} in broker {broker_id} ({backend})")
                return
            failures.append(f"{backend} (exit {code}): {output.strip()[-300:]}")
            _remove_chain(self.cluster, cut, backend_may_be_broken=True)  # raises if it cannot undo
            if cut.sidecar is None:  # the broker stopped meanwhile: nothing to cut any more
                failures.append(f"broker {broker_id} stopped")
                break
        self._cuts.remove(cut)
        remove_sidecar(cut.sidecar)
        raise FaultError(
            f"iptables failed in broker {broker_id}'s namespace with every backend: {'; '.join(failures)}\n"
            f"  fix: the sidecar needs NET_ADMIN and a kernel with netfilter; check `docker info`"
        )

    def _effect(self) -> Effect | None:
        """Landed when its DROP rules matched packets (iptables' own counters, read while they hold)."""
        dropped: dict[int, int] = {}
        for cut in self._cuts:
            if not sidecar_usable(cut.sidecar):  # the broker stopped meanwhile: its counters went with it
                return None
            rules = rule_counters(cut.sidecar, cut.backend, cut.chain)
            packets = sum(n for n, target, _ in rules if target == "DROP")
            dropped[cut.broker_id] = dropped.get(cut.broker_id, 0) + packets
        if not dropped:
            return None
        detail = ", ".join(f"broker {b}: {n}" for b, n in sorted(dropped.items()))
        total = sum(dropped.values())
        if total:
            return Effect(True, f"its rules dropped {total} packets ({detail})")
        return Effect(False, f"its rules dropped no packet ({detail}): no traffic crossed the cut")

    def _heal(self) -> None:
        errors: list[FaultError] = []
        for cut in list(self._cuts):
            try:
                note = _remove_chain(self.cluster, cut)
            except FaultError as exc:
                errors.append(exc)
                continue
            except Exception as exc:  # the engine failed (a sidecar died meanwhile): the retry starts one
                errors.append(
                    FaultError(
                        f"could not remove chain {cut.chain} from broker {cut.broker_id}: {exc!r}\n"
                        f"{_fix(self.cluster, cut)}"
                    )
                )
                continue
            if note is not None:
                self.note(note)
            remove_sidecar(cut.sidecar)
            self._cuts.remove(cut)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise FaultError("\n".join(str(e) for e in errors))


class NetworkCut(IptablesFault):
    """Drop every packet to and from the broker except loopback (symmetric, silent)."""

    kind = "network_cut"

    def _inject(self) -> None:
        (broker_id,) = self.brokers
        self._cut(broker_id, [["-j", "DROP"]], [("INPUT", ["!", "-i", "lo"]), ("OUTPUT", ["!", "-o", "lo"])])


def _drop_ports(ports: list[int]) -> list[Command]:
    return [["-p", "tcp", "--dport", str(port), "-j", "DROP"] for port in ports]


class Partition(IptablesFault):
    """Split the brokers into ``groups`` on the replication and quorum paths (clients unaffected).

    Brokers not named in any group form one more group.
    """

    kind = "partition"

    def __init__(
        self, cluster: KafkaCluster, groups: list[list[Target]], log: FaultLog | None = None
    ) -> None:
        super().__init__(cluster, 0, log)
        self.groups = groups
        self.resolved: list[tuple[int, ...]] = []

    @property
    def target_text(self) -> str:
        return "groups " + " | ".join(",".join(map(str, g)) for g in self.resolved or self.groups)

    def params(self) -> dict[str, Param]:
        return {"groups": tuple("|".join(",".join(map(str, g)) for g in self.resolved).split("|"))}

    def resolve_brokers(self) -> tuple[int, ...]:
        groups = [tuple(sorted({resolve(self.cluster, t) for t in group})) for group in self.groups]
        named = {b for g in groups for b in g}
        if len(named) != sum(len(g) for g in groups):
            raise FaultError(f"partition groups {groups} overlap; each broker may be in one group only")
        rest = tuple(b.node_id for b in self.cluster.brokers if b.node_id not in named)
        if rest:
            groups.append(rest)
        if len(groups) < 2:
            raise FaultError(f"partition {groups} has one side only; name at least two groups")
        self.resolved = groups
        return tuple(sorted(named | set(rest)))

    def _inject(self) -> None:
        for group in self.resolved:
            others = [b for g in self.resolved if g is not group for b in g]
            ports = [
                p for b in others for p in (self.cluster.broker(b).int_port, self.cluster.broker(b).ctl_port)
            ]
            for broker_id in group:
                self._cut(broker_id, _drop_ports(ports), [("OUTPUT", [])])


class IsolateFromQuorum(Partition):
    """One broker cut from the quorum and replication, still reachable by clients."""

    kind = "isolate_from_quorum"

    def __init__(self, cluster: KafkaCluster, target: Target, log: FaultLog | None = None) -> None:
        super().__init__(cluster, [[target]], log)
        self.target = target


class ReplicationCut(IptablesFault):
    """The follower cannot fetch from the leader; quorum and client paths stay open.

    In the follower's network namespace (a sidecar, as for :class:`NetworkCut`), DROP its outgoing TCP
    packets to the leader's replication proxy port (``int-<leader>``): its fetch requests go unanswered, it
    falls behind and leaves the leader's ISR after ``replica.lag.time.max.ms``, silently. Healed like every
    iptables fault (its own chain removed and verified gone; ``heal_all`` retries it).
    """

    kind = "replication_cut"

    def __init__(
        self, cluster: KafkaCluster, follower: Target, leader: Target, log: FaultLog | None = None
    ) -> None:
        super().__init__(cluster, follower, log)
        self.leader_target = leader
        self.leader: int | None = None

    def resolve_brokers(self) -> tuple[int, ...]:
        self.leader = resolve(self.cluster, self.leader_target)
        follower = resolve(self.cluster, self.target)
        return (follower,)

    def params(self) -> dict[str, Param]:
        return {"leader": self.leader if self.leader is not None else -1}

    def _inject(self) -> None:
        (follower,) = self.brokers
        assert self.leader is not None
        port = self.cluster.broker(self.leader).int_port
        self._cut(follower, _drop_ports([port]), [("OUTPUT", [])])
