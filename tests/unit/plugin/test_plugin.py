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
