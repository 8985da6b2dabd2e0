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


def test_the_fingerprint_follows_the_jars_and_not_where_they_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JVM checks each jar's name, size and time against the archive's, wherever the installation is:
    a reinstalled venv (same versions, new files) needs a new archive; a venv whose files are links to the
    same ones (uv's cache) shares it."""
    monkeypatch.setenv("CHAOS_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "a" / "jars").mkdir(parents=True)
    jar = tmp_path / "a" / "jars" / "spark-core.jar"
    jar.write_bytes(b"jar")
    (tmp_path / "b" / "jars").mkdir(parents=True)
    os.link(jar, tmp_path / "b" / "jars" / "spark-core.jar")
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "a"))
    first, path_a = class_archive.fingerprint(), class_archive.archive_path()
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "b"))
    assert class_archive.archive_path() == path_a  # the same files elsewhere
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 10**9))
    assert class_archive.fingerprint() != first  # unpacked anew
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "a"))
    touched = class_archive.fingerprint()
    (tmp_path / "a" / "jars" / "spark-sql.jar").write_bytes(b"jar")
    assert class_archive.fingerprint() not in {first, touched}  # one more jar


def test_pruning_keeps_the_newest_archives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive_build, "KEEP_ARCHIVES", 3)
    names = ["spark-old1", "spark-b1", "spark-c1", "spark-d1", "spark-new"]
    for age, name in enumerate(names):
        path = tmp_path / f"{name}.jsa"
        path.write_bytes(b"x")
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    os.utime(tmp_path / "spark-new.jsa", (900_000, 900_000))  # the one just built stays, whatever its time
    archive_build._prune(tmp_path / "spark-new.jsa")
    assert sorted(p.stem for p in tmp_path.iterdir()) == ["spark-c1", "spark-d1", "spark-new"]


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

    # the same jars in another directory (as in another venv uv linked from its cache): mapped
    jars = (class_archive.spark_home() / "jars").resolve()
    moved = tmp_path / "elsewhere" / "jars"
    moved.mkdir(parents=True)
    for entry in os.scandir(jars):  # the directory's order, which the JVM's jars/* follows
        if not entry.name.endswith(".jar"):
            continue
        try:
            os.link(entry.path, moved / entry.name)
        except OSError:  # another file system: a copy keeps the size and time
            shutil.copy2(entry.path, moved / entry.name)
    relocated = os.pathsep.join(
        str(moved / Path(p).name) if Path(p).resolve().parent == jars else p
        for p in classpath.split(os.pathsep)
    )
    assert relocated != classpath
    assert class_archive.archive_problem(archive, relocated) is None
