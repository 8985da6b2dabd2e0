"""The reliability suite (real containers, real signals, minutes per test) runs only when asked for.

``pytest -m reliability`` or naming ``tests/reliability`` (a file, a node id) runs it; a bare ``pytest`` or
``pytest tests`` (``make test``) leaves it out, as the root conftest leaves the scenarios out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
