"""The harness's pytest plugin: options, markers and fixtures only; the library is imported lazily."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from chaos.cluster.images import ImageSet


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "Kafka chaos harness")
    group.addoption(
        "--chaos-images",
        choices=("official", "local", "auto"),
        default=None,
        help="Where container images come from (default: $CHAOS_IMAGES, else auto).",
    )
    group.addoption(
        "--chaos-report-dir",
        default=None,
        help="Directory for run artifacts and reports (default: $CHAOS_REPORT_DIR, else reports/).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: a chaos scenario on a real Kafka cluster (run with -m chaos).")
    config.addinivalue_line("markers", "smoke: a quick end-to-end check of images, clients and Spark.")
    config.addinivalue_line("markers", "integration: needs a Docker engine and the harness's images.")


@pytest.fixture(scope="session")
def chaos_images(pytestconfig: pytest.Config) -> ImageSet:
    """The images of the selected source, pulled or built as needed (once per session)."""
    from chaos.cluster.images import ensure_images

    return ensure_images(pytestconfig.getoption("--chaos-images"))


@pytest.fixture(scope="session")
def chaos_report_dir(pytestconfig: pytest.Config) -> Path:
    """Root of this session's artifacts."""
    from chaos.paths import reports_dir

    option = pytestconfig.getoption("--chaos-report-dir")
    root = Path(option) if option else reports_dir()
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(scope="session")
def spark_session() -> Iterator[object]:
    """A local Spark session with the Kafka connector, shared by the session's tests."""
    from chaos.audit.spark import spark_session as start

    session = start()
    yield session
    session.stop()
