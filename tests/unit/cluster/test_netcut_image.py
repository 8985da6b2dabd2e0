"""Which image a network fault's sidecar runs: an override, the local JRE base, or — when the session runs
official images and never built that base — an error with the fix instead of a root-only build mid-fault."""

from __future__ import annotations

import pytest

import chaos.cluster.images.local as local
from chaos.cluster.images import ImageSet, Role, Source
from chaos.errors import FaultError
from chaos.faults.network import NETCUT_IMAGE_ENV, sidecar_image


def image_set(source: Source) -> ImageSet:
    return ImageSet("kafka:x", "toxiproxy:x", "reaper:x", tuple((role, source) for role in Role))


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    built: list[str] = []

    def ensure_local(name: str, **_: object) -> str:
        built.append(name)
        return f"local/{name}"

    monkeypatch.delenv(NETCUT_IMAGE_ENV, raising=False)
    monkeypatch.setattr(local, "ensure_local", ensure_local)
    return built


def test_an_override_is_used_as_it_is(monkeypatch: pytest.MonkeyPatch, builds: list[str]) -> None:
    monkeypatch.setenv(NETCUT_IMAGE_ENV, "tools.example/iptables@sha256:" + "0" * 64)
    assert sidecar_image(image_set(Source.OFFICIAL)).endswith("0" * 64)
    assert builds == []


def test_official_images_without_the_local_base_name_the_fix_and_build_nothing(
    monkeypatch: pytest.MonkeyPatch, builds: list[str]
) -> None:
    monkeypatch.setattr(local, "image_present", lambda ref: False)
    with pytest.raises(FaultError, match=rf"{NETCUT_IMAGE_ENV}.*chaos images build jre-base"):
        sidecar_image(image_set(Source.OFFICIAL))
    assert builds == []


def test_the_local_base_serves_when_present_or_buildable(
    monkeypatch: pytest.MonkeyPatch, builds: list[str]
) -> None:
    monkeypatch.setattr(local, "image_present", lambda ref: True)
    assert sidecar_image(image_set(Source.OFFICIAL)) == "local/jre-base"
    monkeypatch.setattr(local, "image_present", lambda ref: False)
    assert sidecar_image(image_set(Source.LOCAL)) == "local/jre-base"
    assert sidecar_image() == "local/jre-base"
    assert builds == ["jre-base"] * 3
