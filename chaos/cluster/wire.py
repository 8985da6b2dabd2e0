"""Kafka requests spoken directly on a socket, for what no client library here exposes.

* ``api_versions`` — the cheapest request every broker answers: times one request/response round
  trip through a given address (a broker's proxy), without librdkafka's connection management.
* ``quorum_leader`` — DescribeQuorum on ``__cluster_metadata``: the id of the active KRaft controller.
  Brokers forward it to the controller. (Metadata responses name a *random* broker as "controller" in
  KRaft, so the admin API cannot tell.)
* ``metadata``, ``find_group_coordinator``, ``describe_group`` — what a faulted cluster still answers.
* ``alter_partition_reassignments``, ``unregister_broker`` — cluster operations the Java admin client has
  and confluent-kafka does not (:mod:`chaos.faults.operations`).
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from dataclasses import dataclass

from chaos.errors import ClusterError, KafkaErrorAnswer

_API_VERSIONS = 18
_DESCRIBE_QUORUM = 55
_CLIENT_ID = b"chaos-probe"
_correlation = itertools.count(1)


@dataclass(frozen=True)
class RoundTrip:
    """One request/response: time to connect, time from request sent to response read."""

    connect_s: float
    request_s: float


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _header(api_key: int, version: int, correlation: int, flexible: bool) -> bytes:
    head = struct.pack(">hhih", api_key, version, correlation, len(_CLIENT_ID)) + _CLIENT_ID
    return head + (b"\x00" if flexible else b"")


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(chunks)} of {size} bytes")
        chunks.extend(chunk)
    return bytes(chunks)


def _exchange(sock: socket.socket, payload: bytes, correlation: int) -> bytes:
    sock.sendall(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    body = _recv_exact(sock, size)
    (got,) = struct.unpack(">i", body[:4])
    if got != correlation:
        raise ClusterError(f"Kafka answered correlation id {got}, expected {correlation}")
    return body[4:]


def api_versions(host: str, port: int, timeout_s: float = 10.0) -> RoundTrip:
    """Connect to ``host:port`` and time one ApiVersions v0 request; socket errors propagate."""
    correlation = next(_correlation)
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        connected = time.monotonic()
        body = _exchange(sock, _header(_API_VERSIONS, 0, correlation, flexible=False), correlation)
        done = time.monotonic()
    (error,) = struct.unpack(">h", body[:2])
    if error:
        raise ClusterError(f"ApiVersions to {host}:{port} failed with Kafka error code {error}")
    return RoundTrip(connected - started, done - connected)


def quorum_leader(host: str, port: int, timeout_s: float = 5.0) -> int:
    """The active controller's node id, from DescribeQuorum v0 sent to the broker at ``host:port``."""
    return quorum_leader_epoch(host, port, timeout_s)[0]


def quorum_leader_epoch(host: str, port: int, timeout_s: float = 5.0) -> tuple[int, int]:
    """The active controller's node id and its leader epoch as the broker at ``host:port`` sees them
    (DescribeQuorum v0): during an election a broker's answer may be a stale leader with a lower epoch."""
    correlation = next(_correlation)
    topic = b"__cluster_metadata"
    body = (
        _uvarint(2)  # topics: compact array of one
        + _uvarint(len(topic) + 1)
        + topic
        + _uvarint(2)  # partitions: compact array of one
        + struct.pack(">i", 0)
        + b"\x00"  # partition tagged fields
        + b"\x00"  # topic tagged fields
        + b"\x00"  # request tagged fields
    )
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        answer = _exchange(sock, _header(_DESCRIBE_QUORUM, 0, correlation, flexible=True) + body, correlation)
    pos = 0
    _, pos = _read_uvarint(answer, pos)  # response header tagged fields
    (error,) = struct.unpack_from(">h", answer, pos)
    pos += 2
    if error:
        raise ClusterError(f"DescribeQuorum via {host}:{port} failed with Kafka error code {error}")
    _, pos = _read_uvarint(answer, pos)  # topics array length
    name_len, pos = _read_uvarint(answer, pos)
    pos += name_len - 1
    _, pos = _read_uvarint(answer, pos)  # partitions array length
    _index, partition_error, leader, epoch = struct.unpack_from(">ihii", answer, pos)
    if partition_error:
        raise ClusterError(f"DescribeQuorum via {host}:{port}: partition error code {partition_error}")
    return int(leader), int(epoch)


_METADATA = 3
_METADATA_VERSION = 4


@dataclass(frozen=True)
class WirePartition:
    topic: str
    partition: int
    error: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class WireMetadata:
    """A Metadata v4 answer from one broker: its view of the brokers (as advertised) and the partitions."""

    brokers: tuple[tuple[int, str, int], ...]
    partitions: tuple[WirePartition, ...]
    topic_errors: tuple[tuple[str, int], ...]


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return tuple(int(v) for v in values)

    def string(self) -> str | None:
        (size,) = self.take(">h")
        if size < 0:
            return None
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw.decode()

    def skip_bytes(self) -> None:
        (size,) = self.take(">i")
        self.pos += max(size, 0)

    def int_array(self) -> tuple[int, ...]:
        (count,) = self.take(">i")
        return self.take(f">{max(count, 0)}i") if count > 0 else ()


def metadata(host: str, port: int, topics: list[str] | None = None, timeout_s: float = 5.0) -> WireMetadata:
    """Metadata v4 for ``topics`` (all topics when None) from the broker at ``host:port`` only."""
    correlation = next(_correlation)
    if topics is None:
        body = struct.pack(">i", -1)
    else:
        body = struct.pack(">i", len(topics))
        for name in topics:
            encoded = name.encode()
            body += struct.pack(">h", len(encoded)) + encoded
    body += b"\x00"  # allow_auto_topic_creation = false
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        answer = _exchange(
            sock, _header(_METADATA, _METADATA_VERSION, correlation, flexible=False) + body, correlation
        )
    r = _Reader(answer)
    r.take(">i")  # throttle time
    (broker_count,) = r.take(">i")
    brokers = []
    for _ in range(broker_count):
        (node,) = r.take(">i")
        broker_host = r.string() or ""
        (broker_port,) = r.take(">i")
        r.string()  # rack
        brokers.append((node, broker_host, broker_port))
    r.string()  # cluster id
    r.take(">i")  # controller id (a random broker in KRaft)
    (topic_count,) = r.take(">i")
    partitions: list[WirePartition] = []
    errors: list[tuple[str, int]] = []
    for _ in range(topic_count):
        (topic_error,) = r.take(">h")
        name = r.string() or ""
        r.take(">b")  # is_internal
        if topic_error:
            errors.append((name, topic_error))
        (partition_count,) = r.take(">i")
        for _ in range(partition_count):
            error, index, leader = r.take(">hii")
            replicas = r.int_array()
            isr = r.int_array()
            partitions.append(WirePartition(name, index, error, leader, replicas, isr))
    partitions.sort(key=lambda p: (p.topic, p.partition))
    return WireMetadata(tuple(sorted(brokers)), tuple(partitions), tuple(errors))


_FIND_COORDINATOR = 10
COORDINATOR_NOT_AVAILABLE = 15


GROUP_KEY, TRANSACTION_KEY = 0, 1
"""FindCoordinator's key types: a consumer group, a ``transactional.id``."""


def find_group_coordinator(
    host: str, port: int, group: str, timeout_s: float = 5.0, key_type: int = GROUP_KEY
) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator v2 for consumer group ``group`` (``key_type``
    :data:`TRANSACTION_KEY`: for the ``transactional.id`` ``group``), asked of one broker.

    Error 15 (COORDINATOR_NOT_AVAILABLE) is normal while __consumer_offsets (__transaction_state) is being
    created: retry.
    """
    correlation = next(_correlation)
    key = group.encode()
    body = struct.pack(">h", len(key)) + key + struct.pack(">b", key_type)
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        answer = _exchange(
            sock, _header(_FIND_COORDINATOR, 2, correlation, flexible=False) + body, correlation
        )
    r = _Reader(answer)
    r.take(">i")  # throttle
    (error,) = r.take(">h")
    r.string()  # error message
    (node,) = r.take(">i")
    return error, node


_DESCRIBE_GROUPS = 15
COORDINATOR_LOAD_IN_PROGRESS = 14
NOT_COORDINATOR = 16


@dataclass(frozen=True)
class WireGroup:
    """A DescribeGroups v1 answer for one group: error code, state (``Stable``, ``PreparingRebalance``,
    ``CompletingRebalance``, ``Empty``, ``Dead``) and member ids."""

    error: int
    state: str
    members: tuple[str, ...]


def describe_group(host: str, port: int, group: str, timeout_s: float = 5.0) -> WireGroup:
    """DescribeGroups v1 for ``group``, asked of the broker at ``host:port`` (its coordinator, else error 16).

    The AdminClient's ``describe_consumer_groups`` is avoided on purpose: when its requests time out (a
    faulted or starved broker) librdkafka can abort the process (librdkafka#4605, assertion
    ``eonce->refcnt > 0``, seen here twice); a socket request fails with an exception instead.
    """
    correlation = next(_correlation)
    key = group.encode()
    body = struct.pack(">ih", 1, len(key)) + key
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        answer = _exchange(
            sock, _header(_DESCRIBE_GROUPS, 1, correlation, flexible=False) + body, correlation
        )
    r = _Reader(answer)
    r.take(">i")  # throttle
    (count,) = r.take(">i")
    if count != 1:
        raise ClusterError(f"DescribeGroups via {host}:{port} answered {count} groups for one asked")
    (error,) = r.take(">h")
    r.string()  # group id
    state = r.string() or ""
    r.string()  # protocol type
    r.string()  # protocol data
    (member_count,) = r.take(">i")
    members = []
    for _ in range(max(member_count, 0)):
        members.append(r.string() or "")
        r.string()  # client id
        r.string()  # client host
        r.skip_bytes()  # member metadata
        r.skip_bytes()  # member assignment
    return WireGroup(error, state, tuple(sorted(members)))


_ALTER_REASSIGNMENTS = 45
_UNREGISTER_BROKER = 64


def _compact_string(text: str) -> bytes:
    raw = text.encode()
    return _uvarint(len(raw) + 1) + raw


def _read_compact_string(r: _Reader) -> str | None:
    size, r.pos = _read_uvarint(r.data, r.pos)
    if size == 0:
        return None
    raw = r.data[r.pos : r.pos + size - 1]
    r.pos += size - 1
    return raw.decode()


def _skip_tags(r: _Reader) -> None:
    count, r.pos = _read_uvarint(r.data, r.pos)
    for _ in range(count):
        _tag, r.pos = _read_uvarint(r.data, r.pos)
        size, r.pos = _read_uvarint(r.data, r.pos)
        r.pos += size


def _flexible_call(host: str, port: int, api_key: int, body: bytes, timeout_s: float) -> _Reader:
    """Send a flexible (v0, tagged-fields) request; the response past its header's tagged fields."""
    correlation = next(_correlation)
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        answer = _exchange(sock, _header(api_key, 0, correlation, flexible=True) + body, correlation)
    r = _Reader(answer)
    _skip_tags(r)
    return r


def _raise_for(what: str, error: int, message: str | None) -> None:
    if error:
        raise KafkaErrorAnswer(
            f"{what} failed with Kafka error code {error}" + (f": {message}" if message else ""), error
        )


def alter_partition_reassignments(
    host: str, port: int, topic: str, replicas: dict[int, tuple[int, ...]], timeout_s: float = 30.0
) -> None:
    """AlterPartitionReassignments v0 through the broker at ``host:port`` (which forwards it to the
    controller): move each partition of ``topic`` to its ``replicas`` (the first is the preferred leader).
    Returns once the controller accepted it; the replicas catch up after. Raises naming the error code."""
    body = struct.pack(">i", int(timeout_s * 1000)) + _uvarint(2) + _compact_string(topic)
    body += _uvarint(len(replicas) + 1)
    for partition, ids in sorted(replicas.items()):
        body += (
            struct.pack(">i", partition)
            + _uvarint(len(ids) + 1)
            + b"".join(struct.pack(">i", i) for i in ids)
        )
        body += b"\x00"  # partition tagged fields
    body += b"\x00\x00"  # topic, request tagged fields
    r = _flexible_call(host, port, _ALTER_REASSIGNMENTS, body, timeout_s + 5.0)
    r.take(">i")  # throttle
    (error,) = r.take(">h")
    _raise_for(f"AlterPartitionReassignments of {topic} via {host}:{port}", error, _read_compact_string(r))
    topics, r.pos = _read_uvarint(r.data, r.pos)
    for _ in range(max(topics - 1, 0)):
        name = _read_compact_string(r)
        partitions, r.pos = _read_uvarint(r.data, r.pos)
        for _ in range(max(partitions - 1, 0)):
            (index,) = r.take(">i")
            (code,) = r.take(">h")
            _raise_for(f"reassigning {name}-{index} via {host}:{port}", code, _read_compact_string(r))
            _skip_tags(r)
        _skip_tags(r)


def unregister_broker(host: str, port: int, broker_id: int, timeout_s: float = 10.0) -> None:
    """UnregisterBroker v0 through the broker at ``host:port``: remove ``broker_id``'s registration from the
    KRaft metadata (the broker must be shut down: fenced). Raises naming the error code."""
    r = _flexible_call(host, port, _UNREGISTER_BROKER, struct.pack(">i", broker_id) + b"\x00", timeout_s)
    r.take(">i")  # throttle
    (error,) = r.take(">h")
    _raise_for(f"UnregisterBroker {broker_id} via {host}:{port}", error, _read_compact_string(r))
