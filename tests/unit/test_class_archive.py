"""The Spark driver's class archive: keyed by what its classes come from, mapped only when built."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from chaos.audit import archive_build, class_archive
from chaos.errors import AuditError


def _fake_jdk(root: Path, version: str) -> Path:
    java = root / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(0o755)
    (root / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return root


def test_the_fingerprint_follows_the_jdk_and_pyspark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_fake_jdk(tmp_path / "jdk-a", "17.0.15")))
    first = class_archive.fingerprint()
    assert first == class_archive.fingerprint()
    assert len(first) == 16
    monkeypatch.setenv("JAVA_HOME", str(_fake_jdk(tmp_path / "jdk-b", "17.0.15")))
    assert class_archive.fingerprint() != first  # another JDK's binary
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk-a"))
    (tmp_path / "jdk-a" / "release").write_text('JAVA_VERSION="17.0.16"\n')
    updated = class_archive.fingerprint()
    assert updated != first  # the same path, updated in place
    monkeypatch.setattr(class_archive, "pyspark_version", lambda: "9.9.9")
    assert class_archive.fingerprint() not in {first, updated}


def test_the_fingerprint_and_the_name_follow_the_spark_installations_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JVM checks each jar's size and time against the archive's: a reinstalled venv (same versions,
    new files) needs a new archive, and each installation has its own."""
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("a", "b"):
        (tmp_path / name / "jars").mkdir(parents=True)
        (tmp_path / name / "jars" / "spark-core.jar").write_bytes(b"jar")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "a"))
    first, path_a = class_archive.fingerprint(), class_archive.archive_path()
    jar = tmp_path / "a" / "jars" / "spark-core.jar"
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 10**9))
    assert class_archive.fingerprint() != first
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "b"))
    path_b = class_archive.archive_path()
    assert path_a.name.rsplit("-", 1)[0] != path_b.name.rsplit("-", 1)[0]


def test_pruning_keeps_the_newest_archive_of_each_installation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive_build, "KEEP_ARCHIVES", 3)
    names = ["spark-aaaa-old1", "spark-bbbb-1", "spark-cccc-1", "spark-dddd-1", "spark-aaaa-new"]
    for age, name in enumerate(names):
        path = tmp_path / f"{name}.jsa"
        path.write_bytes(b"x")
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    archive_build._prune(tmp_path / "spark-aaaa-new.jsa")
    # aaaa's older build goes; of the other installations the two newest stay (three archives in all)
    assert sorted(p.stem for p in tmp_path.iterdir()) == ["spark-aaaa-new", "spark-cccc-1", "spark-dddd-1"]


def test_the_archive_is_mapped_only_when_built_and_enabled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    assert class_archive.archive_options() == []  # not built
    path = class_archive.archive_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    options = class_archive.archive_options()
    assert options[0] == f"-XX:SharedArchiveFile={path}"
    assert "-Xlog:cds=off" in options
    dump = tmp_path / "new.jsa"
    assert class_archive.archive_options(dump) == [f"-XX:ArchiveClassesAtExit={dump}"]
    assert class_archive.archive_options(tmp_path / "with space.jsa") == []  # Spark would split it
    for off in ("0", "off", "false", "NO"):
        monkeypatch.setenv(class_archive.ARCHIVE_ENV, off)
        assert class_archive.archive_options() == []
        assert class_archive.archive_options(dump) == []
        assert archive_build.ensure_class_archive() is None


def test_a_failed_build_raises_and_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(class_archive.ARCHIVE_ENV, raising=False)
    monkeypatch.setattr(sys, "executable", shutil.which("false"))
    with pytest.raises(AuditError, match=r"building the Spark class archive failed .* runs without it"):
        archive_build.ensure_class_archive()
    assert list(class_archive.archive_path().parent.iterdir()) == []
    assert class_archive.archive_options() == []


def test_the_built_archive_loads_with_the_sessions_classpath_and_a_damaged_one_is_refused(
    audit_spark: Any, tmp_path: Path
) -> None:
    """``make provision`` built this venv's archive (else this builds it, ~80 s); this session's JVM was
    started with it, and a JVM with the same class path maps it under ``-Xshare:on`` — where a truncated
    copy, or another class path, is refused."""
    archive = archive_build.ensure_class_archive()
    assert archive is not None
    assert archive.is_file()
    jvm = audit_spark._jvm
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments, "built after the session started? make provision"
    classpath = jvm.java.lang.System.getProperty("java.class.path")
    assert class_archive.archive_problem(archive, classpath) is None

    truncated = tmp_path / "truncated.jsa"
    with archive.open("rb") as whole:
        truncated.write_bytes(whole.read(archive.stat().st_size // 2))
    assert "exited" in (class_archive.archive_problem(truncated, classpath) or "")
    other = classpath.split(os.pathsep)[0]
    assert "exited" in (class_archive.archive_problem(archive, other) or "")
