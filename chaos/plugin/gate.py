"""The plugin's gate wiring: under ``--chaos-gate`` the gate file read and its hooks registered
(:mod:`chaos.scenario.gaterun`), and every ``@chaos_scenario`` test parametrized over its variants."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    pass


def enable_gate(config: pytest.Config) -> None:
    """Under ``--chaos-gate``: the gate file read and linted, the gate's hooks registered."""
    options = ("--chaos-gate", "--chaos-calibrate", "--chaos-gate-baseline", "--chaos-gate-cases")
    if not any(config.getoption(o) for o in options):
        return
    from chaos.scenario.gaterun import configure_gate

    def render_index(root: Path) -> None:
        from chaos.report.render import render_index as render

        render(root)

    configure_gate(config, render_index)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize each ``@chaos_scenario`` test over its variants (under ``--chaos-gate``: the gate's)."""
    if getattr(metafunc.function, "scenario", None) is None:
        return
    from chaos.scenario.api import GATE_PLUGIN, parametrize

    gate = metafunc.config.pluginmanager.get_plugin(GATE_PLUGIN)
    parametrize(metafunc, gate.session.params if gate is not None else None)
