"""Repo-local glue only; the harness's fixtures live in the chaos pytest plugin (chaos/plugin/).

``pytest`` with no arguments runs this repo's own test suite (``testpaths``) and leaves the scenarios
(marker ``chaos``) out; ``pytest -m chaos`` runs every scenario, and naming a scenario file or node id runs
it as named.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.option.markexpr or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return
    scenarios = [item for item in items if item.get_closest_marker("chaos") is not None]
    if scenarios:
        kept = [item for item in items if item.get_closest_marker("chaos") is None]
        config.hook.pytest_deselected(items=scenarios)
        items[:] = kept
