"""The official-image path, run on this machine: a container registry built from the Go module
proxy (the CNCF distribution registry) runs on 127.0.0.1 for the test's lifetime, the locally built images
are pushed into it under their official repository names, and a pytest session **as a non-root user in the
docker group** runs the smoke test and one catalog scenario with ``CHAOS_IMAGES=official`` and
``CHAOS_REGISTRY_MIRROR`` pointing at it. ``go``, ``mvn`` and ``debootstrap`` are shims on that session's
PATH that record any call and fail: the test asserts none was called (no local build step), that every
image the session used came from the registry (the mirror's references were absent before and are
present after), and that the session passed. A second test points ``auto`` at a registry that accepts
connections and never answers: every image falls back to the local build, in bounded time.

Costs minutes (a cold ``go install`` of the registry, pushes, two sessions): ``make platforms``.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos import versions
from chaos.cluster.engine import docker_client
from chaos.cluster.images import Role, Source, ensure_images
from chaos.cluster.images.catalog import ENV_MIRROR, official_name
from chaos.cluster.images.local import ROLE_IMAGE, ensure_local, image_present
from chaos.cluster.ports import free_loopback_ports
from chaos.paths import cache_dir

pytestmark = pytest.mark.platforms

ROOT = Path(__file__).resolve().parents[2]
REGISTRY_PACKAGE = "github.com/distribution/distribution/v3/cmd/registry"
REGISTRY_VERSION = "v3.0.0"
NONROOT_USER = "chaos-nonroot"
BUILD_TOOLS = ("go", "mvn", "debootstrap")
SESSION_TIMEOUT_S = 900
KAFKA = versions.KAFKA_VERSION
SCENARIO = "scenarios/test_d3_crash_before_commit.py::test_d3[remediated]"


def registry_binary() -> Path:
    """The registry, ``go install``ed from the module proxy once and cached."""
    bin_dir = cache_dir() / "tools" / f"registry-{REGISTRY_VERSION}"
    binary = bin_dir / "registry"
    if not binary.exists():
        go = shutil.which("go")
        if go is None:
            pytest.fail("Go is needed to build the test's registry (go install from the module proxy)")
        env = {**os.environ, "GOBIN": str(bin_dir), "CGO_ENABLED": "0"}
        subprocess.run(
            [go, "install", f"{REGISTRY_PACKAGE}@{REGISTRY_VERSION}"], env=env, check=True, timeout=900
        )
    return binary


@contextlib.contextmanager
def registry(tmp: Path) -> Iterator[str]:
    """A registry on 127.0.0.1 (its storage in ``tmp``) for the block; its ``host:port``."""
    (port,) = free_loopback_ports(1)
    config = tmp / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n"
        f"storage:\n  filesystem:\n    rootdirectory: {tmp / 'storage'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    log = (tmp / "registry.log").open("wb")
    process = subprocess.Popen([str(registry_binary()), "serve", str(config)], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert process.poll() is None, (tmp / "registry.log").read_text()
            assert time.monotonic() < deadline, "the registry did not answer within 30 s"
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()


@contextlib.contextmanager
def silent_registry() -> Iterator[str]:
    """A "registry" on 127.0.0.1 that accepts every connection and never answers; its ``host:port``."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    server.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        server.close()


def push_locals_as_official(mirror: str) -> list[str]:
    """Push every role's local build to ``mirror`` under its official name; untag it here so that a
    session must pull it. The mirror's references."""
    client = docker_client()
    refs = []
    for role in Role:
        name = official_name(role, KAFKA)
        local = ensure_local(ROLE_IMAGE[role], kafka_version=KAFKA)
        ref = f"{mirror}/{name}"
        repository, _, tag = ref.rpartition(":")
        client.images.get(local).tag(repository, tag)
        for line in client.api.push(repository, tag=tag, stream=True, decode=True):
            assert "error" not in line, f"push of {ref} failed: {line}"
        client.images.remove(ref)
        refs.append(ref)
    return refs


def nonroot_user() -> pwd.struct_passwd:
    """A user in the docker group who is not root: created when this runs as root."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam(NONROOT_USER)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--groups", "docker", NONROOT_USER], check=True)
        return pwd.getpwnam(NONROOT_USER)


def user_python() -> tuple[str, dict[str, str]]:
    """An interpreter the non-root user can run, and the environment that gives it this project's installed
    packages. This session's may live under root's home (pyenv): then the system's python3 of the same
    minor version, with the venv's site-packages and the checkout on PYTHONPATH."""
    if os.geteuid() != 0:
        return sys.executable, {}
    system = Path("/usr/bin/python3")
    probe = subprocess.run(
        [str(system), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    assert probe.stdout.strip() == str(sys.version_info[:2]), (
        f"{system} is not Python {sys.version_info[:2]}: the non-root session cannot use this venv's packages"
    )
    site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    return str(system), {"PYTHONPATH": f"{ROOT}:{site}"}


def tool_shims(directory: Path, calls: Path) -> None:
    """``go``, ``mvn``, ``debootstrap`` that record their call in ``calls`` and fail."""
    directory.mkdir(parents=True, exist_ok=True)
    for tool in BUILD_TOOLS:
        shim = directory / tool
        shim.write_text(f'#!/bin/sh\necho "{tool} $*" >> {calls}\nexit 97\n')
        shim.chmod(0o755)


@pytest.fixture
def user_home() -> Iterator[tuple[pwd.struct_passwd, Path]]:
    """The non-root user and a fresh home of theirs (outside pytest's root-only tmp tree), removed after."""
    user = nonroot_user()
    home = Path(tempfile.mkdtemp(prefix="chaos-platforms-"))
    os.chown(home, user.pw_uid, user.pw_gid)
    try:
        yield user, home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_official_images_from_a_registry_mirror_need_no_build_and_no_root(
    tmp_path: Path, user_home: tuple[pwd.struct_passwd, Path]
) -> None:
    user, home = user_home
    assert user.pw_uid != 0
    docker_gid = grp.getgrnam("docker").gr_gid
    assert user.pw_name in grp.getgrnam("docker").gr_mem or user.pw_gid == docker_gid
    calls = home / "build-tool-calls.log"
    calls.touch()
    calls.chmod(0o666)
    tool_shims(home / "shims", calls)
    with registry(tmp_path) as mirror:
        refs = push_locals_as_official(mirror)
        assert not any(image_present(ref) for ref in refs)
        python, python_env = user_python()
        env = {
            **python_env,
            "PATH": f"{home / 'shims'}:{os.environ['PATH']}",
            "HOME": str(home),
            "CHAOS_IMAGES": "official",
            ENV_MIRROR: mirror,
            "CHAOS_CACHE_DIR": str(home / "cache"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "LANG": "C.UTF-8",
        }
        as_user: dict[str, Any] = (
            {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [docker_gid]}
            if os.geteuid() == 0
            else {}
        )
        started = time.monotonic()
        session = subprocess.run(
            [
                python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "tests/integration/test_smoke.py", SCENARIO,
                "-k", f"{KAFKA} and not spark or test_d3",
                "--chaos-report-dir", str(home / "reports"),
                # the images are under test, not the audit: Spark's connector jars come from Maven, and
                # this user has no build tool (as Spark's smoke test, deselected above)
                "--chaos-audit-engine", "reference",
            ],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=SESSION_TIMEOUT_S, **as_user,
        )  # fmt: skip
        took = time.monotonic() - started
        pulled = [ref for ref in refs if image_present(ref)]
    summary = session.stdout.strip().splitlines()[-1] if session.stdout.strip() else session.stderr[-2000:]
    print(f"\nas {user.pw_name} (uid {user.pw_uid}) from {mirror}: {summary} in {took:.0f} s")
    assert session.returncode == 0, session.stdout[-4000:] + session.stderr[-2000:]
    assert summary.startswith("4 passed"), summary  # 3 smoke tests on Kafka KAFKA, D3's remediated variant
    assert calls.read_text() == "", f"a local build step ran: {calls.read_text()}"
    assert pulled == refs, f"not pulled from the registry: {sorted(set(refs) - set(pulled))}"
    for ref in refs:
        docker_client().images.remove(ref)


def test_auto_falls_back_to_the_local_builds_when_the_registry_never_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import chaos.cluster.images as images_module

    pulls: list[Role] = []
    pull = images_module.pull_official

    def counted(role: Role, kafka_version: str) -> str:
        pulls.append(role)
        return pull(role, kafka_version)

    monkeypatch.setattr(images_module, "pull_official", counted)
    for role in Role:
        ensure_local(ROLE_IMAGE[role], kafka_version=KAFKA)  # the fallback's images, built or cached
    with silent_registry() as mirror:
        monkeypatch.setenv(ENV_MIRROR, mirror)
        for role in Role:
            monkeypatch.delenv(f"CHAOS_{role.value.upper()}_IMAGE", raising=False)
        started = time.monotonic()
        images = ensure_images(Source.AUTO, kafka_version=KAFKA)
        took = time.monotonic() - started
    print(f"\nauto with a silent registry at {mirror}: all local after {took:.1f} s, {len(pulls)} pull(s)")
    assert dict(images.sources) == {role: Source.LOCAL for role in Role}
    assert pulls == [Role.KAFKA], "the registry that never answered was waited on more than once"
    assert took < 150, f"{took:.1f} s for one pull of a registry that never answers"
