"""``chaos doctor``: every precondition of a run, checked without changing anything."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from chaos.errors import EnvironmentProblem
from chaos.paths import REPO_ROOT


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report; ``fix`` is set when ``ok`` is false."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def _guard(name: str, probe: Callable[[], Check]) -> Check:
    try:
        return probe()
    except EnvironmentProblem as exc:
        return Check(name, False, exc.problem, exc.fix)


def check_docker() -> Check:
    from chaos.cluster.engine import engine_version

    return Check("docker engine", True, f"version {engine_version()}")


def check_images(source: str | None) -> Check:
    from chaos.cluster.images import Role, Source, image_status
    from chaos.cluster.images.local import ROLE_IMAGE

    chosen = Source.parse(source)
    rows = {row.name: row for row in image_status()}
    usable, missing = [], []
    for role in Role:
        row = rows[ROLE_IMAGE[role]]
        if chosen is not Source.LOCAL and row.official_present:
            usable.append(f"{row.official}")
        elif chosen is not Source.OFFICIAL and row.local_state == "current":
            usable.append(row.local_tag)
        else:
            missing.append(row.official if chosen is Source.OFFICIAL else row.local_tag)
    if missing:
        return Check(
            f"images ({chosen.value})",
            False,
            "missing: " + ", ".join(str(m) for m in missing),
            f"CHAOS_IMAGES={chosen.value} chaos images ensure",
        )
    return Check(f"images ({chosen.value})", True, ", ".join(usable))


def check_java() -> Check:
    java = shutil.which("java")
    if java is None:
        return Check("java", False, "not found on PATH", "apt-get install -y openjdk-17-jre-headless")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)', out)
    major = int(match.group(1)) if match else 0
    if major < 17:
        return Check(
            "java",
            False,
            f"version {major} < 17 (Spark 4 needs 17+)",
            "apt-get install -y openjdk-17-jre-headless",
        )
    return Check("java", True, f"version {major} ({java})")


def check_spark_jars() -> Check:
    from chaos.audit.connector import connector_jars, pyspark_version

    version = pyspark_version()
    jars = connector_jars(version)
    if not jars:
        return Check(
            "spark kafka connector", False, f"not fetched for pyspark {version}", "chaos jars ensure"
        )
    return Check("spark kafka connector", True, f"pyspark {version}, {len(jars)} jars")


def check_python_packages() -> Check:
    lock = REPO_ROOT / "requirements.lock"
    if not lock.is_file():
        return Check("python packages", True, "installed package (no requirements.lock to compare)")
    wanted = {}
    for line in lock.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.strip().split("==", 1)
            wanted[name.lower()] = version
    wrong = []
    for name, version in wanted.items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            wrong.append(f"{name} missing")
            continue
        if have != version:
            wrong.append(f"{name} {have} != {version}")
    if wrong:
        return Check("python packages", False, "; ".join(wrong), "make setup")
    return Check("python packages", True, f"{len(wanted)} pinned packages match requirements.lock")


def run_checks(image_source: str | None = None) -> list[Check]:
    """All checks, in the order a fix should be applied."""
    checks = [_guard("docker engine", check_docker)]
    if checks[0].ok:
        checks.append(_guard("images", lambda: check_images(image_source)))
    else:
        checks.append(Check("images", False, "not checked: no Docker engine", "fix the docker engine first"))
    checks += [
        _guard("java", check_java),
        _guard("spark kafka connector", check_spark_jars),
        _guard("python packages", check_python_packages),
    ]
    return checks
