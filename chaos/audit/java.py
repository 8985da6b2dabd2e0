"""The ``java`` that Spark launches for a local or client-mode driver."""

from __future__ import annotations

import os
import shutil

from chaos.errors import ToolMissing

JAVA_FIX = (
    "install a JRE 17+ (apt-get install -y openjdk-17-jre-headless) and put `java` on PATH or set JAVA_HOME "
    "to it; or audit without Spark: --engine reference"
)


def java_command() -> str:
    """The ``java`` Spark will launch, found as ``spark-class`` finds it (``$JAVA_HOME/bin/java`` when
    JAVA_HOME is set, else ``java`` on PATH); :class:`ToolMissing` saying how to get one otherwise."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if not (os.path.isfile(java) and os.access(java, os.X_OK)):
            raise ToolMissing(f"JAVA_HOME={home} has no bin/java: the Spark audit cannot start", JAVA_FIX)
        return java
    found = shutil.which("java")
    if found is None:
        raise ToolMissing("no java on PATH and no JAVA_HOME: the Spark audit cannot start", JAVA_FIX)
    return found
