"""The example services under ``examples/services/``, built by the project's setup (``make provision``):

* the Kafka Streams application (``examples/services/streams``): ``kafka-streams`` of the cluster's Kafka
  version from Maven Central (Maven copies its runtime classpath), compiled by ``javac``, cached per version
  and source digest under ``~/.cache/chaos-harness/streams-service/`` like the Java client worker;
* the Python service (``examples/services/python/service.py``) as a local image, ``FROM`` the project's
  local JRE base image, with Debian's ``python3`` and the ``confluent-kafka`` wheel this environment runs.

``python -m chaos.service.examples ensure [--kafka-version V]`` builds what is missing; ``python -m
chaos.service.examples run streams [--kafka-version V]`` becomes the built Streams application (``exec``: the
harness's faults signal it directly), which is how a gate file names it: ``command = ["{python}", "-m",
"chaos.service.examples", "run", "streams"]``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from chaos import versions
from chaos.errors import ImageBuildFailed, ToolMissing
from chaos.paths import cache_dir
from chaos.progress import step
from chaos.run.locks import locked
from chaos.workload.java_build import built_once, compile_java_program, java_executable

EXAMPLES: Final = Path(__file__).resolve().parents[2] / "examples" / "services"
STREAMS_DIR: Final = EXAMPLES / "streams"
PYTHON_DIR: Final = EXAMPLES / "python"
STREAMS_MAIN: Final = "chaos.example.StreamsService"
SLF4J_VERSION: Final = "2.0.16"
PYTHON_IMAGE_REPOSITORY: Final = "chaos-harness/example-service"
BUILD_LOCK_TIMEOUT_S: Final = 1800.0


def _digest(*paths: Path, extra: str = "") -> str:
    digest = hashlib.sha256(extra.encode())
    for path in paths:
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(file.relative_to(path).as_posix().encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:12]


def _need_examples() -> None:
    if not STREAMS_DIR.is_dir() or not PYTHON_DIR.is_dir():
        raise ToolMissing(
            f"the example services are not at {EXAMPLES} (they ship with the repository, not the wheel)",
            "run from a checkout of the repository",
        )


@dataclass(frozen=True)
class StreamsApp:
    """The built Streams example: ``directory`` holds ``classes/`` and ``lib/``."""

    directory: Path
    kafka_version: str

    def command(self) -> list[str]:
        java = java_executable("the Streams example")
        return [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{self.directory / 'classes'}:{self.directory / 'lib'}/*",
            STREAMS_MAIN,
        ]


def streams_dir(kafka_version: str) -> Path:
    return (
        cache_dir() / "streams-service" / f"kafka-{kafka_version}-{_digest(STREAMS_DIR, extra=SLF4J_VERSION)}"
    )


def ensure_streams_app(kafka_version: str = versions.KAFKA_VERSION) -> StreamsApp:
    """The Streams example compiled against ``kafka-streams`` ``kafka_version``, built unless cached."""
    _need_examples()
    directory = streams_dir(kafka_version)
    built_once(directory, lambda: _build_streams(kafka_version, directory))
    return StreamsApp(directory, kafka_version)


def _build_streams(kafka_version: str, directory: Path) -> None:
    pom = (STREAMS_DIR / "pom.xml").read_text()
    pom = pom.replace("@KAFKA_VERSION@", kafka_version).replace("@SLF4J_VERSION@", SLF4J_VERSION)
    compile_java_program(
        "the Streams example service",
        f"kafka-streams {kafka_version}",
        pom,
        sorted((STREAMS_DIR / "src").rglob("*.java")),
        directory,
        f"streams-service-{kafka_version}.log",
        kafka_version,
    )


def confluent_kafka_version() -> str:
    return importlib.metadata.version("confluent-kafka")


def python_image_tag() -> str:
    from chaos.cluster.images.local import recipes

    base = recipes()["jre-base"]
    return (
        f"{PYTHON_IMAGE_REPOSITORY}:{_digest(PYTHON_DIR, extra=base.build_hash + confluent_kafka_version())}"
    )


def ensure_python_image() -> str:
    """The Python example service as a local image (built unless present); its tag."""
    import docker.errors

    from chaos.cluster.engine import docker_client
    from chaos.cluster.images.local import debian_mirror, ensure_local

    _need_examples()
    tag = python_image_tag()
    client = docker_client()
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    base = ensure_local("jre-base")
    build = cache_dir() / "build" / "example-service"
    with locked(build.with_name("example-service.lock"), BUILD_LOCK_TIMEOUT_S, lambda holder: None):
        shutil.rmtree(build, ignore_errors=True)
        (build / "wheels").mkdir(parents=True)
        shutil.copy2(PYTHON_DIR / "service.py", build / "service.py")
        shutil.copy2(PYTHON_DIR / "Dockerfile", build / "Dockerfile")
        wheel = f"confluent-kafka=={confluent_kafka_version()}"
        with step(f"downloading the {wheel} wheel for the example service image"):
            fetched = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                 "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
                 "--platform", "manylinux_2_28_x86_64", "-d", str(build / "wheels"), wheel],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if fetched.returncode != 0:
                raise ImageBuildFailed(
                    f"pip download {wheel} failed:\n{fetched.stderr[-2000:]}\n  fix: check that the package "
                    "index is reachable, then rerun"
                )
        with step(f"building {tag}"):
            lines: list[str] = []
            try:
                client.images.build(
                    path=str(build),
                    tag=tag,
                    rm=True,
                    forcerm=True,
                    pull=False,
                    buildargs={"BASE_IMAGE": base, "MIRROR": debian_mirror(), "SUITE": versions.DEBIAN_SUITE},
                    labels={"chaos-harness.example": "python-service"},
                )
            except docker.errors.BuildError as exc:
                lines = [str(chunk.get("stream", chunk.get("error", ""))).rstrip() for chunk in exc.build_log]
                raise ImageBuildFailed(
                    f"docker build {tag} failed: {exc.msg}\n    "
                    + "\n    ".join(lines[-30:])
                    + "\n  fix: the build installs python3 from the Debian mirror; check that it is reachable"
                ) from exc
    return tag


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.service.examples", description=__doc__)
    parser.add_argument("action", choices=["ensure", "run"])
    parser.add_argument("example", nargs="?", choices=["streams"], help="with run: the example to become")
    parser.add_argument("--kafka-version", default=versions.chosen_kafka_version())
    args = parser.parse_args(argv)
    if args.action == "run":
        if args.example is None:
            parser.error("run needs the example's name: run streams")
        command = ensure_streams_app(args.kafka_version).command()
        sys.stdout.flush()
        os.execv(command[0], command)
    app = ensure_streams_app(args.kafka_version)
    print(f"streams example: {app.directory}")
    print(f"python example image: {ensure_python_image()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
