"""Bad input fails at once with one clear error: ``chaos audit`` on a directory it cannot audit (exit 2,
nothing written, no traceback) and an image pull that times out (``auto`` still builds locally)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chaos.cluster import images
from chaos.cluster.images import Role, Source, ensure_images, pull_official
from chaos.cluster.images.local import ROLE_IMAGE
from chaos.errors import ImagePullFailed
from chaos.history.segments import RunDir
from chaos.run.layout import AUDIT_NAME, SCENARIO_NAME

# --- chaos audit -------------------------------------------------------------------------------------------


def chaos(
    *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``chaos ARGS`` through the real entry point (its error handling included)."""
    command = [*prefix, sys.executable, "-c", "from chaos.cli import main; main()", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=env)


def a_run(path: Path) -> Path:
    """A directory that looks like one run's: a history segment (its content is never read here)."""
    segment = RunDir.of(path).segment_path(1)
    segment.parent.mkdir(parents=True)
    segment.write_text("{}\n")
    return path


def assert_refused(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    out = " ".join((proc.stdout + proc.stderr).split())  # the error console wraps long lines
    assert proc.returncode == 2, out
    assert "Traceback" not in out
    for needle in needles:
        assert needle in out, out


def test_an_empty_directory_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    proc = chaos("audit", str(tmp_path), "--engine", "reference")
    assert_refused(proc, str(tmp_path), "is not a run directory", "reports/tests/<test>/")
    assert list(tmp_path.iterdir()) == []


def test_a_directory_of_runs_names_one_of_them(tmp_path: Path) -> None:
    run = a_run(tmp_path / "tests" / "test_x")
    proc = chaos("audit", str(tmp_path), "--engine", "reference")
    assert_refused(proc, "holds 1 run(s)", f"chaos audit {run}")
    assert not (tmp_path / AUDIT_NAME).exists()


def test_a_torn_run_without_history_is_audited_as_unknown(tmp_path: Path) -> None:
    """A run killed before its first event still has its scenario.json: inconclusive (3), not bad input."""
    (tmp_path / SCENARIO_NAME).write_text("{}")
    proc = chaos("audit", str(tmp_path), "--engine", "reference")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / AUDIT_NAME).exists()


@pytest.mark.parametrize(
    ("java_home", "said"),
    [(None, "no java on PATH and no JAVA_HOME"), ("/nowhere/jdk", "JAVA_HOME=/nowhere/jdk has no bin/java")],
)
def test_the_spark_engine_without_java_says_how_to_get_one(
    tmp_path: Path, java_home: str | None, said: str
) -> None:
    run = a_run(tmp_path / "run")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path / "empty-bin")  # no java (nor mvn) to be found
    if java_home is not None:
        env["JAVA_HOME"] = java_home
    proc = chaos("audit", str(run), "--engine", "spark", env=env)
    assert_refused(proc, said, "openjdk-17-jre-headless", "--engine reference")
    assert not (run / AUDIT_NAME).exists()


def _read_only_prefix(path: Path) -> tuple[str, ...]:
    """A command prefix that runs its command with ``path`` mounted read-only (root ignores file modes),
    or skips the test where this machine allows neither."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        return ()
    quoted = shlex.quote(str(path))
    script = f'mount --bind {quoted} {quoted} && mount -o remount,bind,ro {quoted} {quoted} && exec "$@"'
    prefix = ("unshare", "-m", "sh", "-c", script, "sh")
    if shutil.which("unshare") is None:
        pytest.skip("no unshare to mount a directory read-only as root")
    probe = subprocess.run([*prefix, "touch", str(path / "probe")], capture_output=True, check=False)
    if probe.returncode == 0 or (path / "probe").exists():
        pytest.skip("cannot mount a directory read-only here")
    return prefix


def test_a_read_only_run_directory_is_refused_before_the_audit(tmp_path: Path) -> None:
    run = a_run(tmp_path / "run")
    proc = chaos("audit", str(run), "--engine", "reference", prefix=_read_only_prefix(run))
    run.chmod(0o755)
    assert_refused(proc, str(run), "is not writable", "Read-only file system" if os.geteuid() == 0 else "")
    assert "audit a copy: cp -r" in proc.stdout + proc.stderr
    assert not (run / AUDIT_NAME).exists()


# --- image pulls -----------------------------------------------------------------------------------------


class _Images:
    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.pulls: list[tuple[str, str]] = []

    def pull(self, repository: str, tag: str) -> None:
        self.pulls.append((repository, tag))
        raise self.error


class _Client:
    def __init__(self, error: BaseException) -> None:
        self.images = _Images(error)


def _no_engine(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> _Client:
    client = _Client(error)
    monkeypatch.setattr(images, "docker_client", lambda: client)
    monkeypatch.setattr(images, "image_present", lambda ref: False)
    return client


def _timeouts() -> list[BaseException]:
    import requests.exceptions
    import urllib3.exceptions

    return [
        requests.exceptions.ReadTimeout(
            "UnixHTTPConnectionPool(host='localhost', port=None): Read timed out. (read timeout=60)"
        ),
        requests.exceptions.ConnectionError("Connection aborted: RemoteDisconnected"),
        urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead(0 bytes read)"),
    ]


@pytest.mark.parametrize("error", _timeouts(), ids=lambda e: type(e).__name__)
def test_a_pull_that_times_out_is_an_image_pull_failure(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    client = _no_engine(monkeypatch, error)
    with pytest.raises(ImagePullFailed) as caught:
        pull_official(Role.KAFKA)
    assert client.images.pulls, "the pull was attempted"
    assert caught.value.reason.startswith(type(error).__name__)
    assert str(error) in str(caught.value)
    assert "CHAOS_IMAGES=local" in str(caught.value)


def test_auto_falls_back_to_the_local_build_when_pulls_time_out(monkeypatch: pytest.MonkeyPatch) -> None:
    import requests.exceptions

    _no_engine(monkeypatch, requests.exceptions.ReadTimeout("Read timed out. (read timeout=60)"))
    built: list[str] = []

    def local(name: str, **_: Any) -> str:
        built.append(name)
        return f"chaos-local/{name}:test"

    monkeypatch.setattr(images, "ensure_local", local)
    chosen = ensure_images(Source.AUTO)
    assert {src for _, src in chosen.sources} == {Source.LOCAL}
    assert chosen.kafka == f"chaos-local/{ROLE_IMAGE[Role.KAFKA]}:test"
    assert len(built) == len(Role)


def test_official_still_fails_on_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    import requests.exceptions

    _no_engine(monkeypatch, requests.exceptions.ConnectTimeout("timed out"))
    monkeypatch.setattr(images, "ensure_local", lambda name, **_: pytest.fail("official must not build"))
    with pytest.raises(ImagePullFailed, match="ConnectTimeout: timed out"):
        ensure_images(Source.OFFICIAL)


def test_the_spark_job_refuses_a_directory_without_a_history(tmp_path: Path) -> None:
    """``python -m chaos.gate.job`` (the spark-submit entry): exit 2 and nothing written, not ``unknown``."""
    from chaos.gate.job import main

    assert main([str(tmp_path)]) == 2
    assert list(tmp_path.iterdir()) == []
