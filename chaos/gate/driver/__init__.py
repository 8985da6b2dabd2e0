"""The full gate run: each selected catalog case replayed with the team's configuration as the variant under
test (``pytest -m chaos --chaos-gate GATE_FILE``, and ``chaos gate GATE_FILE`` through it).

The rest of :mod:`chaos.gate` judges (the gate file, its lint, the thresholds, the baseline, the outputs);
this package runs the cases and so sits above :mod:`chaos.scenario`, on the composing floor:

- :mod:`~chaos.gate.driver.variant` builds that variant (pure): a catalog body branches on
  ``run.variant.name``, so the variant takes the *name* — the fault and workload timeline — of one built-in
  variant (the case's ``remediated`` one: what a correct configuration must survive), the team's guarantee,
  ``pass`` as the verdict it must reach, the team's client settings over the timing settings the case needs,
  and the team's topic settings.
- :class:`~chaos.gate.driver.gatecase.GateCase` is the value of the test's ``variant`` parameter in a gate
  run (id ``gate``): it runs the case, judges it by the verdict and the thresholds only — an assertion of
  the body (written for the built-in variants) is recorded as evidence, never the verdict — and retries a
  failed or inconclusive run up to the gate file's ``retries`` (fail, then pass = *flaky*).
- :class:`~chaos.gate.driver.session.GateSession` holds the run's gate file, lint, results and
  (``--chaos-gate-baseline``) the previous gate run each case is compared with.
- :class:`~chaos.gate.driver.gateplugin.GatePlugin` is its pytest side (selection, calibration outcomes,
  ``gate.json`` / ``gate.md`` / JUnit at the session's end), registered by the chaos plugin.
- :mod:`~chaos.gate.driver.command` is ``chaos gate``: the lint, then pytest over the catalog.
"""
