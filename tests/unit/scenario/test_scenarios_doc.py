"""docs/scenarios.md is what scripts/scenarios_doc.py writes from the scenario modules' docstrings."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[3]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scenarios_doc", ROOT / "scripts" / "scenarios_doc.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_the_scripts_output() -> None:
    committed = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
    assert committed == _script().render(), "docs/scenarios.md is stale: run `make docs`"


def test_every_scenario_module_has_its_section() -> None:
    page = _script().render()
    for path in sorted((ROOT / "scenarios").glob("test_*.py")):
        assert f"(`scenarios/{path.name}`)" in page, path.name
