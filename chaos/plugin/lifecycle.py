"""The plugin's session lifecycle: markers, SIGTERM handled like Ctrl-C, each test's report page after its
teardown, and at the session's end the interrupted test's page, the leak check and the Spark JVM stopped."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from types import FrameType


from chaos.plugin.gate import enable_gate
from chaos.plugin.keys import (
    HTML_INDEX,
    HTML_REPORTS,
    INTERRUPTED,
    REPORT,
    RUN_IDS,
    RUNNING,
    SIGTERM_BEFORE,
    SPARK_OWNED,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: a chaos scenario on a real Kafka cluster (run with -m chaos).")
    config.addinivalue_line("markers", "smoke: a quick end-to-end check of images, clients and Spark.")
    config.addinivalue_line("markers", "integration: needs a Docker engine and the harness's images.")
    config.stash[RUN_IDS] = []
    config.pluginmanager.register(_InterruptWatch(config), "chaos-interrupt-watch")
    _install_sigterm(config)
    enable_gate(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    if SIGTERM_BEFORE in config.stash:
        signal.signal(signal.SIGTERM, config.stash[SIGTERM_BEFORE])
        del config.stash[SIGTERM_BEFORE]


def _install_sigterm(config: pytest.Config) -> None:
    """Handle SIGTERM (a CI cancel) like Ctrl-C: KeyboardInterrupt in the main thread, so fixtures tear
    down (faults healed, runs ended, logs captured) and pytest exits 2. Only over the default action
    (immediate death): a handler someone else installed, or an ignored SIGTERM, is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    config.stash[SIGTERM_BEFORE] = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)


class _InterruptWatch:
    """Marks the session interrupted (Ctrl-C, SIGTERM) before its fixtures are torn down: they then go
    fast (``kafka_cluster``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(wrapper=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Generator[None]:
        self.config.stash[INTERRUPTED] = True
        try:
            yield
        except SystemError as error:
            # CPython 3.11 before 3.11.8 shares the AST builder's depth counter between threads
            # (gh-106905): the terminal's rendering of the interrupted frame's source can fail while
            # another thread parses. The session is still interrupted (exit 2), not crashed (exit 1).
            sys.stderr.write(f"{excinfo.typename}: {excinfo.value} (its traceback not rendered: {error})\n")


def _sigterm_to_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test on ``pytester`` waits for the session's Spark start in the background to be over: pytester
    restores ``sys.modules`` after the test, which would drop the modules that start imported meanwhile
    (a second copy of PySpark's then mixes two sessions' objects)."""
    if "pytester" in getattr(item, "fixturenames", ()):
        from chaos.audit.spark import await_background_start

        await_background_start()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    item.stash.setdefault(REPORT, {})[report.when] = report
    if report.when == "setup":
        item.config.stash[RUNNING] = (item, dict(getattr(item, "funcargs", None) or {}))
    if report.when == "teardown":
        from chaos.report.hook import after_teardown

        if RUNNING in item.config.stash:
            del item.config.stash[RUNNING]
        rendered = after_teardown(item, report, item.stash[REPORT])
        item.config.stash.setdefault(HTML_REPORTS, []).extend(rendered.lines)
        if rendered.index is not None:
            item.config.stash[HTML_INDEX] = rendered.index
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """List the HTML reports written in this session."""
    lines = config.stash.get(HTML_REPORTS, [])
    if not lines:
        return
    terminalreporter.section("chaos reports")
    for line in lines:
        terminalreporter.write_line(line)
    index = config.stash.get(HTML_INDEX, None)
    if index is not None:
        terminalreporter.write_line(f"index: {index}")


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Generator[None, None, None]:
    """After every other finisher (so after the session fixtures' teardown, which an interrupted session
    runs there): sweep what this session's clusters left behind. A leak fails a run that would otherwise
    pass; an interrupted (2), internal-error (3) or usage-error (4) status is kept."""
    try:
        yield
    finally:
        _report_interrupted(session)
        _check_leaks(session)
        if session.config.stash.get(SPARK_OWNED, False):
            from chaos.audit.spark import stop_spark

            stop_spark()


def _report_interrupted(session: pytest.Session) -> None:
    """The page of a test cut short by Ctrl-C or SIGTERM (its fixtures were torn down just before)."""
    running = session.config.stash.get(RUNNING, None)
    if running is None:
        return
    del session.config.stash[RUNNING]
    from chaos.report.hook import after_interrupt

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in after_interrupt(*running).lines:
        if reporter is not None:
            reporter.write_line(f"chaos: interrupted: {line}")


def _check_leaks(session: pytest.Session) -> None:
    run_ids = session.config.stash.get(RUN_IDS, [])
    if not run_ids:
        return
    try:
        leaked = sweep_leaks(run_ids)
        problem = f"resources left behind (now swept): {', '.join(leaked)}" if leaked else None
    except Exception as exc:
        problem = (
            f"leak check failed ({type(exc).__name__}: {exc}); once Docker answers, run "
            f"`chaos clean --run-id ID` for each of {', '.join(run_ids)}"
        )
    if problem is None:
        return
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"chaos: {problem}", red=True)


def sweep_leaks(run_ids: list[str]) -> list[str]:
    """The labelled containers and networks of ``run_ids`` still present (sorted), each run swept after."""
    from chaos.cluster.engine import LABEL, docker_client, labelled_containers
    from chaos.cluster.sweep import sweep

    client = docker_client()
    leaked = []
    for run_id in run_ids:
        leaked += [c.name for c in labelled_containers(f"{LABEL}={run_id}", client=client)]
        leaked += [n.name for n in client.networks.list(filters={"label": f"{LABEL}={run_id}"})]
        sweep(run_id)
    return sorted(leaked)
