"""The warm server's bookkeeping: its state file, whose record a command trusts only while the supervisor it
names runs and its port answers; the connections it counts to decide it is idle; the master a command
takes. Starting a real one, auditing on it and stopping it: tests/integration/test_spark_standalone.py."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import pytest

from chaos.audit import warm
from chaos.audit.warm import SUPERVISOR, WarmServer


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(warm.STATE_DIR_ENV, str(tmp_path))
    monkeypatch.delenv(warm.OFF_ENV, raising=False)
    return tmp_path


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def supervisor_like() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line names the supervisor's module (it only sleeps)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", SUPERVISOR])
    try:
        deadline = time.monotonic() + 10
        while not warm._is_supervisor(proc.pid) and time.monotonic() < deadline:
            assert proc.poll() is None, f"the stand-in exited {proc.returncode}"
            time.sleep(0.05)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _record(pid: int, port: int) -> WarmServer:
    server = WarmServer(pid, port, "local[2]", "2g", 60.0, 0.0, "log", "shared-session")
    warm.state_path().write_text(json.dumps(asdict(server)))
    return server


def test_a_record_counts_only_while_its_supervisor_runs_and_its_port_answers(
    state_dir: Path, listening: socket.socket, supervisor_like: subprocess.Popen[bytes]
) -> None:
    port = listening.getsockname()[1]
    assert warm.running() is None  # no record
    assert warm.master_or("local[2]") == "local[2]"
    recorded = _record(supervisor_like.pid, port)
    why = f"supervisor {warm._is_supervisor(supervisor_like.pid)}, port answers {warm._answers(port)}"
    assert warm.running() == recorded, why
    # every command attaches to the server's one session
    assert warm.master_or("local[2]") == f"sc://127.0.0.1:{port}/;session_id=shared-session"
    _record(1, port)  # pid 1 is no supervisor
    assert warm.running() is None
    _record(supervisor_like.pid, port + 1 if port < 65535 else port - 1)  # nothing listens there
    assert warm.running() is None
    assert not warm.forget_stale()  # its supervisor still runs: not stale
    assert warm.state_path().exists()


def test_off_keeps_a_command_on_its_own_spark(
    state_dir: Path,
    listening: socket.socket,
    supervisor_like: subprocess.Popen[bytes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _record(supervisor_like.pid, listening.getsockname()[1])
    monkeypatch.setenv(warm.OFF_ENV, "off")
    assert warm.master_or("local[2]") == "local[2]"


def test_a_stale_record_is_forgotten_and_stop_says_nothing_ran(state_dir: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass", SUPERVISOR])
    gone.wait()
    _record(gone.pid, 1)
    assert warm.forget_stale()
    assert not warm.state_path().exists()
    assert not warm.forget_stale()
    _record(gone.pid, 1)
    assert not warm.stop()
    assert not warm.state_path().exists()


def test_clients_counts_the_established_connections_to_a_port(listening: socket.socket) -> None:
    port = listening.getsockname()[1]
    assert warm.clients(port) == 0
    first = socket.create_connection(("127.0.0.1", port))
    second = socket.create_connection(("127.0.0.1", port))
    try:
        assert warm.clients(port) == 2
    finally:
        first.close()
        second.close()


def test_the_server_runs_as_a_session_of_this_package_is_set_and_states_its_slots() -> None:
    command = warm._server_command(15999, "local[3]", "3g")
    conf = dict(arg.split("=", 1) for arg in command if "=" in arg and arg.startswith("spark."))
    assert command[command.index("--class") + 1] == warm.SERVER_CLASS
    assert command[command.index("--master") + 1] == "local[3]"
    assert command[command.index("--driver-memory") + 1] == "3g"
    assert conf["spark.connect.grpc.binding.address"] == "127.0.0.1"
    assert conf["spark.connect.grpc.binding.port"] == "15999"
    assert conf["spark.default.parallelism"] == "3"
    assert conf["spark.connect.session.manager.defaultSessionTimeout"] == "30d"  # the shared session stays
    assert conf["spark.sql.codegen.cache.maxEntries"] == "2000"  # the local session's settings
    assert conf["spark.driver.host"] == "127.0.0.1"
    on_cluster = warm._server_command(15999, "spark://127.0.0.1:7077", "2g")
    assert not any(arg.startswith("spark.default.parallelism") for arg in on_cluster)


def test_start_refuses_a_connect_url_and_a_bad_master(state_dir: Path) -> None:
    from chaos.errors import ConfigError

    with pytest.raises(warm.WarmServerError, match="not a Connect URL"):
        warm.start(master="sc://127.0.0.1:15002")
    with pytest.raises(ConfigError, match="not a Spark master URL"):
        warm.start(master="localhost")


def test_stop_ends_the_supervisor_a_record_of_any_version_names(
    state_dir: Path, supervisor_like: subprocess.Popen[bytes]
) -> None:
    warm.state_path().write_text(json.dumps({"pid": supervisor_like.pid, "port": 1}))  # fields it lacks
    assert warm.running() is None
    assert warm.stop(timeout_s=10)
    assert supervisor_like.wait(10) == -15  # SIGTERM
    assert not warm.state_path().exists()
