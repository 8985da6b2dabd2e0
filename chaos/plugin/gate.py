"""The plugin's gate wiring: under ``--chaos-gate`` the gate file read and its hooks registered
(:mod:`chaos.gate.driver`), and every ``@chaos_scenario`` test parametrized over its variants."""

from __future__ import annotations

import pytest


def enable_gate(config: pytest.Config) -> None:
    """Under ``--chaos-gate``: the gate file read and linted, the gate's hooks registered."""
    options = ("--chaos-gate", "--chaos-calibrate", "--chaos-gate-baseline", "--chaos-gate-cases")
    if not any(config.getoption(o) for o in options):
        return
    from chaos.gate.driver.gateplugin import configure_gate

    configure_gate(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize each ``@chaos_scenario`` test over its variants (under ``--chaos-gate``: the gate's)."""
    if getattr(metafunc.function, "scenario", None) is None:
        return
    from chaos.scenario.api import GATE_PLUGIN, parametrize

    gate = metafunc.config.pluginmanager.get_plugin(GATE_PLUGIN)
    parametrize(metafunc, gate.params if gate is not None else None)
