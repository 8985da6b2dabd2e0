"""Faults on one broker's wall clock: a jump (``ClockJump``) and a drift (``ClockDrift``).

The local Kafka image's entry point preloads libfaketime into the broker's JVM
(``LD_PRELOAD``, ``FAKETIME_TIMESTAMP_FILE``; chaos/cluster/images/context/kafka/run). The library adds the
offset written in that file (``+120``, ``-30.5``: seconds) to every read of the wall clock
(``CLOCK_REALTIME``: ``System.currentTimeMillis``, ``Instant.now``) and reads the file again each second;
``FAKETIME_DONT_FAKE_MONOTONIC=1`` leaves the monotonic clock (``System.nanoTime``, the JVM's timed waits)
real, so timeouts keep their lengths. Only the broker's own process sees the offset: the host, Docker, the
other brokers and the clients keep the real time — one broker whose clock was stepped (a jump) or whose
oscillator runs fast or slow (a drift), as NTP trouble gives.

The fault writes the file inside the broker's container (``docker exec`` while it runs, ``put_archive``
when it is stopped: the file is in the container's own layer and outlives a restart, as a host clock
outlives a process restart). Heal writes ``+0``: the clock steps back to the real time. A drift rewrites
the offset every ``step_s`` from a thread of its own (libfaketime's own rate option would also scale
every sleep and poll timeout of the JVM: not a clock drift).

**Proof that it landed** (:meth:`Fault._effect`): the broker's own log timestamps (log4j's, from the JVM's
wall clock) against the time Docker received each line, for the lines logged during the window; the skew
must match the offset the fault set. When the broker logged nothing in its window, a process started under
the JVM's own preload settings reads the clock from the same file (the JVM maps the same library).

Only a cluster started with ``ClusterConfig(fake_clock=True)`` preloads it; on any other, and on the
official image (no libfaketime, and another C library), the fault refuses with
:class:`~chaos.errors.FaultUnsupported`, naming the fix.
"""

from __future__ import annotations

import io
import re
import shlex
import statistics
import tarfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from chaos.cluster.logs import docker_time
from chaos.errors import FaultError, FaultUnsupported
from chaos.faults.base import Effect, Fault, FaultLog, Param
from chaos.faults.targets import Target

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

CLOCK_FILE: Final = "/var/lib/chaos/clock"
"""Where the local image's entry point tells libfaketime to read the offset (``CHAOS_CLOCK_FILE``)."""
RELOAD_S: Final = 1.0
"""libfaketime reads the file again at most this long after it changed (``FAKETIME_CACHE_DURATION=0``: on
the first clock read of each new second)."""
SETTLE_S: Final = RELOAD_S + 0.5
"""Log lines this soon after the offset changed may still carry the previous one: not compared."""
TOLERANCE_S: Final = 0.5
"""How far a log line's skew may be from the offset the fault set (Docker receives a line some ms after the
JVM stamped it; a drift's offset moves between two writes)."""
_PRELOAD_VARS: Final = (
    "LD_PRELOAD",
    "FAKETIME_TIMESTAMP_FILE",
    "FAKETIME_DONT_FAKE_MONOTONIC",
    "NO_FAKE_STAT",
)
_LOG4J_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
_FIX = (
    "  fix: clock faults need a cluster started with ClusterConfig(fake_clock=True) on the local Kafka "
    "image, whose entry point then preloads libfaketime into the broker (CHAOS_IMAGES=local, then "
    "`chaos images ensure`); a scenario asks for it with Scenario(cluster=ClusterNeeds(fake_clock=True)); "
    "the official image cannot load it"
)


def offset_spec(seconds: float) -> str:
    """libfaketime's spelling of an offset in seconds: ``+120``, ``-30.5``, ``+0``."""
    text = f"{seconds:+.3f}".rstrip("0").rstrip(".")
    return "+0" if text in ("+", "-", "+0", "-0") else text


@dataclass(frozen=True)
class Skew:
    """One log line: when Docker received it (epoch s) and how far the JVM's stamp on it was ahead (s)."""

    received: float
    ahead_s: float


def log_skews(cluster: KafkaCluster, broker_id: int, since: float, until: float | None = None) -> list[Skew]:
    """The broker's log lines received from ``since`` (to ``until``), each with its log4j timestamp's skew
    against Docker's time of receipt (the container's zone: UTC in both images)."""
    wrapped = cluster.broker(broker_id).docker
    options: dict[str, Any] = {"timestamps": True, "since": since}
    if until is not None:
        options["until"] = until
    raw = wrapped.logs(**options).decode(errors="replace")
    skews = []
    for line in raw.splitlines():
        stamp, _, text = line.partition(" ")
        logged = _LOG4J_TIME.match(text)
        if logged is None:
            continue
        received = docker_time(stamp)
        if received is None:
            continue
        jvm = datetime.strptime(logged.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
        skews.append(Skew(received, jvm + int(logged.group(2)) / 1000 - received))
    return skews


class ClockFault(Fault):
    """Base of the clock faults: writes the offset the broker's libfaketime reads, checks it took."""

    def __init__(self, cluster: KafkaCluster, target: Target, log: FaultLog | None = None) -> None:
        super().__init__(cluster, target, log)
        self.clock_file = CLOCK_FILE
        self.set_at: float | None = None
        """When the fault first wrote its offset (epoch s)."""
        self._preload: dict[str, str] = {}

    def offset_at(self, when: float) -> float:
        """The offset (s) the fault has set at epoch ``when`` (0 before it was set)."""
        raise NotImplementedError

    def tolerance_s(self) -> float:
        """How far a log line's skew may be from :meth:`offset_at` and still count as following it."""
        return TOLERANCE_S

    def _check_supported(self, broker_id: int) -> None:
        """The broker's JVM preloads libfaketime and reads its offset file: remember where."""
        container = self.cluster.broker(broker_id).docker
        container.reload()
        if container.status != "running":
            raise FaultError(f"broker {broker_id} is {container.status}: a clock fault needs it running")
        code, output = container.exec_run(
            ["sh", "-c", "tr '\\0' '\\n' < /proc/1/environ; echo MAPS; grep -c faketime /proc/1/maps || true"]
        )
        text = output.decode(errors="replace") if isinstance(output, bytes) else str(output)
        environ, _, maps = text.partition("MAPS")
        settings = dict(line.split("=", 1) for line in environ.splitlines() if "=" in line)
        mapped = maps.strip().isdigit() and int(maps.strip()) > 0
        if code != 0 or "faketime" not in settings.get("LD_PRELOAD", "") or not mapped:
            why = (
                "its JVM does not preload libfaketime" if code == 0 else f"exit {code}: {text.strip()[-200:]}"
            )
            raise FaultUnsupported(f"broker {broker_id} cannot take a clock fault: {why}\n{_FIX}")
        self._preload = {k: settings[k] for k in _PRELOAD_VARS if k in settings}
        self.clock_file = settings.get("FAKETIME_TIMESTAMP_FILE", CLOCK_FILE)

    def write_offset(self, seconds: float) -> str | None:
        """Write ``seconds`` for the broker's libfaketime; a note when the broker's container is gone."""
        import docker.errors

        (broker_id,) = self.brokers
        container = self.cluster.broker(broker_id).docker
        spec = offset_spec(seconds)
        try:
            container.reload()
        except docker.errors.NotFound:
            return f"broker {broker_id}'s container is gone, and its clock file with it"
        if container.status == "running":
            temp = f"{self.clock_file}.{threading.get_ident()}"
            script = (
                f"printf '%s\\n' {shlex.quote(spec)} > {temp} && mv -f {temp} {shlex.quote(self.clock_file)}"
            )
            code, output = container.exec_run(["sh", "-c", script])
            if code == 0:
                return None
            raise FaultError(
                f"could not write the clock offset {spec} in broker {broker_id} (exit {code}): "
                f"{output.decode(errors='replace').strip()[-300:]}\n"
                f"  fix: heal_all(cluster) retries; by hand: docker exec {container.name} sh -c "
                f"'echo +0 > {self.clock_file}'"
            )
        # stopped, exited or paused: no process to exec in, but the file is in the container's layer
        directory, _, name = self.clock_file.rpartition("/")
        data = f"{spec}\n".encode()
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        if not container.put_archive(directory or "/", archive.getvalue()):
            raise FaultError(
                f"could not write the clock offset {spec} into stopped broker {broker_id}'s "
                f"{self.clock_file}\n"
                f"  fix: heal_all(cluster) retries; by hand: start the container and write +0 into that file"
            )
        return None

    def _measure(self) -> Effect | None:
        """Compare the broker's log timestamps since the offset was set with :meth:`offset_at`."""
        (broker_id,) = self.brokers
        assert self.set_at is not None
        skews = [s for s in log_skews(self.cluster, broker_id, self.set_at + SETTLE_S)]
        if skews:
            errors = [s.ahead_s - self.offset_at(s.received) for s in skews]
            error = statistics.median(errors)
            seen = statistics.median(s.ahead_s for s in skews[-5:])
            wanted = self.offset_at(skews[-1].received)
            figures = (
                f"broker {broker_id}'s log timestamps ran {seen:+.3f} s from Docker's clock over its last "
                f"lines (the fault's offset then {wanted:+.3f} s; median difference {error:+.3f} s over "
                f"{len(skews)} lines)"
            )
            if abs(error) <= self.tolerance_s() and abs(wanted) >= TOLERANCE_S:
                return Effect(True, figures)
            if abs(wanted) < TOLERANCE_S:
                return Effect(False, f"{figures}: an offset this small cannot be told from the real time")
            return Effect(False, f"{figures}: the broker's clock did not follow the fault")
        return self._probe(broker_id)

    def _probe(self, broker_id: int) -> Effect | None:
        """No log line in the window: a process under the JVM's own preload settings reads the clock."""
        container = self.cluster.broker(broker_id).docker
        container.reload()
        if container.status != "running":
            return None  # stopped meanwhile: neither its log nor a probe can say
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self._preload.items())
        before = time.time()
        _code, output = container.exec_run(["sh", "-c", f"env {env} date +%s.%N"])
        after = time.time()
        text = output.decode(errors="replace").strip() if isinstance(output, bytes) else str(output)
        try:
            read = float(text)
        except ValueError:
            return Effect(
                False, f"broker {broker_id} logged nothing in the window and the probe failed: {text}"
            )
        middle = (before + after) / 2
        seen, wanted = read - middle, self.offset_at(middle)
        figures = (
            f"broker {broker_id} logged nothing in the window; a process under its JVM's libfaketime read "
            f"{seen:+.3f} s from the real time (the fault's offset {wanted:+.3f} s)"
        )
        landed = abs(seen - wanted) <= self.tolerance_s() + (after - before) and abs(wanted) >= TOLERANCE_S
        return Effect(landed, figures)


class ClockJump(ClockFault):
    """The broker's wall clock steps ``by`` seconds (forward > 0, back < 0); heal steps it back."""

    kind = "clock_jump"

    def __init__(
        self, cluster: KafkaCluster, target: Target, by: float = 60.0, log: FaultLog | None = None
    ) -> None:
        super().__init__(cluster, target, log)
        if not by:
            raise FaultError("ClockJump(by=0) would change nothing: give the seconds to jump (e.g. by=120)")
        self.by = by

    def params(self) -> dict[str, Param]:
        return {"by": self.by}

    def offset_at(self, when: float) -> float:
        return self.by if self.set_at is not None and when >= self.set_at else 0.0

    def _inject(self) -> None:
        (broker_id,) = self.brokers
        self._check_supported(broker_id)
        self.set_at = time.time()
        self.write_offset(self.by)

    def _effect(self) -> Effect | None:
        return self._measure() if self.set_at is not None else None

    def _heal(self) -> None:
        if self.set_at is None:  # refused before it wrote anything
            return
        note = self.write_offset(0.0)
        if note is not None:
            self.note(note)


class ClockDrift(ClockFault):
    """The broker's wall clock runs at ``rate`` times the real speed (1.5: it gains half a second each
    second; 0.5: it loses as much) from the inject; heal steps it back to the real time, as NTP does to a
    clock that drifted too far. The offset is rewritten every ``step_s``."""

    kind = "clock_drift"

    def __init__(
        self,
        cluster: KafkaCluster,
        target: Target,
        rate: float = 1.5,
        step_s: float = 0.5,
        log: FaultLog | None = None,
    ) -> None:
        super().__init__(cluster, target, log)
        if rate <= 0 or rate == 1:
            raise FaultError(
                f"ClockDrift(rate={rate}) must be positive and not 1 (1.5: half a second a second)"
            )
        if step_s <= 0:
            raise FaultError(f"ClockDrift(step_s={step_s}) must be positive")
        self.rate = rate
        self.step_s = step_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_mono = 0.0
        self.write_errors: list[str] = []

    def params(self) -> dict[str, Param]:
        return {"rate": self.rate}

    def offset_at(self, when: float) -> float:
        if self.set_at is None or when < self.set_at:
            return 0.0
        return (self.rate - 1.0) * (when - self.set_at)

    def tolerance_s(self) -> float:
        """A line may carry an offset written up to ``step_s`` and read up to a second before it."""
        return TOLERANCE_S + abs(self.rate - 1.0) * (self.step_s + RELOAD_S)

    def _inject(self) -> None:
        (broker_id,) = self.brokers
        self._check_supported(broker_id)
        self.set_at = time.time()
        self._started_mono = time.monotonic()
        self.write_offset(0.0)
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._drift, name=f"chaos-clock-drift-{broker_id}", daemon=True
        )
        self._thread.start()

    def _drift(self) -> None:
        while not self._stop.wait(self.step_s):
            assert self.set_at is not None
            try:
                self.write_offset(self.offset_at(self.set_at + time.monotonic() - self._started_mono))
            except Exception as exc:  # a broker stopped meanwhile; the next step or the heal writes again
                if len(self.write_errors) < 5:
                    self.write_errors.append(str(exc).splitlines()[0])

    def _effect(self) -> Effect | None:
        return self._measure() if self.set_at is not None else None

    def _heal(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            if self._thread.is_alive():
                raise FaultError("the clock drift's writer thread did not stop within 30 s; heal again")
        for error in self.write_errors:
            self.note(f"a drift step failed: {error}")
        self.write_errors.clear()
        if self.set_at is None:  # refused before it wrote anything
            return
        note = self.write_offset(0.0)
        if note is not None:
            self.note(note)
