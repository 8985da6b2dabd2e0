"""Image source selection, official references and the apt mirror lookup (no Docker needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos import versions
from chaos.cluster.images import ensure_images
from chaos.cluster.images.catalog import Role, Source, official_ref
from chaos.cluster.images.local import debian_mirror, kafka_pom, recipes
from chaos.errors import ConfigError, ToolMissing


@pytest.mark.parametrize(
    ("raw", "expected"), [("official", Source.OFFICIAL), (" LOCAL ", Source.LOCAL), ("auto", Source.AUTO)]
)
def test_source_parses_each_choice(raw: str, expected: Source) -> None:
    assert Source.parse(raw) is expected


def test_source_falls_back_to_env_then_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAOS_IMAGES", "local")
    assert Source.parse(None) is Source.LOCAL
    monkeypatch.delenv("CHAOS_IMAGES")
    assert Source.parse(None) is Source.AUTO


def test_unknown_source_names_the_choices_and_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"'docker-hub' is not one of official, local, auto.*CHAOS_IMAGES"):
        Source.parse("docker-hub")


def test_official_refs_come_from_versions_and_can_be_overridden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAOS_KAFKA_IMAGE", raising=False)
    assert official_ref(Role.KAFKA) == f"apache/kafka:{versions.KAFKA_VERSION}"
    monkeypatch.setenv("CHAOS_TOXIPROXY_IMAGE", "mirror.example/toxiproxy:2.12.0")
    assert official_ref(Role.TOXIPROXY) == "mirror.example/toxiproxy:2.12.0"


def test_each_supported_kafka_version_has_its_official_ref_and_local_recipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CHAOS_KAFKA_IMAGE", raising=False)
    kafkas = {v: recipes(v)["kafka"] for v in versions.SUPPORTED_KAFKA_VERSIONS}
    for version, image in kafkas.items():
        assert official_ref(Role.KAFKA, version) == f"apache/kafka:{version}"
        assert image.tag == f"chaos-harness/kafka:{version}"
        assert image.depends_on == ("jre-base",)
    assert len({image.build_hash for image in kafkas.values()}) == len(kafkas)  # each built and cached apart
    assert versions.KAFKA_VERSION in versions.SUPPORTED_KAFKA_VERSIONS
    default = recipes()["kafka"]
    assert (default.tag, default.build_hash) == (
        kafkas[versions.KAFKA_VERSION].tag,
        kafkas[versions.KAFKA_VERSION].build_hash,
    )


def artifact(name: str) -> str:
    return f"<artifactId>{name}</artifactId>"


@pytest.mark.parametrize(
    ("version", "logging", "not_there"),
    [
        ("3.9.2", (artifact("reload4j"), artifact("slf4j-reload4j")), artifact("log4j-slf4j-impl")),
        ("4.0.2", (artifact("log4j-slf4j-impl"),), artifact("reload4j")),
        ("4.4.0", (artifact("log4j-slf4j-impl"),), artifact("reload4j")),
    ],
)
def test_the_kafka_pom_pins_the_release_and_its_logging_binding(
    version: str, logging: tuple[str, ...], not_there: str
) -> None:
    pom = kafka_pom(version)
    assert f"<artifactId>kafka_{versions.SCALA_BINARY_VERSION}</artifactId>" in pom
    assert f"<version>{version}</version>" in pom
    assert all(dependency in pom for dependency in logging)
    assert not_there not in pom
    assert "@" not in pom  # every placeholder filled


def test_an_unsupported_kafka_version_is_refused_before_any_image_work() -> None:
    with pytest.raises(ConfigError, match=r"Kafka '3\.8\.0' is not supported: choose one of 3\.9\.2"):
        ensure_images("local", kafka_version="3.8.0")


def _apt_dir(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "sources.list.d").mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_mirror_from_deb822_skips_security(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CHAOS_DEBIAN_MIRROR", raising=False)
    apt = _apt_dir(
        tmp_path,
        {
            "sources.list.d/debian.sources": (
                "Types: deb\nURIs: http://mirror.test/debian-security\nSuites: bookworm-security\n\n"
                "Types: deb\nURIs: http://mirror.test/debian\nSuites: bookworm\nComponents: main\n"
            )
        },
    )
    assert debian_mirror(apt) == "http://mirror.test/debian"


def test_mirror_from_one_line_format_with_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CHAOS_DEBIAN_MIRROR", raising=False)
    apt = _apt_dir(tmp_path, {"sources.list": "deb [arch=amd64] http://mirror.test/debian/ bookworm main\n"})
    assert debian_mirror(apt) == "http://mirror.test/debian/"


def test_no_mirror_says_how_to_set_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CHAOS_DEBIAN_MIRROR", raising=False)
    with pytest.raises(ToolMissing, match="CHAOS_DEBIAN_MIRROR"):
        debian_mirror(_apt_dir(tmp_path, {}))
