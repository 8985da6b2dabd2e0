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


def test_a_registry_mirror_prefixes_every_official_name_but_not_a_full_override(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for role in Role:
        monkeypatch.delenv(f"CHAOS_{role.value.upper()}_IMAGE", raising=False)
    monkeypatch.setenv("CHAOS_REGISTRY_MIRROR", "127.0.0.1:5000")
    assert official_ref(Role.KAFKA, "4.4.0") == "127.0.0.1:5000/apache/kafka:4.4.0"
    assert official_ref(Role.REAPER) == f"127.0.0.1:5000/{versions.OFFICIAL_RYUK_IMAGE}"
    monkeypatch.setenv("CHAOS_REGISTRY_MIRROR", "mirror.example.internal/hub")
    assert official_ref(Role.TOXIPROXY) == f"mirror.example.internal/hub/{versions.OFFICIAL_TOXIPROXY_IMAGE}"
    monkeypatch.setenv("CHAOS_TOXIPROXY_IMAGE", "elsewhere.example/toxiproxy:2.12.0")
    assert official_ref(Role.TOXIPROXY) == "elsewhere.example/toxiproxy:2.12.0"
    for bad in ("http://127.0.0.1:5000", "127.0.0.1:5000/", "a b"):
        monkeypatch.setenv("CHAOS_REGISTRY_MIRROR", bad)
        with pytest.raises(ConfigError, match=r"CHAOS_REGISTRY_MIRROR=.*host\[:port\]\[/path\]"):
            official_ref(Role.KAFKA)


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


def test_registry_of_names_the_host_of_a_reference() -> None:
    from chaos.cluster.images import registry_of

    assert registry_of("apache/kafka:4.1.1") == ""
    assert registry_of("127.0.0.1:5000/apache/kafka:4.1.1") == "127.0.0.1:5000"
    assert registry_of("mirror.example.internal/hub/testcontainers/ryuk:0.14.0") == "mirror.example.internal"
    assert registry_of("localhost/kafka:1") == "localhost"
    assert registry_of("kafka:1") == ""


@pytest.mark.parametrize(
    "reason",
    [
        "request canceled (Client.Timeout exceeded while awaiting headers)",
        'Get "http://127.0.0.1:5999/v2/": context deadline exceeded',  # the engine's, seen in tests/platforms
        "dial tcp 127.0.0.1:5999: connect: connection refused",
    ],
)
def test_auto_tries_an_unreachable_registry_once_then_builds_locally(
    monkeypatch: pytest.MonkeyPatch, reason: str
) -> None:
    import chaos.cluster.images as images
    from chaos.errors import ImagePullFailed

    monkeypatch.setenv("CHAOS_REGISTRY_MIRROR", "127.0.0.1:5999")
    for role in Role:
        monkeypatch.delenv(f"CHAOS_{role.value.upper()}_IMAGE", raising=False)
    pulls: list[Role] = []

    def pull(role: Role, kafka_version: str) -> str:
        pulls.append(role)
        raise ImagePullFailed(reason, f"cannot pull: {reason}")

    monkeypatch.setattr(images, "pull_official", pull)
    monkeypatch.setattr(images, "image_present", lambda ref: False)
    monkeypatch.setattr(images, "ensure_local", lambda name, kafka_version: f"chaos-harness/{name}:local")
    chosen = ensure_images(Source.AUTO)
    assert pulls == [Role.KAFKA]  # the first pull timed out: the others did not wait for the same registry
    assert dict(chosen.sources) == {role: Source.LOCAL for role in Role}
    assert chosen.toxiproxy == "chaos-harness/toxiproxy:local"

    pulls.clear()

    def missing(role: Role, kafka_version: str) -> str:
        pulls.append(role)
        raise ImagePullFailed("manifest unknown", "cannot pull: manifest unknown")

    monkeypatch.setattr(images, "pull_official", missing)
    ensure_images(Source.AUTO)
    assert pulls == list(Role)  # a missing image says nothing about the registry: each is tried
