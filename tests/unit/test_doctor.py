"""The doctor's checks fail with a fix when a precondition is missing (no Docker needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos import doctor


def test_java_missing_names_the_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    check = doctor.check_java()
    assert not check.ok
    assert "openjdk-17" in check.fix


def test_old_java_is_rejected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    check = doctor.check_java()
    assert not check.ok
    assert "11 < 17" in check.detail


def test_docker_unavailable_becomes_a_failed_check_with_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from chaos.cluster import engine

    engine.docker_client.cache_clear()
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    try:
        checks = doctor.run_checks()
    finally:
        engine.docker_client.cache_clear()
    by_name = {c.name: c for c in checks}
    assert not by_name["docker engine"].ok
    assert "make setup" in by_name["docker engine"].fix
    assert not by_name["images"].ok


def test_python_packages_match_the_lock() -> None:
    check = doctor.check_python_packages()
    assert check.ok, check.detail
