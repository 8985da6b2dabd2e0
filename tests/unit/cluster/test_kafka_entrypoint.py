"""The local Kafka image's entry point renders KAFKA_* variables like the official image does.

The script runs on the host with a stand-in ``java`` that records its arguments, so the conversion and
the launch command are checked without a container.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from chaos.cluster.images.local import CONTEXT_DIR

RUN = CONTEXT_DIR / "kafka" / "run"


def _run(tmp_path: Path, env: dict[str, str], jars: tuple[str, ...] = ()) -> tuple[dict[str, str], list[str]]:
    libs = tmp_path / "libs"
    libs.mkdir()
    for jar in jars:
        (libs / jar).write_bytes(b"")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "java-calls"
    fake_java = bin_dir / "java"
    fake_java.write_text(f'#!/bin/bash\nprintf "%s\\n" "$*" >> {calls}\n')
    fake_java.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_") and k != "CLUSTER_ID"}
    base.update(
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        CHAOS_KAFKA_CONFIG_DIR=str(tmp_path / "config"),
        CHAOS_KAFKA_LIBS_DIR=str(libs),
    )
    subprocess.run(["bash", str(RUN)], env={**base, **env}, check=True, capture_output=True, timeout=30)
    lines = (tmp_path / "config" / "server.properties").read_text().splitlines()
    properties = dict(line.split("=", 1) for line in lines)
    return properties, calls.read_text().splitlines()


def test_names_convert_like_the_official_image(tmp_path: Path) -> None:
    properties, _ = _run(
        tmp_path,
        {
            "KAFKA_NODE_ID": "3",
            "KAFKA_REPLICA_LAG_TIME_MAX_MS": "4000",
            "KAFKA_SOME__UNDERSCORED": "u",
            "KAFKA_WITH___DASH": "d",
            "KAFKA_LISTENERS": "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
        },
    )
    assert properties["node.id"] == "3"
    assert properties["replica.lag.time.max.ms"] == "4000"
    assert properties["some_underscored"] == "u"
    assert properties["with-dash"] == "d"
    assert properties["listeners"] == "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093"
    # an unset variable still takes the official image's default
    assert properties["advertised.listeners"] == "PLAINTEXT://localhost:29092,PLAINTEXT_HOST://localhost:9092"


def test_jvm_options_are_not_properties_and_reach_the_jvm(tmp_path: Path) -> None:
    properties, calls = _run(tmp_path, {"KAFKA_HEAP_OPTS": "-Xmx256m -Xms256m", "KAFKA_OPTS": "-Dx=1"})
    assert not any(key.startswith(("heap", "opts")) for key in properties)
    format_call, launch_call = calls
    assert "kafka.tools.StorageTool format" in format_call
    assert "--ignore-formatted" in format_call
    assert launch_call.startswith("-Xmx256m -Xms256m -server")
    assert "-Dx=1" in launch_call
    assert launch_call.endswith("kafka.Kafka " + str(tmp_path / "config" / "server.properties"))


def test_defaults_give_a_single_combined_node(tmp_path: Path) -> None:
    properties, calls = _run(tmp_path, {})
    assert properties["process.roles"] == "broker,controller"
    assert properties["controller.quorum.voters"] == "1@localhost:29093"
    assert "--cluster-id 5L6g3nShT-eMCtK--X86sw" in calls[0]


@pytest.mark.parametrize("cluster_id", ["MkU3OEVBNTcwNTJENDM2Qk"])
def test_cluster_id_is_passed_to_the_formatter(tmp_path: Path, cluster_id: str) -> None:
    _, calls = _run(tmp_path, {"CLUSTER_ID": cluster_id})
    assert f"--cluster-id {cluster_id}" in calls[0]


LOG4J2 = "-Dlog4j2.configurationFile=/etc/kafka/docker/log4j2.xml"
RELOAD4J = "-Dlog4j.configuration=file:/etc/kafka/docker/log4j.properties"


@pytest.mark.parametrize(
    ("jars", "logging"),
    [
        (("kafka_2.13-4.1.1.jar", "log4j-core-2.24.3.jar"), LOG4J2),
        (("kafka_2.13-3.9.2.jar", "reload4j-1.2.25.jar"), RELOAD4J),
    ],
)
def test_the_logging_configuration_follows_the_release_on_the_classpath(
    tmp_path: Path, jars: tuple[str, ...], logging: str
) -> None:
    """Kafka 4 logs through log4j 2, a 3.x release through reload4j: both the formatter and the broker get
    the configuration of the backend whose jar is there, and the classpath is the libs directory."""
    _, calls = _run(tmp_path, {}, jars)
    for call in calls:
        assert logging in call
        assert f"-cp {tmp_path / 'libs'}/*" in call


def _launch_env(tmp_path: Path, env: dict[str, str]) -> dict[str, str]:
    """The environment the broker's JVM is launched with (a stand-in ``java`` writes it)."""
    out = tmp_path / "java-env"
    bin_dir = tmp_path / "envbin"
    bin_dir.mkdir()
    (bin_dir / "java").write_text(f'#!/bin/bash\nif [[ "$*" == *kafka.Kafka* ]]; then env > {out}; fi\n')
    (bin_dir / "java").chmod(0o755)
    (tmp_path / "libs").mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KAFKA_", "FAKETIME", "LD_PRELOAD"))}
    base.update(
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        CHAOS_KAFKA_CONFIG_DIR=str(tmp_path / "config"),
        CHAOS_KAFKA_LIBS_DIR=str(tmp_path / "libs"),
    )
    subprocess.run(["bash", str(RUN)], env={**base, **env}, check=True, capture_output=True, timeout=30)
    return dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)


def test_the_broker_reads_its_wall_clock_through_libfaketime(tmp_path: Path) -> None:
    lib = tmp_path / "libfaketimeMT.so.1"
    lib.write_bytes(b"")  # never loaded: the stand-in java is a script
    env = _launch_env(tmp_path, {"CHAOS_FAKETIME_LIB": str(lib), "CHAOS_FAKE_CLOCK": "1"})
    assert env["LD_PRELOAD"] == str(lib)
    assert env["FAKETIME_TIMESTAMP_FILE"] == "/var/lib/chaos/clock"
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"  # the JVM's timers keep the real monotonic clock
    assert env["FAKETIME_CACHE_DURATION"] == "0"  # the file is read again each second
    assert env["FAKETIME_FORCE_MONOTONIC_FIX"] == "0"  # timed waits keep their lengths


def test_the_clock_is_left_alone_unless_asked_for(tmp_path: Path) -> None:
    lib = tmp_path / "libfaketimeMT.so.1"
    lib.write_bytes(b"")
    env = _launch_env(tmp_path, {"CHAOS_FAKETIME_LIB": str(lib)})
    assert "LD_PRELOAD" not in env
    assert "FAKETIME_TIMESTAMP_FILE" not in env
