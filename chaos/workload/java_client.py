"""The workload on the Java client (``org.apache.kafka:kafka-clients``) beside librdkafka.

The worker is the project's own Java source (``chaos/workload/java/src``), compiled once per Kafka version
against that version's ``kafka-clients`` (fetched from Maven Central by Maven, with Jackson for the JSON
and slf4j-simple for the client's log) into the cache, like the images and the Spark jars. It runs as a
child process the run supervises (:class:`~chaos.workload.consumer.ChildProcess`: SIGTERM to stop, SIGKILL
to crash, SIGSTOP to freeze; it dies with its parent) and writes the **same history events** as the
librdkafka workers: the audit does not know which client produced a history.

What the two clients share is decided here, once:

- the configuration: a profile's librdkafka keys become the Java client's (:func:`java_producer_config`;
  ``message.timeout.ms`` is ``delivery.timeout.ms``, a key with no Java equivalent is dropped with a note
  in the run's effective configuration, an unknown key is refused);
- a failed send's outcome: the worker reports the error's Kafka code name (``NOT_ENOUGH_REPLICAS``,
  ``REQUEST_TIMED_OUT`` for the Java client's ``TimeoutException``) or its exception class, and the parent
  classifies it with :func:`chaos.workload.outcomes.classify_delivery_error`, the librdkafka worker's rule;
- the client's own log: its WARN and ERROR lines become ``client_log`` events (facility: the logger's
  class, e.g. ``NetworkClient``), the symptoms' evidence.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from chaos.errors import ConfigError, ImageBuildFailed, JarFetchFailed, ToolMissing, WorkloadError
from chaos.maven import copy_runtime_classpath
from chaos.paths import cache_dir
from chaos.progress import step
from chaos.run.context import RunContext, Sink
from chaos.run.events import ClientLog, Event, SendInvoke, SendOutcome
from chaos.run.locks import locked
from chaos.run.profiles import ConfigValue
from chaos.workload.common import notice
from chaos.workload.consumer import ChildProcess
from chaos.workload.effective import ClientConfig, announce
from chaos.workload.outcomes import classify_delivery_error, classify_produce_exception
from chaos.workload.producer import HASTY_FLUSH_S, ProducerSpec, ProducerStats, ProducerWorker

CLIENTS: Final = ("librdkafka", "java")
"""The client implementations a run's workers may use."""

SOURCES: Final = Path(__file__).parent / "java" / "src"
MAIN_CLASS: Final = "chaos.worker.ChaosWorker"
JACKSON_VERSION: Final = "2.17.2"
SLF4J_VERSION: Final = "2.0.16"
BUILD_LOCK_TIMEOUT_S: Final = 1800.0
JVM_EXIT_S: Final = 5.0
"""What a stop allows beyond the flush: the JVM's shutdown after its producer closed."""

_POM: Final = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>chaos-harness</groupId>
  <artifactId>java-worker</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-clients</artifactId>
      <version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>com.fasterxml.jackson.core</groupId>
      <artifactId>jackson-databind</artifactId>
      <version>{jackson}</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>{slf4j}</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-simple</artifactId>
      <version>{slf4j}</version>
    </dependency>
  </dependencies>
</project>
"""

# librdkafka producer key -> the Java client's key (the same name where both have it)
_PRODUCER_KEYS: Final[Mapping[str, str]] = {
    **{
        key: key
        for key in (
            "bootstrap.servers",
            "client.id",
            "acks",
            "enable.idempotence",
            "retries",
            "retry.backoff.ms",
            "retry.backoff.max.ms",
            "max.in.flight.requests.per.connection",
            "transactional.id",
            "transaction.timeout.ms",
            "linger.ms",
            "batch.size",
            "compression.type",
            "socket.connection.setup.timeout.ms",
            "socket.connection.setup.timeout.max.ms",
            "reconnect.backoff.ms",
            "reconnect.backoff.max.ms",
            "metadata.max.age.ms",
        )
    },
    "message.timeout.ms": "delivery.timeout.ms",
    # the client-side bound of a request: librdkafka's socket.timeout.ms is the Java client's
    # request.timeout.ms (which it also sends as a produce request's ack timeout); librdkafka's
    # request.timeout.ms (broker-side only) is used when no socket.timeout.ms is given
    "socket.timeout.ms": "request.timeout.ms",
    "request.timeout.ms": "request.timeout.ms",
    "delivery.timeout.ms": "delivery.timeout.ms",
    "queue.buffering.max.ms": "linger.ms",
    "compression.codec": "compression.type",
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
}
# librdkafka keys the Java client has no counterpart for, and why dropping them is sound
_NO_JAVA_KEY: Final[Mapping[str, str]] = {
    "api.version.request": "the Java client always asks",
    "broker.address.family": "the JVM's resolver decides",
}
# librdkafka's defaults where the Java client's differ: kept, so a profile means the same on both clients
_LIBRDKAFKA_DEFAULTS: Final[Mapping[str, str]] = {"enable.idempotence": "false"}


@dataclass(frozen=True)
class JavaConfig:
    """A producer's configuration for the Java client: ``settings`` as handed to it, ``origins`` per key
    (the librdkafka key's origin, with the key it came from), ``dropped``: librdkafka key -> why."""

    settings: Mapping[str, str]
    origins: Mapping[str, str]
    dropped: Mapping[str, str]


def _java_value(value: ConfigValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def java_producer_config(config: ClientConfig) -> JavaConfig:
    """The Java client's producer configuration for a librdkafka producer configuration (see the module
    docstring); raises :class:`ConfigError` for a key neither client table knows."""
    settings: dict[str, str] = {}
    origins: dict[str, str] = {}
    dropped: dict[str, str] = {}
    for key, value in config.settings.items():
        if key == "request.timeout.ms" and "socket.timeout.ms" in config.settings:
            dropped[key] = (
                "librdkafka's broker-side ack timeout; the Java client's request.timeout.ms, from "
                "socket.timeout.ms, bounds the request and is sent as its ack timeout"
            )
            continue
        if key in _NO_JAVA_KEY:
            dropped[key] = _NO_JAVA_KEY[key]
            continue
        java_key = _PRODUCER_KEYS.get(key)
        if java_key is None:
            raise ConfigError(
                f"producer {config.process}: librdkafka's {key!r} (from {config.origins[key]}) has no Java "
                f"client equivalent the harness knows\n  fix: use the Java client's own key in the overrides "
                f"(known: {', '.join(sorted(set(_PRODUCER_KEYS.values())))}), or run it on librdkafka"
            )
        settings[java_key] = _java_value(value)
        origins[java_key] = config.origins[key] + ("" if java_key == key else f" (as librdkafka's {key})")
    for key, value in _LIBRDKAFKA_DEFAULTS.items():
        if key not in settings:
            settings[key] = value
            origins[key] = "harness: librdkafka's default, which the Java client's differs from"
    return JavaConfig(settings, origins, dropped)


@dataclass(frozen=True)
class JavaWorker:
    """A compiled worker: ``directory`` holds ``classes/`` and ``lib/`` (kafka-clients and its runtime)."""

    directory: Path
    kafka_version: str

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise ToolMissing(
                "java (>= 17) runs the Java client worker", "apt-get install -y openjdk-17-jre-headless"
            )
        prefix = ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []
        return [
            *prefix,
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.logFile=System.err",
            "-Dorg.slf4j.simpleLogger.showThreadName=false",
            "-cp",
            f"{self.directory / 'classes'}:{self.directory / 'lib'}/*",
            MAIN_CLASS,
        ]


def sources_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(SOURCES.rglob("*.java")):
        digest.update(path.relative_to(SOURCES).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update(f"{JACKSON_VERSION} {SLF4J_VERSION}".encode())
    return digest.hexdigest()[:12]


def worker_dir(kafka_version: str) -> Path:
    return cache_dir() / "java-worker" / f"kafka-{kafka_version}-{sources_digest()}"


def ensure_java_worker(kafka_version: str) -> JavaWorker:
    """The worker compiled against ``kafka-clients`` ``kafka_version``, built into the cache unless there."""
    directory = worker_dir(kafka_version)
    if (directory / ".complete").exists():
        return JavaWorker(directory, kafka_version)
    with locked(directory.with_name(directory.name + ".lock"), BUILD_LOCK_TIMEOUT_S, lambda holder: None):
        if not (directory / ".complete").exists():
            _build(kafka_version, directory)
    return JavaWorker(directory, kafka_version)


def _build(kafka_version: str, directory: Path) -> None:
    javac = shutil.which("javac")
    if javac is None:
        raise ToolMissing(
            "javac (a JDK >= 17) compiles the Java client worker",
            "apt-get install -y openjdk-17-jdk-headless",
        )
    staging = directory.with_name(directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "maven").mkdir(parents=True)
    (staging / "maven" / "pom.xml").write_text(
        _POM.format(kafka=kafka_version, jackson=JACKSON_VERSION, slf4j=SLF4J_VERSION)
    )
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with step(f"building the Java client worker against kafka-clients {kafka_version}"):
        try:
            copy_runtime_classpath(
                staging / "maven", staging / "lib", logs / f"java-worker-{kafka_version}.log", "maven"
            )
        except ImageBuildFailed as exc:
            raise JarFetchFailed(f"{exc}\n  fix: check that Maven Central is reachable, then rerun") from exc
        sources = [str(p) for p in sorted(SOURCES.rglob("*.java"))]
        compiled = subprocess.run(
            [
                javac,
                "--release",
                "17",
                "-nowarn",
                "-d",
                str(staging / "classes"),
                "-cp",
                f"{staging / 'lib'}/*",
                *sources,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled.returncode != 0:
            raise ImageBuildFailed(f"javac failed on the Java client worker:\n{compiled.stderr[-3000:]}")
    shutil.rmtree(staging / "maven")
    (staging / ".complete").write_text(kafka_version)
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)


_LOG_LINE: Final = re.compile(r"^(TRACE|DEBUG|INFO|WARN|ERROR) ([\w.$]+) - (.*)$")
_LEVELS: Final = {"ERROR": "error", "WARN": "warning", "INFO": "info", "DEBUG": "debug", "TRACE": "debug"}


def client_log_of(line: str, run_id: str, process: str) -> ClientLog | None:
    """The ``client_log`` event of one slf4j-simple line of the Java client; None for other lines (a stack
    trace's frames, a configuration dump's rows)."""
    match = _LOG_LINE.match(line)
    if match is None:
        return None
    level, logger, message = match.groups()
    return ClientLog(
        run_id=run_id,
        process=process,
        level=_LEVELS[level],  # type: ignore[arg-type]
        facility=logger.rsplit(".", 1)[-1],
        message=message,
    )


class JavaChild(ChildProcess):
    """The worker's process: its rows completed (a failed send classified), its log lines recorded."""

    clean_exits = (0, -signal.SIGTERM, 128 + signal.SIGTERM)  # a JVM ends a SIGTERM it handled with 143

    def __init__(
        self, name: str, payload: str, sink: Sink, worker: JavaWorker, run_id: str, *, single_attempt: bool
    ) -> None:
        super().__init__(name, payload, sink)
        self.worker = worker
        self.run_id = run_id
        self.single_attempt = single_attempt

    def command(self) -> list[str]:
        return self.worker.command()

    def row(self, row: dict[str, Any]) -> dict[str, Any]:
        sync = bool(row.pop("sync", False))
        if row.get("kind") == "send_outcome" and row.get("outcome") is None:
            error = str(row.get("error"))
            classified = (
                classify_produce_exception(error)
                if sync
                else classify_delivery_error(error, single_attempt=self.single_attempt)
            )
            row["outcome"] = classified.outcome
            if classified.outcome == "fail":
                row["retriable"] = bool(row.get("retriable"))
                row["fatal"] = bool(row.get("fatal"))
        return row

    def stderr_line(self, line: str) -> None:
        event = client_log_of(line, self.run_id, self.name)
        if event is not None and event.level in ("warning", "error"):
            self._sink(event)


class JavaProducer:
    """A :class:`ProducerSpec`'s sends on the Java client (see the module docstring), with
    :class:`~chaos.workload.producer.ProducerWorker`'s interface: ``start()``, then ``join()`` or
    ``stop()``, ``stats()``. Start it once: it keeps no checkpoint."""

    def __init__(self, context: RunContext, spec: ProducerSpec, worker: JavaWorker) -> None:
        self.spec = spec
        self.context = context
        self.topic = spec.topic or context.topic
        librdkafka = spec.client_config(context)
        java = java_producer_config(librdkafka)
        self.client_config = ClientConfig(
            spec.name, "producer", f"{librdkafka.profile} (Java client)", java.settings, java.origins
        )
        self.dropped = java.dropped
        announce(context, self.client_config)
        payload = {
            "role": "producer",
            "run_id": context.run_id,
            "name": spec.name,
            "topic": self.topic,
            "rate": spec.rate,
            "count": spec.count,
            "duration_s": spec.duration_s,
            "keys": spec.keys,
            "flush_timeout_s": spec.flush_timeout_s,
            "config": dict(java.settings),
        }
        self._counts = {"sent": 0, "ok": 0, "fail": 0, "info": 0}
        self._lock = threading.Lock()
        self._started = 0.0
        self._finished = 0.0
        self._child = JavaChild(
            spec.name,
            json.dumps(payload, separators=(",", ":")),
            self._record,
            worker,
            context.run_id,
            single_attempt=context.client.single_attempt,
        )

    @property
    def name(self) -> str:
        return self.spec.name

    def _record(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, SendInvoke):
                self._counts["sent"] += 1
            elif isinstance(event, SendOutcome):
                self._counts[event.outcome] += 1
        self.context.sink(event)

    def start(self) -> JavaProducer:
        if self._started:
            raise WorkloadError(f"producer {self.name} already started; build a new JavaProducer")
        self._started = time.monotonic()
        if self.dropped:
            notice(
                self.context,
                self.name,
                "JAVA_CONFIG",
                "left out for the Java client: "
                + "; ".join(f"{k} ({why})" for k, why in self.dropped.items()),
            )
        self._child.start()
        return self

    def stop(self, timeout_s: float | None = None, *, hasty: bool = False) -> ProducerStats:
        """SIGTERM: stop sending, flush within ``flush_timeout_s`` (``hasty``: killed after
        :data:`~chaos.workload.producer.HASTY_FLUSH_S`; its unacknowledged values keep no outcome)."""
        if not self._started:
            raise WorkloadError(f"producer {self.name} was never started")
        limit = HASTY_FLUSH_S + JVM_EXIT_S if hasty else (timeout_s or self.spec.flush_timeout_s + JVM_EXIT_S)
        try:
            self._child.stop(limit)
        except WorkloadError:
            if not hasty:
                raise
        return self._ended()

    def join(self, timeout_s: float | None = None) -> ProducerStats:
        """Wait for the sending to end by itself; raises :class:`WorkloadError` if it failed or runs on."""
        if not self._started:
            raise WorkloadError(f"producer {self.name} was never started")
        limit = timeout_s if timeout_s is not None else self._join_budget()
        code = self._child.wait(limit)
        if code is None:
            raise WorkloadError(f"producer {self.name} did not finish within {limit:.1f} s")
        if code not in self._child.clean_exits or self._child.error is not None:
            self._child.stop(1.0)  # raises with the child's stderr
        return self._ended()

    def _join_budget(self) -> float:
        duration = self.spec.duration_s or 0.0
        if self.spec.count is not None and self.spec.rate:
            duration = min(duration or float("inf"), self.spec.count / self.spec.rate)
        return duration + self.spec.flush_timeout_s + JVM_EXIT_S + 60.0  # a send may block max.block.ms

    def _ended(self) -> ProducerStats:
        with self._lock:
            self._finished = self._finished or time.monotonic()
        return self.stats()

    def stats(self) -> ProducerStats:
        with self._lock:
            end = self._finished or time.monotonic()
            counts = dict(self._counts)
        elapsed = end - self._started if self._started else 0.0
        return ProducerStats(counts["sent"], counts["ok"], counts["fail"], counts["info"], elapsed)


def check_client(name: str) -> str:
    """``name`` when it is a client the harness runs (:data:`CLIENTS`), else a :class:`ConfigError`."""
    if name not in CLIENTS:
        raise ConfigError(f"client: expected one of {', '.join(CLIENTS)}; got {name!r}")
    return name


AnyProducer = ProducerWorker | JavaProducer
"""What :meth:`ScenarioRun.producer <chaos.scenario.workers.RunWorkers.producer>` starts: one interface."""
