"""A warm Spark that commands share: one Spark Connect server on 127.0.0.1 (``chaos spark start``).

Every command that audits with Spark starts a JVM of its own and compiles the audit's code on its first
audit — tens of CPU-seconds before any work. While the warm server is up, an audit given no master (``chaos
run``, ``chaos audit``, ``chaos gate`` and pytest sessions without ``--chaos-spark-master`` or
``$CHAOS_SPARK_MASTER``) runs on it instead (:func:`master_or`): its JVM started once, its code compiled
once. The server is a ``local[N]`` Spark (or one in front of a cluster's master) with the Kafka connector
and the class archive, set as a session of this package is (:func:`chaos.audit.spark.session_conf`); a
local one tells its sessions how many task slots it has (``spark.default.parallelism``), so each audit is
sized as a local one is (:mod:`chaos.audit.sizing`).

It runs under a small supervisor (``python -m chaos.audit.warm``), which the state file names: the server
dies with it (the kernel's parent-death signal), and it stops the server once no client has been connected
for ``idle_timeout_s``, on SIGTERM (``chaos spark stop``) and on SIGINT, removing the state file. A state
file whose supervisor is gone is stale and ignored (``chaos clean`` removes it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from chaos.audit.connector import ensure_connector_jars
from chaos.audit.spark import SESSION_ID_PARAM, check_master, command_line, is_connect, session_conf
from chaos.cluster.ports import free_loopback_ports
from chaos.errors import AuditError
from chaos.paths import cache_dir
from chaos.workload.member_child import die_with_parent

STATE_DIR_ENV: Final = "CHAOS_SPARK_SERVER_DIR"
"""Where the warm server's state file and logs are kept (default: the cache directory)."""
STATE_FILE: Final = "spark-server.json"
SUPERVISOR: Final = "chaos.audit.warm"
"""The supervisor's module, on its command line: how a pid in the state file is known to be one."""
SERVER_CLASS: Final = "org.apache.spark.sql.connect.service.SparkConnectServer"
STARTED: Final = re.compile(r"Spark Connect server started at")
IDLE_TIMEOUT_S: Final = 1800.0
START_TIMEOUT_S: Final = 120.0
POLL_S: Final = 2.0


class WarmServerError(AuditError):
    """The warm Spark server did not start or stop; the message says what its log shows."""


@dataclass(frozen=True, slots=True)
class WarmServer:
    """A running warm server, as its state file says: the supervisor's pid, the port, and its settings."""

    pid: int
    port: int
    master: str
    memory: str
    idle_timeout_s: float
    started: float
    log: str
    session_id: str

    @property
    def url(self) -> str:
        """Its address with the one server-side session every command attaches to: that session's
        analysed plans are cached, so a new process's first audit is a warm one (a session of its own paid
        ~4 s more on a 90,000-event run: docs/measurements.md)."""
        return f"sc://127.0.0.1:{self.port}/{SESSION_ID_PARAM}{self.session_id}"


def state_dir() -> Path:
    chosen = os.environ.get(STATE_DIR_ENV)
    if not chosen:
        return cache_dir()
    path = Path(chosen)
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_path() -> Path:
    return state_dir() / STATE_FILE


def log_path() -> Path:
    return state_dir() / "spark-server.log"


def running() -> WarmServer | None:
    """The warm server when it is up (its supervisor alive and its port answering), else None."""
    server = _recorded()
    if server is None or not _is_supervisor(server.pid) or not _answers(server.port):
        return None
    return server


OFF_ENV: Final = "CHAOS_SPARK_SERVER"
"""``off``: commands audit on their own Spark even while the warm server is up (the unit tests do)."""


def master_or(fallback: str) -> str:
    """The warm server's ``sc://`` URL when it is up (and ``$CHAOS_SPARK_SERVER`` is not ``off``), else
    ``fallback``."""
    if os.environ.get(OFF_ENV, "").strip().lower() == "off":
        return fallback
    server = running()
    return server.url if server is not None else fallback


def start(
    master: str = "local[2]",
    memory: str = "2g",
    idle_timeout_s: float = IDLE_TIMEOUT_S,
    timeout_s: float = START_TIMEOUT_S,
) -> WarmServer:
    """Start the warm server (or return the one that is up) and wait until it answers. ``master``: where
    its jobs run — ``local[N]`` (N task slots in its own JVM), or a cluster's master (``spark://…``)."""
    up = running()
    if up is not None:
        return up
    master = check_master(master)
    if is_connect(master) or idle_timeout_s <= 0:
        raise WarmServerError(
            f"need a master a server can run jobs on (not a Connect URL) and idle_timeout_s > 0 (got "
            f"{master}, {idle_timeout_s})"
        )
    (port,) = free_loopback_ports(1)
    log = log_path()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", SUPERVISOR, "--port", str(port), "--master", master, "--memory", memory,
             "--idle", str(idle_timeout_s)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives the command that started it, and its terminal's Ctrl-C
        )  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        server = running()
        if server is not None and server.pid == proc.pid:
            return server
        if proc.poll() is not None:
            raise WarmServerError(
                f"the warm Spark server exited {proc.returncode} as it started:\n{_tail(log)}"
            )
        time.sleep(0.5)
    proc.terminate()
    raise WarmServerError(f"the warm Spark server did not answer in {timeout_s:.0f} s:\n{_tail(log)}")


def forget_stale() -> bool:
    """Remove the state file of a warm server whose supervisor is gone; whether there was one."""
    if not state_path().exists():
        return False
    state = _state()  # an unreadable file is stale too
    if state is not None and _is_supervisor(state.get("pid")):
        return False
    with contextlib.suppress(FileNotFoundError):
        state_path().unlink()
    return True


def stop(timeout_s: float = 30.0) -> bool:
    """Stop the warm server; whether one was running. A stale state file is removed."""
    pid = (_state() or {}).get("pid")
    if not isinstance(pid, int) or not _is_supervisor(pid):
        forget_stale()
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _is_supervisor(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # its server dies with it
            break
        time.sleep(0.2)
    with contextlib.suppress(FileNotFoundError):
        state_path().unlink()
    return True


def _state() -> dict[str, Any] | None:
    """The state file's fields as written (by this version of the harness or another), or None."""
    try:
        state = json.loads(state_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _recorded() -> WarmServer | None:
    state = _state()
    try:
        return WarmServer(**state) if state is not None else None
    except TypeError:  # another version's fields
        return None


def _is_supervisor(pid: object) -> bool:
    return isinstance(pid, int) and SUPERVISOR.encode() in command_line(pid)


def _answers(port: int, timeout_s: float = 2.0) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=timeout_s):
        return True
    return False


def _tail(log: Path, chars: int = 3000) -> str:
    with contextlib.suppress(OSError):
        return log.read_text(errors="replace")[-chars:]
    return "(no log)"


def clients(port: int) -> int:
    """How many TCP connections to ``port`` on this machine are established (``/proc/net/tcp``)."""
    wanted = f"{port:04X}"
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 3 and fields[1].rsplit(":", 1)[-1] == wanted and fields[3] == "01":
                    count += 1
    return count


# ---- the supervisor ----------------------------------------------------------------------------------


_LOCAL_SLOTS: Final = re.compile(r"local\[(\d+)")


def _server_command(port: int, master: str, memory: str) -> list[str]:
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    conf = session_conf(master, memory) | {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        # the shared session lives as long as the server (which stops when no client is connected)
        "spark.connect.session.manager.defaultSessionTimeout": "30d",
    }
    slots = _LOCAL_SLOTS.match(master)
    if slots:  # read back by the audit's sizing; a cluster's slots are its own to say
        conf["spark.default.parallelism"] = slots.group(1)
    memory_setting = conf.pop("spark.driver.memory")
    args = [str(submit), "--class", SERVER_CLASS, "--master", master, "--driver-memory", memory_setting,
            "--jars", ",".join(str(p) for p in ensure_connector_jars())]  # fmt: skip
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return [*args, "spark-internal"]


def serve(port: int, master: str, memory: str, idle_timeout_s: float) -> int:
    """The supervisor: run the server, record it, stop it when idle or asked; its exit code."""
    import pyspark

    stopping: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: stopping.append(signum))
    server_log = state_dir() / "spark-server-jvm.log"
    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1"}
    with server_log.open("wb") as out:
        proc = subprocess.Popen(
            _server_command(port, master, memory), stdout=out, stderr=subprocess.STDOUT, env=env,
            preexec_fn=die_with_parent,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not STARTED.search(_tail(server_log, 1 << 20)):
            if proc.poll() is not None or stopping or time.monotonic() > deadline:
                print(f"the Spark Connect server did not start:\n{_tail(server_log)}", flush=True)
                return 1
            time.sleep(0.5)
        state = WarmServer(
            os.getpid(), port, master, memory, idle_timeout_s, time.time(), str(server_log), str(uuid.uuid4())
        )
        _warm_up(state.url)
        path = state_path()
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(state)), encoding="utf-8")
        temporary.replace(path)
        print(f"warm Spark server up at {state.url}, pid {proc.pid}", flush=True)
        last_client = time.monotonic()
        while not stopping and proc.poll() is None:
            if clients(port) > 0:
                last_client = time.monotonic()
            elif time.monotonic() - last_client > idle_timeout_s:
                print(f"no client for {idle_timeout_s:.0f} s: stopping", flush=True)
                break
            time.sleep(POLL_S)
        return 0 if proc.poll() is None else 1
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        recorded = _recorded()
        if recorded is not None and recorded.pid == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                state_path().unlink()


def _warm_up(url: str) -> None:
    """Audit a small generated run on the server's shared session before anyone else does: the JVM compiles
    the audit's code and the session caches its plans now, not in the first command's audit (on a fresh
    server a 2,000-event run's audit took 21 s, on a warmed one 6–7 s: docs/measurements.md)."""
    from chaos.audit.archive_build import TRAINING_VALUES, record_training_run
    from chaos.audit.run import audit_facts
    from chaos.audit.spark import stop_spark

    with tempfile.TemporaryDirectory(prefix="chaos-warm-up-") as tmp:
        run_dir = Path(tmp) / "warm-up"
        record_training_run(run_dir, "warm-up")
        try:
            facts = audit_facts(run_dir, engine="spark", master=url)
        finally:
            stop_spark()  # the shared session stays; this process's channel closes
    if facts.problems or facts.totals.sends != TRAINING_VALUES:
        raise WarmServerError(
            f"the warm-up audit did not see its clean run: {facts.problems}, {facts.totals}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {SUPERVISOR}", description=serve.__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--memory", default="2g")
    parser.add_argument("--idle", type=float, default=IDLE_TIMEOUT_S)
    args = parser.parse_args(argv)
    return serve(args.port, args.master, args.memory, args.idle)


if __name__ == "__main__":
    sys.exit(main())
