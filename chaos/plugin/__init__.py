"""The harness's pytest plugin (the ``pytest11`` entry point ``chaos``): its options, its session
lifecycle, its gate wiring and its fixtures, each in a module of its own; the library is imported lazily.
Pytest finds the hooks and fixtures here, where they are re-exported."""

from chaos.plugin.fixtures import (
    _chaos_cluster_holder,
    chaos_cluster_config,
    chaos_images,
    chaos_report_dir,
    chaos_seed,
    kafka_cluster,
    nemesis,
    run_dir,
    scenario_run,
    spark_session,
)
from chaos.plugin.gate import pytest_generate_tests
from chaos.plugin.lifecycle import (
    pytest_configure,
    pytest_runtest_makereport,
    pytest_runtest_setup,
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_unconfigure,
)
from chaos.plugin.options import (
    pytest_addoption,
    pytest_collection_finish,
    pytest_report_header,
    pytest_sessionstart,
)

__all__ = [
    "_chaos_cluster_holder",
    "chaos_cluster_config",
    "chaos_images",
    "chaos_report_dir",
    "chaos_seed",
    "kafka_cluster",
    "nemesis",
    "pytest_addoption",
    "pytest_collection_finish",
    "pytest_configure",
    "pytest_generate_tests",
    "pytest_report_header",
    "pytest_runtest_makereport",
    "pytest_runtest_setup",
    "pytest_sessionfinish",
    "pytest_sessionstart",
    "pytest_terminal_summary",
    "pytest_unconfigure",
    "run_dir",
    "scenario_run",
    "spark_session",
]
