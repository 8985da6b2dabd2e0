"""The harness's side of the reaper: the run's label given at start, registered once, a refusal an error
at once (the reaper's own refusals are tested in Go beside its source)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

import chaos.cluster.reaper
from chaos.cluster.reaper import Reaper, reaper_name
from chaos.errors import ClusterError


class FakeReaperPort:
    """A TCP listener answering every line with ``answer``; records what it received."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.received: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                self.received.append(conn.recv(1024))
                conn.sendall(self.answer)
                if self.answer.startswith(b"ERR"):
                    continue  # closed, as the reaper does
                conn.recv(1)  # the client holds the connection until it closes it


@pytest.fixture
def no_container(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reaper's container is not started: only its port (a FakeReaperPort) answers."""
    monkeypatch.setattr(chaos.cluster.reaper, "wait_for_log", lambda *a, **k: None)
    monkeypatch.setattr(chaos.cluster.reaper, "log_tail", lambda container: "(log tail)")


def _reaper(port: int) -> Reaper:
    reaper = Reaper("chaos-harness/reaper:test", "r1", port)
    reaper.container.start = lambda: reaper.container  # type: ignore[method-assign]
    return reaper


def test_the_reaper_is_started_with_its_runs_label_and_name() -> None:
    reaper = Reaper("chaos-harness/reaper:test", "r1", 12345)
    assert reaper.container.env["CHAOS_REAPER_LABEL"] == "chaos-harness=r1"
    assert reaper_name("r1") == "chaos-r1-reaper"


@pytest.mark.usefixtures("no_container")
def test_registration_sends_the_runs_filter_once_and_holds_the_socket() -> None:
    port = FakeReaperPort(b"ACK\n")
    reaper = _reaper(port.port)
    reaper.start(timeout_s=5)
    assert port.received == [b"label=chaos-harness=r1\n"]
    assert reaper._socket is not None
    reaper._socket.close()
    port.listener.close()


@pytest.mark.usefixtures("no_container")
def test_a_refusal_fails_at_once_with_the_reapers_answer() -> None:
    port = FakeReaperPort(b"ERR label=chaos-harness=r1 is already registered by another client\n")
    reaper = _reaper(port.port)
    started = time.monotonic()
    with pytest.raises(
        ClusterError, match=r"refused to register label chaos-harness=r1: ERR .*already registered"
    ):
        reaper.start(timeout_s=20)
    assert time.monotonic() - started < 5  # not retried until the timeout
    assert len(port.received) == 1
    port.listener.close()
