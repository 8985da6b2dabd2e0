"""One running instance of a team's service: a process group on this host, or a labelled container.

Both kinds answer the same calls — :meth:`ServiceInstance.start`, :meth:`~ServiceInstance.crash` (SIGKILL,
``docker kill``), :meth:`~ServiceInstance.stop` (SIGTERM then SIGKILL after the grace, ``docker stop``),
:meth:`~ServiceInstance.pause` / :meth:`~ServiceInstance.resume` (SIGSTOP / SIGCONT, ``docker pause`` /
``unpause``) and :meth:`~ServiceInstance.state` — so the service faults (:mod:`chaos.service.faults`) act on
either. The output of every start lands in the instance's log file, ``logs/<name>-<n>.log`` of the run, each
line behind its UTC time as the brokers' are (:func:`stamp_lines`; a container's from the engine).

A process runs in a session of its own (its whole process group gets the signals: a shell script that starts
a JVM is stopped with the JVM) and, started from the main thread, under ``setpriv --pdeathsig KILL``: it
dies with the harness. A container carries the cluster's label, so the cluster's reaper removes it even after
``kill -9`` of the harness, and shares the Toxiproxy container's network namespace: the brokers' advertised
addresses (``127.0.0.1:<port>``, Toxiproxy's listeners) are its own loopback there, and its traffic takes the
same proxies as the harness's clients.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from chaos.cluster.engine import LABEL, docker_client
from chaos.errors import ChaosError
from chaos.faults.client import process_state
from chaos.service.spec import Binding, ServiceSpec

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

CONTAINER_PROPERTIES_DIR: Final = "/etc/chaos-service"
SERVICE_ROLE: Final = "service"


PUMP_JOIN_S: Final = 5.0
"""How long a stop waits for the last lines of a process's output (a child that keeps the pipe open is not
waited for)."""


def stamp_lines(stream: IO[bytes], path: Path) -> None:
    """Append each line of ``stream`` to ``path`` behind its UTC time, as Docker stamps a container's (and
    so the brokers') lines: the report places the service's lines beside the brokers' around each fault."""
    with stream, path.open("ab") as log:
        for line in iter(stream.readline, b""):
            stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ ")
            log.write(stamp.encode() + line)
            log.flush()


class ServiceError(ChaosError):
    """A service instance could not be started, stopped or signalled; the message says what to check."""


@dataclass(frozen=True)
class InstanceState:
    """What the kernel or the engine says of an instance now: ``running``, ``stopped`` (frozen),
    ``exited`` (with its exit status) or ``missing``."""

    status: str
    detail: str
    exit_code: int | None = None


class ServiceInstance:
    """Instance ``index`` of a service (``<name>-<index>`` in the history and the fault records)."""

    def __init__(
        self,
        spec: ServiceSpec,
        index: int,
        binding: Binding,
        log_dir: Path,
        cluster: KafkaCluster,
        run_id: str,
    ) -> None:
        self.spec = spec
        self.index = index
        self.binding = binding
        self.cluster = cluster
        self.run_id = run_id
        self.log_path = log_dir / f"{spec.name}-{index}.log"
        self.properties_path: Path | None = None
        if spec.properties:
            self.properties_path = log_dir.parent / "service" / f"{spec.name}-{index}.properties"
        self.starts = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._container: Any = None
        self._log_offset = 0
        self._pump: threading.Thread | None = None
        self._started_at = 0.0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return f"{self.spec.name}-{self.index}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self.state().status in ("running", "stopped")

    # ---- start ----------------------------------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        properties: Path | None = None
        if self.properties_path is not None:
            properties = (
                self.properties_path
                if self.spec.kind == "process"
                else Path(CONTAINER_PROPERTIES_DIR) / self.properties_path.name
            )
        return self.binding.environment(self.spec, self.index, properties)

    def _write_properties(self) -> None:
        if self.properties_path is None:
            return
        self.properties_path.parent.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text(self.binding.properties_text(self.spec, self.index))

    def start(self) -> ServiceInstance:
        """Start the instance (again, after a crash or a stop: a new process, the same container), then wait
        for :attr:`ServiceSpec.ready_pattern` in its output when one is set."""
        with self._lock:
            if self.running:
                raise ServiceError(f"{self.name} is already running")
            self._write_properties()
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.starts += 1
            self._started_at = time.time()
            if self.spec.kind == "process":
                self._start_process()
            else:
                self._start_container()
        if self.spec.ready_pattern is not None:
            self.wait_for_output(self.spec.ready_pattern, self.spec.ready_timeout_s)
        return self

    def _start_process(self) -> None:
        assert self.spec.command is not None
        with self.log_path.open("ab") as log:
            log.write(f"--- {self.name}: start {self.starts} at {time.strftime('%H:%M:%S')}\n".encode())
            log.flush()
            self._log_offset = log.tell()
            prefix: list[str] = []
            if threading.current_thread() is threading.main_thread() and shutil.which("setpriv"):
                prefix = ["setpriv", "--pdeathsig", "KILL", "--"]  # it dies with the harness
            try:
                self._proc = subprocess.Popen(
                    [*prefix, *self.spec.argv()],
                    cwd=self.spec.cwd,
                    env={**os.environ, "PYTHONUNBUFFERED": "1", **self.environment()},
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise ServiceError(
                    f"{self.name}: could not start {self.spec.command!r} in {self.spec.cwd or os.getcwd()}: "
                    f"{exc}\n  fix: check ServiceSpec.command and cwd"
                ) from exc
        assert self._proc.stdout is not None
        self._pump = threading.Thread(
            target=stamp_lines,
            args=(self._proc.stdout, self.log_path),
            name=f"{self.name}-output",
            daemon=True,
        )
        self._pump.start()

    def _start_container(self) -> None:
        import docker.errors

        client = docker_client()
        if self._container is None:
            volumes = {}
            if self.properties_path is not None:
                volumes[str(self.properties_path.parent)] = {"bind": CONTAINER_PROPERTIES_DIR, "mode": "ro"}
            try:
                self._container = client.containers.create(
                    self.spec.image,
                    name=f"chaos-{self.cluster.run_id}-{self.run_id[-6:]}-{self.name}",
                    labels={LABEL: self.cluster.run_id, f"{LABEL}.role": SERVICE_ROLE},
                    environment=self.environment(),
                    network_mode=f"container:{self.cluster.toxiproxy_container_id()}",
                    volumes=volumes,
                    detach=True,
                )
            except docker.errors.ImageNotFound as exc:
                raise ServiceError(
                    f"{self.name}: image {self.spec.image} is not in the local engine\n"
                    "  fix: build it first (the example: `python -m chaos.service.examples ensure`)"
                ) from exc
        self._container.start()

    def wait_for_output(self, pattern: str, timeout_s: float) -> float:
        """Wait until the current start's output matches ``pattern``; the seconds it took."""
        regex = re.compile(pattern)
        began = time.monotonic()
        while time.monotonic() - began < timeout_s:
            if regex.search(self.output()):
                return time.monotonic() - began
            if self.state().status in ("exited", "missing"):
                break
            time.sleep(0.2)
        raise ServiceError(
            f"{self.name} did not write /{pattern}/ within {timeout_s:.0f} s (state {self.state().detail}); "
            f"its last lines:\n{self.tail()}\n  fix: check the service's log {self.log_path}"
        )

    def output(self) -> str:
        """What the current start wrote so far."""
        if self.spec.kind == "process":
            try:
                with self.log_path.open("rb") as log:
                    log.seek(self._log_offset)
                    return log.read().decode(errors="replace")
            except OSError:
                return ""
        if self._container is None:
            return ""
        with contextlib.suppress(Exception):
            return str(self._container.logs(since=self._started_at - 1).decode(errors="replace"))
        return ""

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    # ---- state and signals ----------------------------------------------------------------------------

    def state(self) -> InstanceState:
        if self.spec.kind == "process":
            if self._proc is None:
                return InstanceState("missing", "never started")
            code = self._proc.poll()
            if code is not None:
                return InstanceState("exited", f"process {self._proc.pid} exited with {code}", code)
            letter = process_state(self._proc.pid)
            if letter is None:
                return InstanceState("missing", f"process {self._proc.pid} is gone")
            if letter in "Tt":
                return InstanceState("stopped", f"process {self._proc.pid} is stopped (state {letter})")
            return InstanceState("running", f"process {self._proc.pid} runs (state {letter})")
        if self._container is None:
            return InstanceState("missing", "never started")
        import docker.errors

        try:
            self._container.reload()
        except docker.errors.NotFound:
            return InstanceState("missing", f"container {self._container.name} is gone")
        status = self._container.status
        detail = f"container {self._container.name} is {status}"
        if status in ("exited", "dead"):
            code = self._container.attrs.get("State", {}).get("ExitCode")
            return InstanceState("exited", f"{detail} (exit code {code})", code)
        if status == "paused":
            return InstanceState("stopped", detail)
        if status in ("running", "restarting"):
            return InstanceState("running", detail)
        return InstanceState("exited" if status == "created" else status, detail)

    def _signal(self, signum: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signum)

    def _need_running(self, what: str) -> None:
        if not self.running:
            raise ServiceError(
                f"cannot {what} {self.name}: it is not running ({self.state().detail}); start it first"
            )

    def crash(self) -> None:
        """SIGKILL (``docker kill``): nothing is flushed, committed or handed over."""
        self._need_running("crash")
        if self.spec.kind == "process":
            self._signal(signal.SIGKILL)
            assert self._proc is not None
            self._proc.wait(10.0)
        else:
            self._container.kill()

    def stop(self, grace_s: float | None = None) -> int | None:
        """A graceful stop: SIGTERM (``docker stop``), SIGKILL after ``grace_s`` (the spec's by default);
        the exit status. Nothing to do when it is not running."""
        grace = self.spec.stop_grace_s if grace_s is None else grace_s
        if self.spec.kind == "process":
            if self._proc is None:
                return None
            if self._proc.poll() is None:
                self._signal(signal.SIGTERM)
                self._signal(signal.SIGCONT)  # a frozen service handles the SIGTERM once it runs
                try:
                    self._proc.wait(grace)
                except subprocess.TimeoutExpired:
                    self._signal(signal.SIGKILL)
                    self._proc.wait(10.0)
            if self._pump is not None:
                self._pump.join(PUMP_JOIN_S)  # its last lines into the log before the run reads it
            return self._proc.returncode
        if self._container is None:
            return None
        state = self.state()
        if state.status == "stopped":
            self._container.unpause()
        if state.status in ("running", "stopped"):
            self._container.stop(timeout=int(max(grace, 1)))
        return self.state().exit_code

    def pause(self) -> None:
        """Freeze every thread (SIGSTOP to the process group, ``docker pause``) with its sockets open."""
        self._need_running("pause")
        if self.spec.kind == "process":
            self._signal(signal.SIGSTOP)
            deadline = time.monotonic() + 5.0  # the signal is delivered asynchronously
            while self.state().status == "running" and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            self._container.pause()

    def resume(self) -> None:
        """Thaw it (SIGCONT, ``docker unpause``); nothing to do when it is not frozen."""
        if self.state().status != "stopped":
            return
        if self.spec.kind == "process":
            self._signal(signal.SIGCONT)
        else:
            self._container.unpause()

    def close(self) -> None:
        """Stop it, and for a container keep its output in the log file and remove it."""
        try:
            self.stop()
        finally:
            if self._container is not None:
                with contextlib.suppress(Exception):
                    self.log_path.write_bytes(self._container.logs(timestamps=True))
                with contextlib.suppress(Exception):
                    self._container.remove(force=True)
