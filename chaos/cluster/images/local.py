"""Images built on this machine, for hosts that reach no container registry.

* ``jre-base``: Debian from ``debootstrap`` (the machine's own apt mirror) with a JRE, imported with
  ``docker import``;
* ``kafka``: the broker's runtime jars from Maven Central on that base, with the entry point that
  honours the official image's ``KAFKA_*`` convention, and ``faultfs``, the harness's own fault layer over a
  broker's log directory (a FUSE pass-through, ``go build``);
* ``toxiproxy``: ``go install`` at the pinned version, on ``scratch``;
* ``reaper``: the harness's own Ryuk-compatible reaper, ``go build`` on ``scratch``.

Each image carries a label with the hash of its inputs; ``ensure`` rebuilds only what changed.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos import versions
from chaos.cluster.engine import docker_client
from chaos.cluster.images.catalog import Role
from chaos.errors import ImageBuildFailed, ToolMissing
from chaos.maven import copy_runtime_classpath
from chaos.paths import cache_dir
from chaos.progress import console, follow, run_logged, step
from chaos.run.locks import locked

CONTEXT_DIR = Path(__file__).parent / "context"
HASH_LABEL = "chaos-harness.build-hash"
BUILD_LOCK_TIMEOUT_S = 3600.0
"""How long a session waits for another one building the same image (a cold JRE base takes minutes)."""
# Bump when the base recipe below changes in a way the versions do not show.
_BASE_RECIPE_REVISION = "1"
_JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
_TRIMMED_DIRS = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/info",
    "usr/share/locale",
    "var/cache/apt/archives",
)


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _files_digest(directory: Path) -> str:
    parts: list[str] = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        parts += [str(path.relative_to(directory)), hashlib.sha256(path.read_bytes()).hexdigest()]
    return _digest(*parts)


@dataclass(frozen=True)
class LocalImage:
    """A locally built image: its tag, the hash of its inputs, and how to build it."""

    name: str
    tag: str
    build_hash: str
    builder: Callable[[LocalImage], None]
    depends_on: tuple[str, ...] = ()

    def state(self) -> str:
        """``current``, ``stale`` (built from other inputs) or ``missing``."""
        import docker.errors

        try:
            image = docker_client().images.get(self.tag)
        except docker.errors.ImageNotFound:
            return "missing"
        labels = image.labels or {}
        return "current" if labels.get(HASH_LABEL) == self.build_hash else "stale"


def _base_hash() -> str:
    return _digest(
        versions.DEBIAN_SUITE, versions.JRE_PACKAGE, *versions.BASE_EXTRA_PACKAGES, _BASE_RECIPE_REVISION
    )


def recipes(kafka_version: str = versions.KAFKA_VERSION) -> dict[str, LocalImage]:
    """Every local image, keyed by name, in build order; ``kafka`` is the one of ``kafka_version``."""
    base = LocalImage(
        "jre-base", f"chaos-harness/jre-base:{versions.DEBIAN_SUITE}-17", _base_hash(), _build_base
    )
    kafka = LocalImage(
        "kafka",
        f"chaos-harness/kafka:{kafka_version}",
        _digest(
            base.build_hash,
            kafka_version,
            versions.SCALA_BINARY_VERSION,
            _logging_dependencies(kafka_version),
            _files_digest(CONTEXT_DIR / "kafka"),
            _files_digest(CONTEXT_DIR / "faultfs"),
        ),
        functools.partial(_build_kafka, kafka_version=kafka_version),
        depends_on=("jre-base",),
    )
    toxiproxy = LocalImage(
        "toxiproxy",
        f"chaos-harness/toxiproxy:{versions.TOXIPROXY_VERSION}",
        _digest(
            versions.TOXIPROXY_VERSION,
            versions.TOXIPROXY_GO_PACKAGE,
            _files_digest(CONTEXT_DIR / "toxiproxy"),
        ),
        _build_toxiproxy,
    )
    reaper = LocalImage(
        "reaper",
        f"chaos-harness/reaper:{versions.REAPER_VERSION}",
        _digest(versions.REAPER_VERSION, _files_digest(CONTEXT_DIR / "reaper")),
        _build_reaper,
    )
    return {image.name: image for image in (base, kafka, toxiproxy, reaper)}


ROLE_IMAGE = {Role.KAFKA: "kafka", Role.TOXIPROXY: "toxiproxy", Role.REAPER: "reaper"}


def ensure_local(name: str, *, force: bool = False, kafka_version: str = versions.KAFKA_VERSION) -> str:
    """Build ``name`` (and what it depends on) unless the current build is present; return its tag.
    ``kafka_version``: which Kafka the ``kafka`` image runs."""
    images = recipes(kafka_version)
    image = images[name]
    for dependency in image.depends_on:
        ensure_local(dependency, force=False, kafka_version=kafka_version)
    if force or image.state() != "current":
        # One build of an image at a time on this machine: they share its build dir and logs. A session that
        # waited finds the other's build current and is done.
        with locked(
            cache_dir() / "build" / f"{image.name}.lock",
            BUILD_LOCK_TIMEOUT_S,
            lambda holder: console.print(f"waiting for {holder}, which is building {image.tag}"),
        ):
            if force or image.state() != "current":
                with step(f"building {image.tag}"):
                    image.builder(image)
    return image.tag


# --- builders ---------------------------------------------------------------------------------------


def _require_tool(tool: str, fix: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolMissing(f"{tool} is needed to build images locally but is not installed", fix)
    return path


def _build_dir(image: LocalImage) -> Path:
    path = cache_dir() / "build" / f"{image.name}-{image.build_hash}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _log_path(image: LocalImage, what: str) -> Path:
    return cache_dir() / "logs" / f"{image.name}-{what}.log"


def debian_mirror(apt_dir: Path = Path("/etc/apt")) -> str:
    """The Debian mirror this machine's apt uses (``$CHAOS_DEBIAN_MIRROR`` overrides).

    Reads one-line ``deb URI suite ...`` entries and deb822 ``URIs:`` fields; the first URI whose path
    ends in ``/debian`` (not ``/debian-security``) wins.
    """
    override = os.environ.get("CHAOS_DEBIAN_MIRROR")
    if override:
        return override
    candidates: list[str] = []
    for path in [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*"))]:
        if not path.is_file() or path.suffix not in {"", ".list", ".sources"}:
            continue
        text = path.read_text(errors="replace")
        candidates += re.findall(r"^\s*URIs:\s*(\S+)", text, flags=re.MULTILINE)
        candidates += re.findall(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+", text, flags=re.MULTILINE)
    for uri in candidates:
        if uri.rstrip("/").endswith("/debian"):
            return uri
    raise ToolMissing(
        f"no Debian mirror found in {apt_dir}/sources.list*",
        "set CHAOS_DEBIAN_MIRROR to a Debian mirror URL (or use CHAOS_IMAGES=official)",
    )


def _build_base(image: LocalImage) -> None:
    debootstrap = _require_tool("debootstrap", "apt-get install -y debootstrap")
    if os.geteuid() != 0:
        raise ToolMissing(
            "debootstrap must run as root to build the JRE base image",
            "run `chaos images build` as root, or use CHAOS_IMAGES=official on a host that can pull",
        )
    packages = ",".join((versions.JRE_PACKAGE, *versions.BASE_EXTRA_PACKAGES))
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        run_logged(
            [
                debootstrap,
                "--variant=minbase",
                f"--include={packages}",
                versions.DEBIAN_SUITE,
                str(rootfs),
                debian_mirror(),
            ],
            _log_path(image, "debootstrap"),
            f"debootstrap {versions.DEBIAN_SUITE} + {versions.JRE_PACKAGE}",
        )
        for relative in _TRIMMED_DIRS:
            shutil.rmtree(rootfs / relative, ignore_errors=True)
        for lists in (rootfs / "var/lib/apt/lists").glob("*_*"):
            lists.unlink()
        tarball = Path(tmp) / "rootfs.tar"
        run_logged(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."],
            _log_path(image, "tar"),
            "packing the root filesystem",
        )
        repository, tag = image.tag.rsplit(":", 1)
        changes = [
            f"ENV JAVA_HOME={_JAVA_HOME}",
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            f"LABEL {HASH_LABEL}={image.build_hash}",
            'CMD ["/bin/bash"]',
        ]
        with step("docker import"):
            docker_client().api.import_image(
                src=str(tarball), repository=repository, tag=tag, changes=changes
            )


def _docker_build(image: LocalImage, context: Path, buildargs: dict[str, str] | None = None) -> None:
    api = docker_client().api
    stream = api.build(
        path=str(context),
        tag=image.tag,
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
        buildargs=buildargs or {},
        labels={HASH_LABEL: image.build_hash},
    )
    errors: list[str] = []

    def lines(chunks: Iterator[dict[str, Any]]) -> Iterator[str]:
        for chunk in chunks:
            if "error" in chunk:
                errors.append(str(chunk["error"]))
                yield f"ERROR: {chunk['error']}"
            elif "stream" in chunk:
                yield str(chunk["stream"])

    tail = follow(lines(stream), _log_path(image, "docker-build"), f"docker build {image.tag}")
    if errors:
        raise ImageBuildFailed(f"docker build {image.tag} failed: {errors[-1]}\n    " + "\n    ".join(tail))


def _fresh_context(image: LocalImage, source: Path) -> Path:
    context = _build_dir(image) / "context"
    if context.exists():
        shutil.rmtree(context)
    shutil.copytree(source, context)
    return context


_LOGGING_DEPENDENCY = """    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
"""


def _logging_dependencies(kafka_version: str) -> str:
    """The POM dependencies that give a Kafka release its logging (its own POM has no SLF4J binding)."""
    if versions.kafka_logging(kafka_version) == "reload4j":
        wanted = [
            ("ch.qos.reload4j", "reload4j", versions.RELOAD4J_VERSION),
            ("org.slf4j", "slf4j-reload4j", versions.SLF4J_VERSION),
        ]
    else:
        wanted = [("org.apache.logging.log4j", "log4j-slf4j-impl", versions.LOG4J_VERSION)]
    return "".join(_LOGGING_DEPENDENCY.format(group=g, artifact=a, version=v) for g, a, v in wanted)


def kafka_pom(kafka_version: str) -> str:
    """The POM whose runtime classpath is the broker of ``kafka_version``."""
    pom = (CONTEXT_DIR / "kafka" / "pom.xml").read_text()
    return (
        pom.replace("@KAFKA_VERSION@", kafka_version)
        .replace("@SCALA_BINARY_VERSION@", versions.SCALA_BINARY_VERSION)
        .replace("@LOGGING_DEPENDENCIES@\n", _logging_dependencies(kafka_version))
    )


def _build_kafka(image: LocalImage, *, kafka_version: str) -> None:
    base = recipes(kafka_version)["jre-base"].tag
    libs_cache = _build_dir(image) / "libs"
    if not any(libs_cache.glob("kafka_*.jar")):
        pom_dir = _build_dir(image) / "maven"
        pom_dir.mkdir(exist_ok=True)
        (pom_dir / "pom.xml").write_text(kafka_pom(kafka_version))
        copy_runtime_classpath(
            pom_dir,
            libs_cache,
            _log_path(image, f"maven-{kafka_version}"),
            f"fetching Kafka {kafka_version} jars with Maven",
        )
    context = _fresh_context(image, CONTEXT_DIR / "kafka")
    (context / "pom.xml").unlink()
    shutil.copytree(libs_cache, context / "libs")
    _go_build(image, CONTEXT_DIR / "faultfs", context / "faultfs")
    _docker_build(image, context, {"BASE_IMAGE": base})


def _go_env(bin_dir: Path) -> dict[str, str]:
    return {**os.environ, "GOBIN": str(bin_dir), "CGO_ENABLED": "0", "GOFLAGS": "-trimpath"}


def _build_toxiproxy(image: LocalImage) -> None:
    go = _require_tool("go", "install Go >= 1.23 (Debian's golang is too old) and put it on PATH")
    context = _fresh_context(image, CONTEXT_DIR / "toxiproxy")
    bin_dir = _build_dir(image) / "bin"
    run_logged(
        [go, "install", "-ldflags=-s -w", f"{versions.TOXIPROXY_GO_PACKAGE}@v{versions.TOXIPROXY_VERSION}"],
        _log_path(image, "go"),
        f"go install toxiproxy v{versions.TOXIPROXY_VERSION}",
        env=_go_env(bin_dir),
    )
    shutil.copy2(bin_dir / "server", context / "toxiproxy-server")
    _docker_build(image, context)


def _go_build(image: LocalImage, source: Path, binary: Path) -> None:
    """A static binary of the Go module in ``source`` (the harness's own) at ``binary``."""
    go = _require_tool("go", "install Go >= 1.23 and put it on PATH")
    run_logged(
        [go, "build", "-ldflags=-s -w", "-o", str(binary), "."],
        _log_path(image, f"go-{source.name}"),
        f"go build {source.name}",
        cwd=source,
        env=_go_env(binary.parent),
    )


def _build_reaper(image: LocalImage) -> None:
    source = CONTEXT_DIR / "reaper"
    context = _build_dir(image) / "context"
    context.mkdir(exist_ok=True)
    shutil.copy2(source / "Dockerfile", context / "Dockerfile")
    _go_build(image, source, context / "reaper")
    _docker_build(image, context)


def image_present(ref: str) -> bool:
    """Whether ``ref`` is in the local engine."""
    import docker.errors

    try:
        docker_client().images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True
