"""Two Kafka requests spoken directly on a socket, for measurements no client library exposes.

* ``api_versions`` — the cheapest request every broker answers: times one request/response round
  trip through a given address (a broker's proxy), without librdkafka's connection management.
* ``quorum_leader`` — DescribeQuorum on ``__cluster_metadata``: the id of the active KRaft controller.
  Brokers forward it to the controller. (Metadata responses name a *random* broker as "controller" in
  KRaft, so the admin API cannot tell.)
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from dataclasses import dataclass

from chaos.errors import ClusterError

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
    _index, partition_error, leader = struct.unpack_from(">ihi", answer, pos)
    if partition_error:
        raise ClusterError(f"DescribeQuorum via {host}:{port}: partition error code {partition_error}")
    return int(leader)
