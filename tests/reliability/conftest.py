"""The reliability suite (real containers, real signals, minutes per test) runs only when asked for.

``pytest -m reliability`` or naming ``tests/reliability`` (a file, a node id) runs it; a bare ``pytest`` or
``pytest tests`` (``make test``) leaves it out, as the root conftest leaves the scenarios out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # the suite's helpers import Docker and the report; a bare `pytest` need not pay for that
    from tests.reliability.inner import MakeProject

HERE = Path(__file__).parent.resolve()


def _names_this_suite(config: pytest.Config) -> bool:
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "reliability" in (config.option.markexpr or "") or _names_this_suite(config):
        return
    left_out = [item for item in items if item.get_closest_marker("reliability") is not None]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item.get_closest_marker("reliability") is None]


@pytest.fixture
def inner(tmp_path: Path) -> Iterator[MakeProject]:
    """``inner(name, {path: text})``: a pytest project of its own under ``tmp_path`` to run inner sessions
    in (:class:`tests.reliability.inner.InnerProject`). At teardown every session's processes are killed and
    its clusters' resources removed, so a failed test leaves nothing running on the machine."""
    from tests.reliability.inner import InnerProject

    made: list[InnerProject] = []

    def make(name: str, files: Mapping[str, str]) -> InnerProject:
        project = InnerProject(tmp_path / name, files)
        made.append(project)
        return project

    try:
        yield make
    finally:
        for project in made:
            project.close()
