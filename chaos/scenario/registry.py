"""Finding the scenarios: every :class:`~chaos.scenario.model.Scenario` defined at module level in a
``test_*.py`` file of the built-in catalog (imported by path, so the directory need not be importable).

The catalog's source is the repo's top-level ``scenarios/`` directory; the package ships it as
``chaos.catalog`` (``pyproject.toml`` maps the one onto the other), so an editable install resolves
``chaos.catalog`` to ``scenarios/`` and a wheel to ``site-packages/chaos/catalog/``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from chaos.paths import REPO_ROOT, reports_dir
from chaos.scenario.model import Scenario, ScenarioError

CATALOG_PACKAGE = "chaos.catalog"


def scenarios_dir() -> Path:
    """The built-in catalog's directory: where ``chaos.catalog`` is installed, else (a source checkout
    run without installing it) the checkout's ``scenarios/``."""
    spec = importlib.util.find_spec(CATALOG_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    checkout = REPO_ROOT / "scenarios"
    if any(checkout.glob("test_*.py")):
        return checkout
    raise ScenarioError(
        f"the built-in scenario catalog ({CATALOG_PACKAGE}) is not installed; reinstall the package "
        f"(`pip install chaos-harness`, or `pip install -e .` in its checkout)"
    )


def discover(directory: Path | None = None) -> list[Scenario]:
    """Every scenario defined in ``directory`` (default :func:`scenarios_dir`), sorted by case id.

    A file that fails to import raises :class:`ScenarioError` naming it; two scenarios with one id too.
    """
    root = directory or scenarios_dir()
    found: dict[str, Scenario] = {}
    for path in sorted(root.glob("test_*.py")):
        name = f"_chaos_scenario_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ScenarioError(f"cannot import scenario file {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise ScenarioError(f"scenario file {path} failed to import: {exc!r}") from exc
        for value in vars(module).values():
            if isinstance(value, Scenario):
                other = found.get(value.scenario_id)
                if other is not None and other is not value:
                    raise ScenarioError(
                        f"scenario id {value.scenario_id} is defined twice (second in {path})"
                    )
                found[value.scenario_id] = value
    return sorted(found.values(), key=lambda s: (_case_key(s.case_id), s.scenario_id))


# docs/catalog.md's order of sections: design-card cases (1A-1D), loss, duplication, ordering, the rest.
_SECTIONS = ("PB", "ISR", "MD", "MPI", "L", "D", "O", "X")


def _case_key(case_id: str) -> tuple[int, str, int]:
    letters = case_id.rstrip("0123456789")
    section = _SECTIONS.index(letters) if letters in _SECTIONS else len(_SECTIONS)
    return section, letters, int(case_id[len(letters) :] or 0)


def find(key: str, directory: Path | None = None) -> Scenario:
    """A scenario by its id (``pb1_cut_one_broker_then_start_client``) or case id (``PB1``), any case."""
    wanted = key.strip().lower()
    scenarios = discover(directory)
    for scenario in scenarios:
        if wanted in (scenario.scenario_id, scenario.case_id.lower()):
            return scenario
    known = ", ".join(f"{s.case_id} ({s.scenario_id})" for s in scenarios) or "none"
    raise ScenarioError(f"no scenario {key!r}; known: {known}. List them with `chaos list`.")


def pytest_args(
    scenario: Scenario,
    *,
    seed: int | None = None,
    profile: str = "ci",
    variant: str | None = None,
    extra: tuple[str, ...] = (),
    report_dir: Path | None = None,
) -> list[str]:
    """The pytest command line that runs ``scenario`` (one variant or all) as ``chaos run`` does, from
    wherever its file is (``@chaos_scenario`` records its absolute path).

    pytest's rootdir is the directory above the file's (the checkout, or the installed ``chaos``
    package), so node ids name the file and no conftest.py further up is picked up. What pytest writes
    goes to the current directory: its cache to ``./.pytest_cache``, the artifacts to ``report_dir``, by
    default :func:`chaos.paths.reports_dir` (``$CHAOS_REPORT_DIR``, else ``./reports``).
    """
    args = [scenario.nodeid(variant), "-m", "chaos", "--chaos-profile", profile]
    if seed is not None:
        args += ["--chaos-seed", str(seed)]
    args += ["--rootdir", str(Path(scenario.module).absolute().parent.parent)]
    reports = report_dir or reports_dir()
    args += ["-o", f"cache_dir={Path.cwd() / '.pytest_cache'}", "--chaos-report-dir", str(reports)]
    return [*args, *extra]
