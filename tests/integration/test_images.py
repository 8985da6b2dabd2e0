"""Image provisioning on the real engine: local builds are cached; failed pulls are fast and say why."""

from __future__ import annotations

import subprocess
import time

import pytest

from chaos.cluster.images import Role, Source, ensure_images
from chaos.cluster.images.local import recipes
from chaos.errors import ImagePullFailed
from chaos.paths import REPO_ROOT

pytestmark = pytest.mark.integration

MISSING = "chaos-harness-test/never-published:0"
CHAOS = str(REPO_ROOT / ".venv" / "bin" / "chaos")


@pytest.fixture
def unpullable_officials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point every official reference at an image no registry has, so pulls fail on any host."""
    for role in Role:
        monkeypatch.setenv(f"CHAOS_{role.value.upper()}_IMAGE", f"{MISSING}-{role.value}")


def test_local_images_are_current_and_ensure_is_fast() -> None:
    ensure_images(Source.LOCAL)  # builds whatever is missing; the timed call below must find it all
    started = time.monotonic()
    chosen = ensure_images(Source.LOCAL)
    elapsed = time.monotonic() - started
    print(f"ensure (local, nothing changed): {elapsed:.2f} s")
    assert elapsed < 5
    assert {name: image.state() for name, image in recipes().items()} == dict.fromkeys(recipes(), "current")
    assert chosen.kafka.startswith("chaos-harness/kafka:")
    assert all(chosen.source(role) is Source.LOCAL for role in Role)


@pytest.mark.usefixtures("unpullable_officials")
def test_official_source_fails_fast_naming_the_image_and_the_fix() -> None:
    started = time.monotonic()
    with pytest.raises(ImagePullFailed) as raised:
        ensure_images(Source.OFFICIAL)
    elapsed = time.monotonic() - started
    print(f"official pull failure after {elapsed:.2f} s")
    assert elapsed < 30
    message = str(raised.value)
    assert f"{MISSING}-kafka" in message
    assert "CHAOS_IMAGES=local" in message


@pytest.mark.usefixtures("unpullable_officials")
def test_auto_falls_back_to_local_builds() -> None:
    chosen = ensure_images(Source.AUTO)
    assert all(chosen.source(role) is Source.LOCAL for role in Role)
    assert chosen.toxiproxy == recipes()["toxiproxy"].tag


def test_cli_ensure_with_official_exits_2_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAOS_KAFKA_IMAGE", f"{MISSING}-kafka")
    monkeypatch.setenv("CHAOS_IMAGES", "official")
    proc = subprocess.run(
        [CHAOS, "images", "ensure"], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2
    assert f"{MISSING}-kafka" in proc.stderr
    assert "CHAOS_IMAGES=local" in proc.stderr


def test_doctor_passes_on_a_provisioned_machine() -> None:
    proc = subprocess.run([CHAOS, "doctor"], capture_output=True, text=True, timeout=120, check=False)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("docker engine", "images", "java", "spark kafka connector", "python packages"):
        assert f"ok   {name}" in proc.stdout
