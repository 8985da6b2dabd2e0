"""The harness outside this repo, without Docker: where reports go (rootdir / current directory / env /
option), where the catalog is found and how `chaos run` names it, what the wheel packages, and that the
doc's smallest scenario is a complete test file. The real thing (a wheel in a fresh venv, a real run) is
tests/integration/test_out_of_repo.py."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from chaos.paths import REPO_ROOT, reports_dir
from chaos.scenario import find, pytest_args, scenarios_dir
from tests.writing_doc import smallest_scenario


def test_reports_dir_is_under_the_given_project_else_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHAOS_REPORT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert reports_dir(tmp_path / "project") == tmp_path / "project" / "reports"
    assert reports_dir() == tmp_path / "reports"


def test_chaos_report_dir_wins_and_a_relative_one_is_taken_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CHAOS_REPORT_DIR", str(tmp_path / "elsewhere"))
    assert reports_dir(tmp_path / "project") == tmp_path / "elsewhere"
    monkeypatch.setenv("CHAOS_REPORT_DIR", "out/reports")
    assert reports_dir() == tmp_path / "out" / "reports"


_SHOW_REPORT_DIR = """
def test_where(chaos_report_dir):
    print(f"REPORT_DIR={chaos_report_dir}")
"""


def _report_dir(pytester: pytest.Pytester, *args: str) -> Path:
    result = pytester.runpytest("-s", "-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    shown = re.search(r"REPORT_DIR=(\S+)", result.stdout.str())
    assert shown is not None, result.outlines
    return Path(shown.group(1))


def test_the_plugin_writes_under_the_rootdir_unless_the_env_or_the_option_says_otherwise(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHAOS_REPORT_DIR", raising=False)
    pytester.makeini("[pytest]\n")  # the project's rootdir is pytester's directory
    pytester.makepyfile(test_where=_SHOW_REPORT_DIR)
    (pytester.path / "sub").mkdir()
    monkeypatch.chdir(pytester.path / "sub")  # not the current directory: the rootdir
    assert _report_dir(pytester, str(pytester.path)) == pytester.path / "reports"
    assert (pytester.path / "reports").is_dir()
    monkeypatch.setenv("CHAOS_REPORT_DIR", str(tmp_path / "env"))
    assert _report_dir(pytester, str(pytester.path)) == tmp_path / "env"
    option = tmp_path / "option"
    assert _report_dir(pytester, str(pytester.path), f"--chaos-report-dir={option}") == option


def test_the_catalog_is_the_repos_scenarios_directory_here() -> None:
    assert scenarios_dir() == (REPO_ROOT / "scenarios").resolve()


def test_chaos_run_names_the_catalog_file_by_absolute_path_and_writes_into_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHAOS_REPORT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    args = pytest_args(find("MPI1"), seed=7, variant="remediated")
    assert args[0] == f"{(scenarios_dir() / 'test_mpi1_max_poll.py').as_posix()}::test_mpi1[remediated]"
    assert args[1:] == [
        "-m", "chaos", "--chaos-profile", "ci", "--chaos-seed", "7", "--rootdir", str(scenarios_dir().parent),
        "-o", f"cache_dir={tmp_path / '.pytest_cache'}", "--chaos-report-dir", str(tmp_path / "reports"),
    ]  # fmt: skip
    monkeypatch.setenv("CHAOS_REPORT_DIR", str(tmp_path / "env"))
    assert pytest_args(find("MPI1"))[-2:] == ["--chaos-report-dir", str(tmp_path / "env")]


def test_the_wheel_lists_every_directory_of_the_package_and_maps_the_catalog() -> None:
    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    package = REPO_ROOT / "chaos"
    directories = {
        ".".join(("chaos", *d.relative_to(package).parts))
        for d in (package, *package.rglob("*"))
        if d.is_dir() and "__pycache__" not in d.parts
    }
    assert set(setuptools["packages"]) == directories | {"chaos.catalog"}, (
        "pyproject.toml [tool.setuptools] packages must name every directory under chaos/"
    )
    assert setuptools["package-dir"] == {"chaos.catalog": "scenarios"}


def test_the_docs_smallest_scenario_is_a_complete_test_file(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\n")
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_mine.py").write_text(smallest_scenario())
    result = pytester.runpytest_subprocess("-m", "chaos", "--collect-only", "-q", "-p", "no:cacheprovider")
    assert result.ret == 0, result.outlines
    result.stdout.fnmatch_lines(["tests/test_mine.py::test_leader_crash[[]crash[]]", "1 test collected*"])
