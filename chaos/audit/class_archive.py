"""A class-data-sharing archive of a local Spark driver's classes (HotSpot's dynamic AppCDS archive).

A local master's JVM loads thousands of classes from Spark's jars as it starts and as its first audit
plans; with those classes mapped from an archive (``-XX:SharedArchiveFile``) a process that starts Spark
and audits one run — a gate's ``chaos run``, ``chaos audit``, a pytest session — is done about 10 s
sooner (docs/audit.md, "The class archive"). :mod:`chaos.audit.archive_build` builds it (``chaos jars
ensure``, so ``make provision``); this module says where it is, whether it loads, and gives a local
master's JVM the options that map it. An archive only fits the JDK and the class path it was written
with — the same jars (names, sizes, times) in the same order; the JVM accepts them in another directory,
so virtualenvs whose files uv hard-linked from one cache (every clean clone's ``make setup``) share one
archive. Its name is a hash of all that, and a JVM that still finds it does not match runs without it.
``CHAOS_SPARK_CLASS_ARCHIVE=0`` turns building and use off.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Final

from chaos.audit.connector import connector_jars, pyspark_version
from chaos.audit.java import java_command
from chaos.paths import cache_dir

ARCHIVE_ENV: Final = "CHAOS_SPARK_CLASS_ARCHIVE"
"""``0`` (or ``off``/``false``/``no``): neither build nor use the archive."""


def enabled() -> bool:
    """Whether the archive is built and used (``$CHAOS_SPARK_CLASS_ARCHIVE`` is not ``0``/``off``)."""
    return os.environ.get(ARCHIVE_ENV, "").strip().lower() not in {"0", "off", "false", "no"}


def archive_dir() -> Path:
    """Where the archives live: ``jvm/`` in the harness's cache."""
    return cache_dir() / "jvm"


def archive_path() -> Path:
    """The archive for this JDK and these jars (existing or not): ``spark-<fingerprint>.jsa``."""
    return archive_dir() / f"spark-{fingerprint()}.jsa"


def spark_home() -> Path:
    """The Spark installation whose ``jars/`` the driver's class path lists: ``$SPARK_HOME``, else
    PySpark's own."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())  # type: ignore[no-untyped-call]


def fingerprint() -> str:
    """What the archive's classes depend on: the JDK (its binary's real path and ``release`` file),
    PySpark's version, the Spark installation's jars in the order the JVM lists them (its ``jars/*``
    follows the directory's order) and the connector jars, each by name, size and time — not by where the
    installation is: the JVM maps an archive for the same jars in another directory. 16 hex digits."""
    java = Path(os.path.realpath(java_command()))
    release = java.parent.parent / "release"
    jdk = release.read_text() if release.is_file() else str(java.stat().st_mtime_ns)
    with os.scandir(spark_home() / "jars") as listed:
        spark_jars = [Path(entry.path) for entry in listed if entry.name.endswith(".jar")]
    jars = [*spark_jars, *sorted(connector_jars())]
    stamps = [f"{jar.name}|{st.st_size}|{st.st_mtime_ns}" for jar in jars for st in (jar.stat(),)]
    return _digest("\0".join([str(java), jdk, pyspark_version(), *stamps]))[:16]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def archive_options(dump_to: Path | None = None) -> list[str]:
    """The driver JVM's options for the archive: write one at exit to ``dump_to`` (the training run), else
    map the built one when it exists. Empty when turned off, or when a path has whitespace (Spark splits
    ``extraJavaOptions`` at it)."""
    if not enabled():
        return []
    if dump_to is not None:
        return [] if _has_space(dump_to) else [f"-XX:ArchiveClassesAtExit={dump_to}"]
    try:
        path = archive_path()
    except Exception:  # no java (the audit says so itself), an unreadable cache: start without it
        return []
    if not path.is_file() or _has_space(path):
        return []
    # a mismatch (JDK updated in place, another classpath) only costs the speed-up: no warning for it
    return [f"-XX:SharedArchiveFile={path}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def archive_problem(archive: Path, classpath: str) -> str | None:
    """Why a JVM with this ``classpath`` cannot map ``archive`` (``-Xshare:on`` makes that an error, and
    a damaged file crashes it), or ``None`` when it can."""
    with tempfile.TemporaryDirectory(prefix="chaos-class-archive-") as cwd:  # a crash's hs_err file
        done = subprocess.run(
            [java_command(), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath, "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=cwd,
        )
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("#")]
    return f"java -Xshare:on exited {done.returncode}: {' '.join(lines[-2:])}"


def _has_space(path: Path) -> bool:
    return any(c.isspace() for c in str(path))
