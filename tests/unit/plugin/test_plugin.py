"""The pytest plugin loads through its entry point and declares its markers (checked with pytester)."""

from __future__ import annotations

import pytest


def test_chaos_marker_is_registered_under_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.chaos
        def test_marked():
            assert True

        def test_unmarked():
            assert True
        """
    )
    result = pytester.runpytest("--strict-markers", "-m", "chaos")
    result.assert_outcomes(passed=1, deselected=1)


def test_unknown_marker_fails_under_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.chaoss
        def test_typo():
            pass
        """
    )
    result = pytester.runpytest("--strict-markers")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*'chaoss' not found in `markers` configuration option*"])


def test_options_are_in_help(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--chaos-images*", "*--chaos-report-dir*"])


def test_a_pytester_test_waits_for_the_sessions_spark_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytester restores sys.modules after its test: a Spark start importing meanwhile would lose half of
    PySpark. The plugin's setup hook lets such a start finish first; other tests do not wait."""
    import threading
    import time
    from types import SimpleNamespace

    import chaos.audit.spark
    from chaos.plugin.lifecycle import pytest_runtest_setup

    def start(seconds: float) -> threading.Thread:
        thread = threading.Thread(target=time.sleep, args=(seconds,), daemon=True)
        thread.start()
        monkeypatch.setattr(chaos.audit.spark, "_starting", thread)
        return thread

    starting = start(0.5)
    pytest_runtest_setup(SimpleNamespace(fixturenames=["tmp_path"]))  # type: ignore[arg-type]
    assert starting.is_alive()
    pytest_runtest_setup(SimpleNamespace(fixturenames=["pytester", "tmp_path"]))  # type: ignore[arg-type]
    assert not starting.is_alive()
