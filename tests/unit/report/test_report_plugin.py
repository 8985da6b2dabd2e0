"""The report at the end of every test whose run_dir holds a history (pytester), and `chaos report`."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from chaos.cli import cli
from tests.report_sample import write_sample_run

INNER = """
import pytest
from tests.report_sample import write_sample_run

def test_passes_with_history(run_dir):
    write_sample_run(run_dir / "run", seconds=40, rate=5)

def test_fails_after_recording(run_dir):
    write_sample_run(run_dir, seconds=40, rate=5, crashed=True)
    (run_dir / "scenario.json").unlink()
    assert False, "the scenario broke"

def test_without_history(run_dir):
    (run_dir / "notes.txt").write_text("nothing recorded")

def test_without_run_dir():
    pass
"""


def test_plugin_renders_a_report_per_run_and_lists_it(pytester: pytest.Pytester, tmp_path: Path) -> None:
    root = tmp_path / "reports"
    pytester.makepyfile(test_inner=INNER)
    junit = tmp_path / "junit.xml"
    result = pytester.runpytest(
        "--chaos-report-dir", str(root), f"--junitxml={junit}", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=3, failed=1)

    passed = root / "tests" / "test_inner.py_test_passes_with_history" / "run" / "report.html"
    failed = root / "tests" / "test_inner.py_test_fails_after_recording" / "report.html"
    assert passed.exists()
    assert failed.exists()
    assert not (root / "tests" / "test_inner.py_test_without_history" / "report.html").exists()
    result.stdout.fnmatch_lines(
        [
            "*= chaos reports =*",
            f"test_inner.py::test_passes_with_history: fail: {passed}",
            f"test_inner.py::test_fails_after_recording: unknown: {failed}",
            f"index: {root / 'index.html'}",
        ]
    )
    # the failing test's own report carries the path in a section
    result.stdout.fnmatch_lines(["*- chaos report (teardown) -*", f"unknown: {failed}"])
    assert f'name="chaos_report" value="{passed}"' in junit.read_text()

    html = failed.read_text(encoding="utf-8")
    assert "test error" not in html
    assert "test failed" in html
    assert "no scenario.json" in html
    assert ".venv/bin/pytest test_inner.py::test_fails_after_recording --chaos-profile=ci" in html
    index = (root / "index.html").read_text(encoding="utf-8")
    assert "tests/test_inner.py_test_passes_with_history/run/report.html" in index


def test_a_broken_run_dir_does_not_change_the_test_result(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(
        test_inner="""
        def test_corrupt_history(run_dir):
            (run_dir / "history").mkdir()
            (run_dir / "history" / "events-000000.jsonl").write_text("not a header\\n{}\\n")
        """
    )
    result = pytester.runpytest("--chaos-report-dir", str(tmp_path / "r"), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*= chaos reports =*", "test_inner.py::test_corrupt_history: *"])


def test_cli_report_renders_one_run_or_a_tree(tmp_path: Path) -> None:
    write_sample_run(tmp_path / "root" / "a", seconds=40, rate=5)
    write_sample_run(tmp_path / "root" / "b", seconds=40, rate=5, crashed=True)
    runner = CliRunner()
    one = runner.invoke(cli, ["report", str(tmp_path / "root" / "a")])
    assert one.exit_code == 0, one.output
    assert "fail" in one.output
    assert "report.html" in one.output
    assert "index" not in one.output
    tree = runner.invoke(cli, ["report", str(tmp_path / "root")])
    assert tree.exit_code == 0, tree.output
    assert "unknown" in tree.output
    assert "missing: no audit result" in tree.output
    assert f"index: {tmp_path / 'root' / 'index.html'}" in tree.output.replace("\n", "")
    assert runner.invoke(cli, ["report", str(tmp_path / "absent")]).exit_code == 2


def test_a_rerun_replaces_the_previous_run(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makepyfile(
        test_inner="""
        import secrets
        from tests.report_sample import write_sample_run

        def test_run(run_dir):
            assert list(run_dir.iterdir()) == []
            write_sample_run(run_dir / secrets.token_hex(4), seconds=10, rate=5)
        """
    )
    root = tmp_path / "reports"
    for _ in range(2):
        result = pytester.runpytest(
            "--chaos-report-dir", str(root), "--rootdir", str(pytester.path), "-p", "no:cacheprovider"
        )
        result.assert_outcomes(passed=1)
    runs = list((root / "tests" / "test_inner.py_test_run").iterdir())
    assert len(runs) == 1, runs
    reports = [line for line in result.stdout.lines if line.startswith("test_inner.py::test_run: ")]
    assert reports == [f"test_inner.py::test_run: fail: {runs[0] / 'report.html'}"], result.stdout.lines


def test_an_interrupted_test_still_gets_its_page(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (or SIGTERM, which the plugin turns into one) in the middle of a test: pytest tears the
    fixtures down at the session's end, with no teardown report; the page is rendered there."""
    root = tmp_path / "reports"
    pytester.makepyfile(
        test_inner="""
from tests.report_sample import write_sample_run

def test_cut_short(run_dir):
    write_sample_run(run_dir, seconds=40, rate=5)
    raise KeyboardInterrupt("signal SIGTERM")
"""
    )
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[3]))  # `tests.report_sample` in the child
    result = pytester.runpytest_subprocess("--chaos-report-dir", str(root), "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    page = root / "tests" / "test_inner.py_test_cut_short" / "report.html"
    assert page.exists()
    result.stdout.fnmatch_lines([f"chaos: interrupted: test_inner.py::test_cut_short: *: {page}"])
    assert "interrupted" in page.read_text(encoding="utf-8")
