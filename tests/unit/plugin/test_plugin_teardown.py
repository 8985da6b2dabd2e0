"""The plugin at the end of a session (pytester, no Docker): the leak check runs after the session fixtures'
teardown and keeps an interrupted or usage-error exit status; SIGTERM tears down like Ctrl-C; the cluster
fixture heals even when capturing broker logs fails."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import pytest

import chaos.faults.heal
import chaos.plugin.fixtures
import chaos.plugin.lifecycle

# A stand-in for the session cluster: registers a run id like the real holder and logs its teardown.
CONFTEST = """
from pathlib import Path

import pytest

from chaos.plugin.keys import RUN_IDS

LOG = Path(__file__).with_name("order.log")


@pytest.fixture(scope="session")
def fake_cluster(pytestconfig):
    pytestconfig.stash[RUN_IDS].append("run-1")
    yield
    with LOG.open("a") as log:
        log.write("cluster teardown\\n")
"""


class FakeSweep:
    """Replaces the Docker lookup: logs when it runs and reports ``leaked`` (or raises ``error``)."""

    def __init__(self, log: Path, leaked: list[str], error: Exception | None = None) -> None:
        self.log = log
        self.leaked = leaked
        self.error = error

    def __call__(self, run_ids: list[str]) -> list[str]:
        with self.log.open("a") as log:
            log.write(f"leak check {run_ids}\n")
        if self.error is not None:
            raise self.error
        return self.leaked


def _setup(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    body: str,
    leaked: list[str],
    error: Exception | None = None,
) -> Path:
    log = pytester.path / "order.log"
    monkeypatch.setattr(chaos.plugin.lifecycle, "sweep_leaks", FakeSweep(log, leaked, error))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=f"def test_inner(fake_cluster):\n    {body}\n")
    return log


def test_after_ctrl_c_the_leak_check_follows_teardown_and_keeps_exit_2(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _setup(pytester, monkeypatch, "raise KeyboardInterrupt", leaked=["chaos-kafka-1"])
    result = pytester.runpytest(no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert log.read_text().splitlines() == ["cluster teardown", "leak check ['run-1']"]
    result.stdout.fnmatch_lines(["chaos: resources left behind (now swept): chaos-kafka-1"])


def test_a_leak_fails_a_passing_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _setup(pytester, monkeypatch, "pass", leaked=["chaos-kafka-1", "chaos-net"])
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert log.read_text().splitlines() == ["cluster teardown", "leak check ['run-1']"]
    result.stdout.fnmatch_lines(["chaos: resources left behind (now swept): chaos-kafka-1, chaos-net"])


def test_no_leak_keeps_a_passing_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _setup(pytester, monkeypatch, "pass", leaked=[])
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK
    assert "left behind" not in result.stdout.str()


def test_a_failed_leak_check_is_reported_not_raised(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(pytester, monkeypatch, "pass", leaked=[], error=RuntimeError("no engine"))
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["chaos: leak check failed (RuntimeError: no engine); *`chaos clean --run-id ID` for each of run-1"]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_usage_error_keeps_exit_4(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _setup(pytester, monkeypatch, "pass", leaked=["chaos-kafka-1"])
    # a run id registered before collection fails: the leak check still runs, the status stays 4
    start = "\n\ndef pytest_sessionstart(session):\n    session.config.stash[RUN_IDS].append('run-0')\n"
    pytester.makeconftest(CONFTEST + start)
    result = pytester.runpytest("does_not_exist.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert log.read_text().splitlines() == ["leak check ['run-0']"]


SIGTERMED = """
import os
import signal
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def session_resource():
    yield
    (HERE / "session-teardown").write_text("done")


@pytest.fixture
def fault():
    yield
    (HERE / "healed").write_text("done")


def test_cancelled(session_resource, fault):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)


def test_after():
    (HERE / "ran-after").write_text("done")
"""


def test_sigterm_tears_down_like_ctrl_c(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=SIGTERMED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (pytester.path / "healed").exists()
    assert (pytester.path / "session-teardown").exists()
    assert not (pytester.path / "ran-after").exists()
    result.stdout.fnmatch_lines(["*KeyboardInterrupt: signal SIGTERM"])


def _custom(signum: int, frame: FrameType | None) -> None:
    """A SIGTERM handler someone else installed."""


@pytest.mark.parametrize(
    ("before", "during"),
    [(signal.SIG_DFL, "_sigterm_to_interrupt"), (_custom, "_custom")],
    ids=["default", "own"],
)
def test_sigterm_handler_installed_over_the_default_only_and_restored(
    pytester: pytest.Pytester, before: signal.Handlers | Callable[[int, FrameType | None], None], during: str
) -> None:
    pytester.makepyfile(
        f"""
        import signal

        def test_handler():
            assert signal.getsignal(signal.SIGTERM).__name__ == {during!r}
        """
    )
    outer = signal.signal(signal.SIGTERM, before)
    try:
        pytester.runpytest().assert_outcomes(passed=1)
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGTERM, outer)


class FakeCluster:
    """Enough of a KafkaCluster for the ``kafka_cluster`` fixture's teardown."""

    run_id = "fake"

    def __init__(self, log: Path) -> None:
        self.log = log

    def _note(self, line: str) -> None:
        with self.log.open("a") as log:
            log.write(line + "\n")

    def topics(self, *, internal: bool = True) -> set[str]:
        return set()

    def capture_logs(self, directory: Path) -> None:
        self._note("capture")
        raise OSError(28, "No space left on device", str(directory))

    def delete_topics(self, names: list[str]) -> None:
        self._note(f"delete {names}")

    def wait_healthy(self, timeout_s: float) -> None:
        self._note("healthy")


@pytest.mark.parametrize(
    ("body", "captured"),
    [("assert False", True), ("pass", False), ("raise KeyboardInterrupt", True)],
    ids=["failed", "passed", "interrupted"],
)
def test_the_cluster_is_healed_even_when_capturing_logs_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, body: str, captured: bool
) -> None:
    log = pytester.path / "teardown.log"
    cluster = FakeCluster(log)

    def heal_all(c: FakeCluster, interrupted: bool = False) -> None:
        cluster._note(f"heal {c.run_id}" + (" (interrupted)" if interrupted else ""))

    monkeypatch.setattr(chaos.faults.heal, "heal_all", heal_all)
    monkeypatch.setattr(chaos.plugin.fixtures.ClusterHolder, "get", lambda self, needs=None: cluster)
    pytester.makeconftest(
        """
        import pytest

        from chaos.plugin.fixtures import ClusterHolder

        @pytest.fixture(scope="session")
        def _chaos_cluster_holder():
            return ClusterHolder(None, None, None, [])
        """
    )
    pytester.makepyfile(test_inner=f"def test_inner(kafka_cluster):\n    {body}\n")
    result = pytester.runpytest("--chaos-report-dir", str(pytester.path / "reports"), no_reraise_ctrlc=True)
    # interrupted: healed, but neither topics deleted nor health waited for — the cluster goes next
    expected = (
        ["heal fake (interrupted)"] if "KeyboardInterrupt" in body else ["heal fake", "delete []", "healthy"]
    )
    assert log.read_text().splitlines() == (["capture", *expected] if captured else expected)
    if body == "assert False":
        result.stdout.fnmatch_lines(
            ["chaos: broker logs of test_inner.py::test_inner not captured: *No space left on device*"]
        )


RENDER_FAILS = """
def pytest_keyboard_interrupt(excinfo):
    raise SystemError("AST constructor recursion depth mismatch (before=78, after=54)")
"""


def test_sigterm_stays_exit_2_when_the_traceback_cannot_be_rendered(pytester: pytest.Pytester) -> None:
    """CPython 3.11.7's AST builder can fail under threads while pytest renders the interrupted frame."""
    pytester.makeconftest(RENDER_FAILS)
    pytester.makepyfile(test_inner=SIGTERMED)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert (pytester.path / "healed").exists()
    assert (pytester.path / "session-teardown").exists()
    result.stderr.fnmatch_lines(["KeyboardInterrupt: signal SIGTERM (its traceback not rendered: AST*"])
