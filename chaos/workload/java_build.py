"""Building the Java client worker: the project's own Java source (``chaos/workload/java/src``) compiled once
per Kafka version against that version's ``kafka-clients`` (fetched from Maven Central by Maven, with
Jackson for the JSON and slf4j-simple for the client's log) into the cache, like the images and the Spark
jars; :class:`JavaWorker` is the built worker and its command line."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from chaos.errors import ImageBuildFailed, JarFetchFailed, ToolMissing
from chaos.maven import copy_runtime_classpath
from chaos.paths import cache_dir
from chaos.progress import step
from chaos.run.locks import locked

SOURCES: Final = Path(__file__).parent / "java" / "src"
MAIN_CLASS: Final = "chaos.worker.ChaosWorker"
JACKSON_VERSION: Final = "2.17.2"
SLF4J_VERSION: Final = "2.0.16"
BUILD_LOCK_TIMEOUT_S: Final = 1800.0

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


@dataclass(frozen=True)
class JavaWorker:
    """A compiled worker: ``directory`` holds ``classes/`` and ``lib/`` (kafka-clients and its runtime)."""

    directory: Path
    kafka_version: str

    def command(self) -> list[str]:
        java = java_executable("the Java client worker")
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
    built_once(directory, lambda: _build(kafka_version, directory))
    return JavaWorker(directory, kafka_version)


def built_once(directory: Path, build: Callable[[], None]) -> None:
    """Run ``build`` unless ``directory`` holds a finished build (its ``.complete`` marker), under a lock
    beside it, so concurrent sessions build it once."""
    if (directory / ".complete").exists():
        return
    with locked(directory.with_name(directory.name + ".lock"), BUILD_LOCK_TIMEOUT_S, lambda holder: None):
        if not (directory / ".complete").exists():
            build()


def _build(kafka_version: str, directory: Path) -> None:
    pom = _POM.format(kafka=kafka_version, jackson=JACKSON_VERSION, slf4j=SLF4J_VERSION)
    compile_java_program(
        "the Java client worker",
        f"kafka-clients {kafka_version}",
        pom,
        sorted(SOURCES.rglob("*.java")),
        directory,
        f"java-worker-{kafka_version}.log",
        kafka_version,
    )


def java_executable(what: str) -> str:
    """The ``java`` on PATH (17 or newer), or :class:`ToolMissing` naming ``what`` needs it."""
    java = shutil.which("java")
    if java is None:
        raise ToolMissing(f"java (>= 17) runs {what}", "apt-get install -y openjdk-17-jre-headless")
    return java


def compile_java_program(
    what: str,
    against: str,
    pom: str,
    sources: Sequence[Path],
    directory: Path,
    log_name: str,
    kafka_version: str,
) -> None:
    """Fetch ``pom``'s runtime classpath from Maven Central into ``directory/lib`` and compile ``sources``
    against it into ``directory/classes`` — staged in a ``.partial`` sibling and renamed when complete, so a
    half-built program is never used. ``what`` and ``against`` name it in progress and error messages."""
    javac = shutil.which("javac")
    if javac is None:
        raise ToolMissing(
            f"javac (a JDK >= 17) compiles {what}", "apt-get install -y openjdk-17-jdk-headless"
        )
    staging = directory.with_name(directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "maven").mkdir(parents=True)
    (staging / "maven" / "pom.xml").write_text(pom)
    logs = cache_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with step(f"building {what} against {against}"):
        try:
            copy_runtime_classpath(staging / "maven", staging / "lib", logs / log_name, "maven")
        except ImageBuildFailed as exc:
            raise JarFetchFailed(f"{exc}\n  fix: check that Maven Central is reachable, then rerun") from exc
        compiled = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-d", str(staging / "classes"), "-cp",
             f"{staging / 'lib'}/*", *(str(p) for p in sources)],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        if compiled.returncode != 0:
            raise ImageBuildFailed(f"javac failed on {what}:\n{compiled.stderr[-3000:]}")
    shutil.rmtree(staging / "maven")
    (staging / ".complete").write_text(kafka_version)
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)
