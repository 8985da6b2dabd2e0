"""free_loopback_ports draws ports below the ephemeral range; start_on_free_ports: a start that finds a
chosen port taken is undone and retried on fresh ports."""

from __future__ import annotations

import socket
from pathlib import Path

import docker.errors
import pytest

from chaos.cluster import ports
from chaos.cluster.ports import (
    EPHEMERAL_LOW,
    PORT_ATTEMPTS,
    PORT_FLOOR,
    free_loopback_ports,
    start_on_free_ports,
    taken_port_message,
)
from chaos.errors import ClusterError, ProxyPortTaken, ToxiproxyError


def _taken(port: int, phrase: str = "port is already allocated") -> docker.errors.APIError:
    return docker.errors.APIError(
        "500 Server Error for http+docker://localhost/v1.47/containers/x/start: Internal Server Error",
        explanation=(
            f"driver failed programming external connectivity on endpoint chaos-x-toxiproxy (abc): "
            f"Bind for 127.0.0.1:{port} failed: {phrase}"
        ),
    )


class FakeStarts:
    """A start function whose first ``fail`` calls find their first port taken (wrapped as the cluster
    wraps it), and a record of every call and undo."""

    def __init__(self, fail: int, phrase: str = "port is already allocated") -> None:
        self.fail = fail
        self.phrase = phrase
        self.calls: list[list[int]] = []
        self.undone = 0

    def start(self, ports: list[int]) -> str:
        self.calls.append(ports)
        if len(self.calls) <= self.fail:
            try:
                raise _taken(ports[0], self.phrase)
            except docker.errors.APIError as exc:
                raise ClusterError(f"Toxiproxy container failed to start: {exc}") from exc
        return f"started on {ports}"

    def undo(self) -> None:
        self.undone += 1


def test_first_start_that_works_is_not_retried() -> None:
    fake = FakeStarts(fail=0)
    assert start_on_free_ports(3, fake.start, fake.undo, what="cluster t") == f"started on {fake.calls[0]}"
    assert len(fake.calls) == 1
    assert len(set(fake.calls[0])) == 3
    assert fake.undone == 0


@pytest.mark.parametrize("phrase", ["port is already allocated", "listen tcp4: bind: address already in use"])
def test_taken_port_is_undone_and_retried_with_fresh_ports(phrase: str) -> None:
    fake = FakeStarts(fail=PORT_ATTEMPTS - 1, phrase=phrase)
    result = start_on_free_ports(2, fake.start, fake.undo, what="cluster t")
    assert result == f"started on {fake.calls[-1]}"
    assert len(fake.calls) == PORT_ATTEMPTS
    assert fake.undone == PORT_ATTEMPTS - 1  # once per failed attempt, before the next one
    assert all(len(ports) == 2 for ports in fake.calls)


def test_gives_up_after_the_last_attempt_naming_the_port_and_the_fix() -> None:
    fake = FakeStarts(fail=PORT_ATTEMPTS)
    with pytest.raises(ClusterError) as caught:
        start_on_free_ports(2, fake.start, fake.undo, what="single broker smoke-1")
    message = str(caught.value)
    last_port = fake.calls[-1][0]
    assert len(fake.calls) == PORT_ATTEMPTS
    assert fake.undone == PORT_ATTEMPTS  # the last attempt's containers are removed too
    assert message.startswith(f"single broker smoke-1: port {last_port} on 127.0.0.1 was taken")
    assert f"{PORT_ATTEMPTS} starts in a row" in message
    assert f"ss -ltnp | grep :{last_port}" in message
    assert "fix:" in message


def test_other_failures_propagate_at_once() -> None:
    calls: list[list[int]] = []
    undone: list[bool] = []

    def start(ports: list[int]) -> None:
        calls.append(ports)
        raise ClusterError("Toxiproxy container failed to start: image not found")

    with pytest.raises(ClusterError, match="image not found"):
        start_on_free_ports(2, start, lambda: undone.append(True), what="cluster t")
    assert len(calls) == 1
    assert undone == []


def test_only_dockers_own_errors_count_as_a_taken_port() -> None:
    # a broker log tail quoted in our own error: a bind failure inside the container, not on the host
    inside = ClusterError("kafka-1 failed: java.net.BindException: Address already in use")
    assert taken_port_message(inside) is None
    wrapped = ClusterError("reaper failed")
    wrapped.__cause__ = _taken(4242)
    found = taken_port_message(wrapped)
    assert found is not None
    assert "127.0.0.1:4242" in found


def test_ports_are_drawn_below_the_ephemeral_range_and_are_free() -> None:
    """Docker's embedded DNS server listens on a random ephemeral port inside each container, where
    Toxiproxy listens on the published numbers: a chosen port must never be one of those."""
    chosen = free_loopback_ports(40)
    assert len(set(chosen)) == 40
    assert all(PORT_FLOOR <= port < EPHEMERAL_LOW for port in chosen)
    for port in chosen:  # free: each binds
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_skipped_and_the_kernel_picks_when_the_range_is_full(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        busy = held.getsockname()[1]
        monkeypatch.setattr(ports, "PORT_FLOOR", busy)
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: busy + 1)  # the range: the busy port alone
        chosen = free_loopback_ports(2)
        assert busy not in chosen
        assert len(set(chosen)) == 2  # the kernel's picks
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: busy + 1)
    assert free_loopback_ports(1) == [busy]  # released: the range's one port is free again
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("20000\t60999\n")
    monkeypatch.undo()
    monkeypatch.setattr(ports, "_EPHEMERAL_RANGE", range_file)
    assert ports._ephemeral_low() == 20000  # a host whose range starts lower: below it
    range_file.write_text("garbage")
    assert ports._ephemeral_low() == EPHEMERAL_LOW


def test_toxiproxy_unable_to_listen_on_a_chosen_port_counts_as_taken() -> None:
    answer = ToxiproxyError(
        "Toxiproxy answered 500 to POST /proxies {'listen': '0.0.0.0:34015'}: "
        '{"error":"listen tcp 0.0.0.0:34015: bind: address already in use","status":500}'
    )
    taken = ProxyPortTaken(str(answer))
    taken.__cause__ = answer
    wrapped = ClusterError("cluster x: proxies not created")
    wrapped.__cause__ = taken
    assert taken_port_message(wrapped) == str(answer)
    assert taken_port_message(answer) is None  # any other Toxiproxy answer is not a port matter
