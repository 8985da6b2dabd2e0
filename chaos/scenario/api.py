"""The one public way to write a scenario test: :func:`chaos_scenario`.

.. code-block:: python

    SCENARIO = Scenario(..., variants=(Variant("vulnerable", ...), Variant("remediated", ...)))

    @chaos_scenario(SCENARIO)
    def test_mine(run: ScenarioRun) -> None:
        run.create_topic()
        ...
        result = run.finish()          # optional: called for you when the body returns without it
        result.symptom("the client logged X", bool(...))

The decorator marks the test ``chaos`` and records the scenario on it; the chaos plugin's
``pytest_generate_tests`` (:func:`parametrize`) parametrizes it over the scenario's variants (the parameter
is ``variant``, the ids the variant names). The test opens a :class:`~chaos.scenario.runner.ScenarioRun` of
the variant on the session's cluster, hands it to the body, finishes it if the body did not, and judges the
result: the verdict (the audit's anomalies against the claimed guarantee, ``unknown`` when a precondition
failed) must equal the variant's ``expected_verdict``; symptoms fail the test only in strict mode. The body
may ask for other fixtures by name after ``run``.

Under ``--chaos-gate GATE_FILE`` the parameter is the team's configuration instead (id ``gate``, a
:class:`~chaos.gate.driver.gatecase.GateCase`), judged by the verdict and the gate's thresholds only
(docs/gate.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.scenario.model import Scenario, ScenarioDefinitionError

if TYPE_CHECKING:
    import pytest

    from chaos.scenario.runner import ScenarioRun

Body = Callable[..., object]
TestFunction = Callable[..., None]
RUN_FIXTURE = "scenario_run"
"""The plugin's factory fixture that opens a run (``scenario_run(SCENARIO, variant)``)."""
GATE_PLUGIN = "chaos-gate"
"""The name the gate's hooks (:class:`~chaos.gate.driver.gateplugin.GatePlugin`) are registered under."""


def chaos_scenario(scenario: Scenario) -> Callable[[Body], TestFunction]:
    """Turn ``body(run, **fixtures)`` into the scenario's pytest test, one case per variant."""
    if not isinstance(scenario, Scenario):
        raise ScenarioDefinitionError(f"chaos_scenario: expected a Scenario; got {scenario!r}")

    def decorate(body: Body) -> TestFunction:
        params = list(inspect.signature(body).parameters.values())
        if not params or params[0].name != "run":
            raise ScenarioDefinitionError(
                f"@chaos_scenario({scenario.case_id}) on {body.__name__}: the first parameter must be "
                f"`run` (the ScenarioRun); other fixtures may follow"
            )
        extra = params[1:]
        taken = {p.name for p in extra} & {RUN_FIXTURE, "variant"}
        if taken:
            raise ScenarioDefinitionError(
                f"@chaos_scenario on {body.__name__}: parameter names {sorted(taken)} are reserved"
            )

        def test(**kwargs: Any) -> None:
            factory = kwargs.pop(RUN_FIXTURE)
            variant = kwargs.pop("variant")
            if not isinstance(variant, str):  # a gate run: the team's configuration (chaos.gate.driver)
                variant.run(factory, body, kwargs)
                return
            run: ScenarioRun = factory(scenario, variant)
            skip = run.not_applicable()
            if skip:
                import pytest

                pytest.skip(skip)
            with run:
                body(run, **kwargs)
                result = run.result or run.finish()
            result.judge()

        keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
        test.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter(RUN_FIXTURE, keyword), inspect.Parameter("variant", keyword), *extra]
        )
        test.__name__ = body.__name__
        test.__qualname__ = body.__qualname__
        test.__module__ = body.__module__
        test.__doc__ = body.__doc__
        source = inspect.getsourcefile(body)
        scenario.locate(Path(source).resolve().as_posix() if source else "", body.__name__)
        test.scenario = scenario  # type: ignore[attr-defined]
        return _mark(test)

    return decorate


def _mark(test: TestFunction) -> TestFunction:
    import pytest

    marked: TestFunction = pytest.mark.chaos(test)
    return marked


def parametrize(
    metafunc: pytest.Metafunc, gate_params: Callable[[Scenario], list[object]] | None = None
) -> None:
    """Parametrize a :func:`chaos_scenario` test's ``variant``: the scenario's variant names, or in a gate
    run the gate's parameters (``gate_params``: :meth:`chaos.gate.driver.session.GateSession.params`)."""
    scenario = getattr(metafunc.function, "scenario", None)
    if not isinstance(scenario, Scenario) or "variant" not in metafunc.fixturenames:
        return
    values = scenario.variant_names if gate_params is None else gate_params(scenario)
    metafunc.parametrize("variant", values)
