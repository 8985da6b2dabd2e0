"""Spark's Kafka connector: ``spark-sql-kafka-0-10`` at exactly the installed PySpark version.

``spark.jars.packages`` needs a repository at run time; instead Maven fetches the connector and its
runtime dependencies once into the cache, and Spark gets the files as ``spark.jars``. Artifacts that
PySpark already ships (in any version) are left out, so the classpath holds one copy of each library.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from chaos.errors import ImageBuildFailed, JarFetchFailed
from chaos.maven import copy_runtime_classpath
from chaos.paths import cache_dir
from chaos.progress import console, step
from chaos.run.locks import locked

SCALA_BINARY_VERSION = "2.13"
FETCH_LOCK_TIMEOUT_S = 1800.0
"""How long a session waits for another one fetching the same jars (a cold Maven fetch takes minutes)."""
_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>chaos-harness</groupId>
  <artifactId>spark-kafka-connector</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId>
      <artifactId>spark-sql-kafka-0-10_{scala}</artifactId>
      <version>{spark}</version>
    </dependency>
  </dependencies>
</project>
"""


def pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def _artifact(jar_name: str) -> str:
    """``scala-library-2.13.15.jar`` -> ``scala-library``."""
    return re.sub(r"-\d[^-]*(-[A-Za-z0-9.]+)?\.jar$", "", jar_name)


def _pyspark_artifacts() -> set[str]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return {_artifact(p.name) for p in jars.glob("*.jar")}


def jars_dir(spark_version: str | None = None) -> Path:
    return (
        cache_dir() / "spark-jars" / f"spark-{spark_version or pyspark_version()}-scala{SCALA_BINARY_VERSION}"
    )


def connector_jars(spark_version: str | None = None) -> list[Path]:
    """The cached jars, or an empty list when they have not been fetched yet."""
    directory = jars_dir(spark_version)
    if not (directory / ".complete").exists():
        return []
    return sorted(directory.glob("*.jar"))


def ensure_connector_jars(spark_version: str | None = None) -> list[Path]:
    """Fetch the connector for ``spark_version`` (default: installed PySpark) unless cached."""
    version = spark_version or pyspark_version()
    cached = connector_jars(version)
    if cached:
        return cached
    directory = jars_dir(version)
    # Two cold sessions must not fetch into one staging directory: the second waits, then finds the jars.
    with locked(
        directory.with_name(directory.name + ".lock"),
        FETCH_LOCK_TIMEOUT_S,
        lambda holder: console.print(f"waiting for {holder}, which is fetching the Spark connector jars"),
    ):
        return connector_jars(version) or _fetch(version, directory)


def _fetch(version: str, directory: Path) -> list[Path]:
    """Fetch into ``<directory>.partial``, then rename it to ``directory`` (under the fetch lock)."""
    staging = directory.with_name(directory.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "maven").mkdir(parents=True)
    (staging / "maven" / "pom.xml").write_text(_POM.format(scala=SCALA_BINARY_VERSION, spark=version))
    with step(f"fetching spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}:{version} with Maven"):
        try:
            copy_runtime_classpath(
                staging / "maven",
                staging / "all",
                cache_dir() / "logs" / f"spark-jars-{version}.log",
                "maven",
            )
        except ImageBuildFailed as exc:
            raise JarFetchFailed(f"{exc}\n  fix: check that Maven Central is reachable, then rerun") from exc
    shipped = _pyspark_artifacts()
    for jar in (staging / "all").glob("*.jar"):
        if _artifact(jar.name) not in shipped:
            shutil.move(str(jar), staging / jar.name)
    shutil.rmtree(staging / "all")
    shutil.rmtree(staging / "maven")
    (staging / ".complete").write_text(version)
    shutil.rmtree(directory, ignore_errors=True)
    staging.rename(directory)
    return connector_jars(version)
