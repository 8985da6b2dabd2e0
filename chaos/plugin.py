"""The harness's pytest plugin: options, markers and fixtures only; the library is imported lazily."""

from __future__ import annotations

import argparse
import os
import re
import secrets
import signal
import tempfile
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from chaos.audit.run import Engine
    from chaos.cluster.cluster import KafkaCluster
    from chaos.cluster.config import ClusterConfig
    from chaos.cluster.images import ImageSet, Source
    from chaos.faults.nemesis import Nemesis
    from chaos.faults.plan import Plan
    from chaos.run.locks import RunDirs
    from chaos.run.profiles import GroupProtocol
    from chaos.scenario import Scenario, ScenarioRun

_RUN_IDS = pytest.StashKey[list[str]]()
_REPORT = pytest.StashKey[dict[str, pytest.TestReport]]()
_HTML_REPORTS = pytest.StashKey[list[str]]()
_HTML_INDEX = pytest.StashKey[str]()
_RUNNING = pytest.StashKey[tuple[pytest.Item, dict[str, object]]]()
"""The test between its setup and teardown reports, with its fixture values (pytest clears them before an
interrupted session's end): the one an interrupt cut short."""
_INTERRUPTED = pytest.StashKey[bool]()
"""Set by Ctrl-C or SIGTERM, before the fixtures' teardown: they then heal, but do not wait for a
cluster the session is about to remove."""
_OPTIONS = pytest.StashKey["_Options"]()
_SPARK_OWNED = pytest.StashKey[bool]()
"""Whether this session started the process's Spark JVM (then its finish stops it)."""
_RUN_DIRS: pytest.StashKey[RunDirs] = pytest.StashKey()
_ENV_SEED = "CHAOS_SEED"
_ENV_REPORT_DIR = "CHAOS_REPORT_DIR"
_ENV_GROUP_PROTOCOL = "CHAOS_GROUP_PROTOCOL"
_ENV_AUDIT_ENGINE = "CHAOS_AUDIT_ENGINE"
_ENV_CLIENT = "CHAOS_CLIENT"
_AUDIT_ENGINES = ("spark", "reference")
_SIGTERM_BEFORE = pytest.StashKey["Callable[[int, FrameType | None], object] | int | None"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("chaos", "Kafka chaos harness")
    group.addoption(
        "--chaos-images",
        choices=("official", "local", "auto"),
        default=None,
        help="Where container images come from (default: $CHAOS_IMAGES, else auto).",
    )
    group.addoption(
        "--chaos-report-dir",
        default=None,
        help="Directory for run artifacts and reports "
        "(default: $CHAOS_REPORT_DIR, else reports/ under pytest's rootdir).",
    )
    group.addoption(
        "--chaos-profile",
        choices=("ci", "faithful"),
        default="ci",
        help="Broker timeouts: ci shortens detection timeouts (see docs/cluster.md); faithful keeps Kafka's.",
    )
    group.addoption(
        "--chaos-brokers", type=int, default=3, help="Brokers in the session's cluster (3..5, default 3)."
    )
    group.addoption(
        "--kafka-version",
        default=None,
        help="Kafka version of the cluster (default: $CHAOS_KAFKA_VERSION, else the pinned default); one of "
        "chaos.versions.SUPPORTED_KAFKA_VERSIONS.",
    )
    group.addoption(
        "--chaos-group-protocol",
        default=None,
        help="Consumer-group protocol of the scenarios' group members: classic (default) or consumer "
        "(KIP-848, Kafka 4.0+); default $CHAOS_GROUP_PROTOCOL. A variant that sets group.protocol keeps it.",
    )
    group.addoption(
        "--chaos-client",
        default=None,
        help="Client library of the scenarios' producers and group members: librdkafka (default, "
        "confluent-kafka) or java (kafka-clients of the cluster's Kafka version, built locally; "
        "docs/workload.md, 'The Java client'); default $CHAOS_CLIENT. Transactional workers and process "
        "members stay on librdkafka.",
    )
    group.addoption(
        "--chaos-strict-symptoms",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Fail a scenario when a symptom it looks for was not observed (default: on in the faithful "
        "profile, off in ci: symptoms are evidence, the verdict is what fails a test).",
    )
    group.addoption(
        "--chaos-audit-engine",
        default=None,
        help="Which engine audits each scenario run: spark (default; one local Spark session per pytest "
        "process, started in the background as the session starts) or reference (the pure-Python "
        "definition, for quick local runs); default $CHAOS_AUDIT_ENGINE. A test may still name its own.",
    )
    group.addoption(
        "--chaos-spark-master",
        default=None,
        metavar="URL",
        help="Where the Spark engine audits each scenario run: local[2] (default, a JVM in this process), "
        "spark://HOST:PORT, sc://HOST:PORT (a Spark Connect server), …; default $CHAOS_SPARK_MASTER "
        "(docs/spark-cluster.md).",
    )
    group.addoption(
        "--chaos-seed",
        type=int,
        default=None,
        help="Seed of fault plans (default: $CHAOS_SEED, else a random one printed in the header).",
    )
    group.addoption(
        "--chaos-duration",
        default=None,
        metavar="DURATION",
        help="How long a scenario whose workload has no fixed length runs (the random nemesis, RN1): 60, "
        "90s, 5m (default: the scenario's own, for the time profile).",
    )
    group.addoption(
        "--chaos-plan",
        default=None,
        metavar="PLAN_FILE",
        help="Replay this saved fault plan (a run's plan.resolved.json or plan.json) instead of drawing one "
        "from the seed, in a scenario that runs a plan (chaos replay RUN_DIR sets it).",
    )
    _add_gate_options(group)


def _add_gate_options(group: pytest.OptionGroup) -> None:
    """The resilience gate's options (docs/gate.md)."""
    group.addoption(
        "--chaos-gate",
        default=None,
        metavar="GATE_FILE",
        help="Run each selected catalog case once with GATE_FILE's configuration as the variant under test, "
        "judged by the verdict and the thresholds; writes gate.json, gate.md and JUnit into the report dir "
        "(default reports/gate/). Exit 0 pass, 1 fail, 2 harness error, 3 inconclusive.",
    )
    group.addoption(
        "--chaos-calibrate",
        action="store_true",
        default=False,
        help="With --chaos-gate: also run each case's built-in vulnerable and remediated variants.",
    )
    group.addoption(
        "--chaos-gate-junit",
        default=None,
        metavar="PATH",
        help="The gate's JUnit XML (default REPORT_DIR/junit.xml).",
    )
    group.addoption(
        "--chaos-gate-allow-flaky",
        action="store_true",
        default=False,
        help="With --chaos-gate: a flaky case (failed, then passed on a retry) does not fail the gate.",
    )
    group.addoption(
        "--chaos-gate-cases",
        default=None,
        metavar="CASES",
        help="With --chaos-gate: run these catalog cases (comma-separated, e.g. L2,L6) instead of the gate "
        "file's cases or the default set; the lint's cases left out are listed as not run.",
    )
    group.addoption(
        "--chaos-gate-lint-advisory",
        action="store_true",
        default=False,
        help="With --chaos-gate: the lint informs, the cases alone decide (by default a claim the lint "
        "proves broken fails the gate, exit 1, even when every case passed).",
    )
    group.addoption(
        "--chaos-gate-baseline",
        default=None,
        metavar="OLD_GATE_JSON",
        help="With --chaos-gate: compare each case's outage, p99 ack latency under fault and recovery "
        "times with a previous gate run's gate.json; a regression beyond the gate file's [baseline] "
        "tolerance fails the gate (exit 1).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: a chaos scenario on a real Kafka cluster (run with -m chaos).")
    config.addinivalue_line("markers", "smoke: a quick end-to-end check of images, clients and Spark.")
    config.addinivalue_line("markers", "integration: needs a Docker engine and the harness's images.")
    config.stash[_RUN_IDS] = []
    config.pluginmanager.register(_InterruptWatch(config), "chaos-interrupt-watch")
    _install_sigterm(config)
    _configure_gate(config)


def _configure_gate(config: pytest.Config) -> None:
    """Under ``--chaos-gate``: the gate file read and linted, the gate's hooks registered."""
    options = ("--chaos-gate", "--chaos-calibrate", "--chaos-gate-baseline", "--chaos-gate-cases")
    if not any(config.getoption(o) for o in options):
        return
    from chaos.scenario.gaterun import configure_gate

    def render_index(root: Path) -> None:
        from chaos.report.render import render_index as render

        render(root)

    configure_gate(config, render_index)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize each ``@chaos_scenario`` test over its variants (under ``--chaos-gate``: the gate's)."""
    if getattr(metafunc.function, "scenario", None) is None:
        return
    from chaos.scenario.api import GATE_PLUGIN, parametrize

    gate = metafunc.config.pluginmanager.get_plugin(GATE_PLUGIN)
    parametrize(metafunc, gate.session.params if gate is not None else None)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SIGTERM_BEFORE in config.stash:
        signal.signal(signal.SIGTERM, config.stash[_SIGTERM_BEFORE])
        del config.stash[_SIGTERM_BEFORE]


def _install_sigterm(config: pytest.Config) -> None:
    """Handle SIGTERM (a CI cancel) like Ctrl-C: KeyboardInterrupt in the main thread, so fixtures tear
    down (faults healed, runs ended, logs captured) and pytest exits 2. Only over the default action
    (immediate death): a handler someone else installed, or an ignored SIGTERM, is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    config.stash[_SIGTERM_BEFORE] = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)


class _InterruptWatch:
    """Marks the session interrupted (Ctrl-C, SIGTERM) before its fixtures are torn down: they then go
    fast (``kafka_cluster``)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.config.stash[_INTERRUPTED] = True


def _sigterm_to_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


@dataclass(frozen=True)
class _Options:
    """The session's chaos options, each from its flag or environment variable, validated at session start:
    a bad value is one usage error (exit 4), not an error in every test."""

    images: Source
    report_dir: Path
    seed: int
    cluster: ClusterConfig
    group_protocol: GroupProtocol
    spark_master: str
    audit_engine: Engine = "spark"
    client: str = "librdkafka"
    duration_s: float | None = None
    plan: Plan | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_OPTIONS] = _read_options(session.config)
    from chaos.audit.spark import jvm_running

    # a session stops only the Spark JVM it started (a pytester session inside another keeps its host's)
    session.config.stash[_SPARK_OWNED] = not jvm_running()


def pytest_report_header(config: pytest.Config) -> str | None:
    """The session's chaos options in pytest's header: the seed among them, the one way to draw a random
    session's fault plans again."""
    options = config.stash.get(_OPTIONS, None)
    if options is None:
        return None
    cluster = options.cluster
    return (
        f"chaos: seed {options.seed}, Kafka {cluster.kafka_version}, {cluster.brokers} brokers, profile "
        f"{cluster.profile}, client {options.client}, group protocol {options.group_protocol}, "
        f"audit engine {options.audit_engine}"
        + (f" on {options.spark_master}" if options.audit_engine == "spark" else "")
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """With a scenario run among the selected tests: lengthen their timeouts by the asked duration, and
    with the Spark engine start the Spark session now, in the background: its JVM's start overlaps the
    cluster's (the first test's fixtures). The session's finish stops it
    (:func:`chaos.audit.spark.stop_spark`), even when SIGTERM or Ctrl-C ends the session. ``--collect-only``
    runs nothing, so starts nothing."""
    from chaos.scenario.api import RUN_FIXTURE

    options = session.config.stash.get(_OPTIONS, None)
    runs = [item for item in session.items if RUN_FIXTURE in getattr(item, "fixturenames", ())]
    if options is None or not runs:
        return
    _lengthen_timeouts(session.config, runs, options)
    if options.audit_engine == "spark" and not session.config.option.collectonly:
        from chaos.audit.spark import start_in_background

        start_in_background(options.spark_master)


def _lengthen_timeouts(config: pytest.Config, runs: list[pytest.Item], options: _Options) -> None:
    """A run asked to last ``--chaos-duration`` (or a replayed plan's length) gets that much on top of
    pytest-timeout's limit (when that plugin is active): ``chaos run RANDOM --duration 30m`` is not cut
    off by the 15 minutes a catalog scenario is allowed."""
    length = options.plan.workload_s if options.plan is not None else options.duration_s
    if not length or not config.pluginmanager.hasplugin("timeout"):
        return
    base = float(config.getoption("timeout", None) or config.getini("timeout") or 0)
    if base <= 0:  # no limit
        return
    for item in runs:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(base + length))


def _read_options(config: pytest.Config) -> _Options:
    """Read and check every chaos option; raise pytest.UsageError naming the bad input and its fix."""
    from chaos import versions
    from chaos.audit.spark import SCENARIO_MASTER, SPARK_MASTER_ENV, check_master
    from chaos.cluster.config import ClusterConfig
    from chaos.cluster.images.catalog import ENV_SOURCE, Source
    from chaos.errors import ConfigError, PlanError
    from chaos.faults.plan import Plan
    from chaos.paths import reports_dir
    from chaos.run.durations import parse_duration
    from chaos.run.profiles import GROUP_PROTOCOLS
    from chaos.workload.java_client import CLIENTS

    images_option = config.getoption("--chaos-images")
    try:
        images = Source.parse(images_option)
    except ConfigError as exc:
        raise _usage(_given("--chaos-images", images_option, ENV_SOURCE), str(exc)) from None

    seed: int | None = config.getoption("--chaos-seed")
    if seed is None:
        raw_seed = os.environ.get(_ENV_SEED, "").strip()
        try:
            seed = int(raw_seed) if raw_seed else secrets.randbelow(2**31)
        except ValueError:
            raise _usage(
                _given("--chaos-seed", None, _ENV_SEED),
                f"not an integer; set a whole number (e.g. {_ENV_SEED}=42), or unset it for a random seed",
            ) from None

    brokers: int = config.getoption("--chaos-brokers")
    version_option: str | None = config.getoption("--kafka-version")
    version = versions.chosen_kafka_version(version_option)
    try:
        cluster = ClusterConfig(
            brokers=brokers, profile=config.getoption("--chaos-profile"), kafka_version=version
        )
    except ConfigError as exc:
        given = [f"--chaos-brokers {brokers}"] if brokers != ClusterConfig.brokers else []
        if version != versions.KAFKA_VERSION:
            given.append(_given("--kafka-version", version_option, versions.KAFKA_VERSION_ENV))
        raise _usage(", ".join(given) or "cluster options", str(exc)) from None

    dir_option: str | None = config.getoption("--chaos-report-dir")
    report_dir = Path(dir_option).expanduser().absolute() if dir_option else reports_dir(config.rootpath)
    # The default reports/ is created on first use; only a directory the user named is checked up front, so
    # a project without chaos tests is never blocked by its rootdir.
    if dir_option or os.environ.get(_ENV_REPORT_DIR):
        try:
            report_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=report_dir):
                pass
        except OSError as exc:
            raise _usage(
                _given("--chaos-report-dir", dir_option, _ENV_REPORT_DIR),
                f"cannot create or write {report_dir} ({exc.strerror or exc}); name a writable directory",
            ) from None
    protocol_option: str | None = config.getoption("--chaos-group-protocol")
    protocol = (protocol_option or os.environ.get(_ENV_GROUP_PROTOCOL) or "classic").strip().lower()
    given_protocol = _given("--chaos-group-protocol", protocol_option, _ENV_GROUP_PROTOCOL)
    if protocol not in GROUP_PROTOCOLS:
        raise _usage(given_protocol, f"expected one of {', '.join(GROUP_PROTOCOLS)}")
    if protocol == "consumer" and versions.kafka_major(cluster.kafka_version) < 4:
        raise _usage(
            given_protocol,
            f"the consumer group protocol (KIP-848) is generally available from Kafka 4.0; the cluster runs "
            f"{cluster.kafka_version}: pass --kafka-version 4.0.2 or later, or use the classic protocol",
        )
    engine_option: str | None = config.getoption("--chaos-audit-engine")
    engine = (engine_option or os.environ.get(_ENV_AUDIT_ENGINE) or "spark").strip().lower()
    if engine not in _AUDIT_ENGINES:
        raise _usage(
            _given("--chaos-audit-engine", engine_option, _ENV_AUDIT_ENGINE),
            f"expected one of {', '.join(_AUDIT_ENGINES)}",
        )
    client_option: str | None = config.getoption("--chaos-client")
    client = (client_option or os.environ.get(_ENV_CLIENT) or "librdkafka").strip().lower()
    if client not in CLIENTS:
        given_client = _given("--chaos-client", client_option, _ENV_CLIENT)
        raise _usage(given_client, f"expected one of {', '.join(CLIENTS)}")
    master_option: str | None = config.getoption("--chaos-spark-master")
    try:
        spark_master = check_master(master_option or os.environ.get(SPARK_MASTER_ENV) or SCENARIO_MASTER)
    except ConfigError as exc:
        raise _usage(_given("--chaos-spark-master", master_option, SPARK_MASTER_ENV), str(exc)) from None
    duration_option: str | None = config.getoption("--chaos-duration")
    try:
        duration_s = parse_duration(duration_option) if duration_option is not None else None
    except ConfigError as exc:
        raise _usage(f"--chaos-duration {duration_option}", str(exc)) from None
    plan_option: str | None = config.getoption("--chaos-plan")
    try:
        plan = Plan.read(Path(plan_option).expanduser()) if plan_option else None
    except PlanError as exc:
        raise _usage(f"--chaos-plan {plan_option}", str(exc)) from None
    return _Options(
        duration_s=duration_s,
        plan=plan,
        images=images,
        report_dir=report_dir,
        seed=seed,
        cluster=cluster,
        group_protocol=protocol,
        audit_engine=engine,  # type: ignore[arg-type]  # checked against _AUDIT_ENGINES above
        client=client,
        spark_master=spark_master,
    )


def _given(option: str, value: object, env: str) -> str:
    """How the user gave a value, for an error message: ``--option value`` or ``ENV='value'``."""
    return f"{option} {value}" if value is not None else f"{env}={os.environ.get(env)!r}"


def _usage(given: str, problem: str) -> pytest.UsageError:
    return pytest.UsageError(f"chaos: {given}: {problem}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    item.stash.setdefault(_REPORT, {})[report.when] = report
    if report.when == "setup":
        item.config.stash[_RUNNING] = (item, dict(getattr(item, "funcargs", None) or {}))
    if report.when == "teardown":
        from chaos.report.hook import after_teardown

        if _RUNNING in item.config.stash:
            del item.config.stash[_RUNNING]
        rendered = after_teardown(item, report, item.stash[_REPORT])
        item.config.stash.setdefault(_HTML_REPORTS, []).extend(rendered.lines)
        if rendered.index is not None:
            item.config.stash[_HTML_INDEX] = rendered.index
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """List the HTML reports written in this session."""
    lines = config.stash.get(_HTML_REPORTS, [])
    if not lines:
        return
    terminalreporter.section("chaos reports")
    for line in lines:
        terminalreporter.write_line(line)
    index = config.stash.get(_HTML_INDEX, None)
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
        if session.config.stash.get(_SPARK_OWNED, False):
            from chaos.audit.spark import stop_spark

            stop_spark()


def _report_interrupted(session: pytest.Session) -> None:
    """The page of a test cut short by Ctrl-C or SIGTERM (its fixtures were torn down just before)."""
    running = session.config.stash.get(_RUNNING, None)
    if running is None:
        return
    del session.config.stash[_RUNNING]
    from chaos.report.hook import after_interrupt

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in after_interrupt(*running).lines:
        if reporter is not None:
            reporter.write_line(f"chaos: interrupted: {line}")


def _check_leaks(session: pytest.Session) -> None:
    run_ids = session.config.stash.get(_RUN_IDS, [])
    if not run_ids:
        return
    try:
        leaked = _sweep_leaks(run_ids)
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


def _sweep_leaks(run_ids: list[str]) -> list[str]:
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


@pytest.fixture(scope="session")
def chaos_images(pytestconfig: pytest.Config) -> ImageSet:
    """The images of the selected source, pulled or built as needed (once per session)."""
    from chaos.cluster.images import ensure_images

    options = pytestconfig.stash[_OPTIONS]
    return ensure_images(options.images, kafka_version=options.cluster.kafka_version)


@pytest.fixture(scope="session")
def chaos_report_dir(pytestconfig: pytest.Config) -> Path:
    """Root of this session's artifacts: ``--chaos-report-dir``, else ``$CHAOS_REPORT_DIR``, else
    ``reports/`` under pytest's rootdir (the project being tested, never the installed package)."""
    root = pytestconfig.stash[_OPTIONS].report_dir
    root.mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(scope="session")
def spark_session() -> Iterator[object]:
    """A local Spark session with the Kafka connector, shared by the session's tests."""
    from chaos.audit.spark import spark_session as start

    session = start()
    yield session
    session.stop()


@pytest.fixture(scope="session")
def chaos_seed(pytestconfig: pytest.Config) -> int:
    """The session's seed for fault plans (--chaos-seed, $CHAOS_SEED, else random; always printed)."""
    seed = pytestconfig.stash[_OPTIONS].seed
    print(f"chaos seed: {seed}")
    return seed


@pytest.fixture(scope="session")
def chaos_cluster_config(pytestconfig: pytest.Config) -> ClusterConfig:
    """The session cluster's configuration, from --chaos-profile, --chaos-brokers and --kafka-version."""
    return pytestconfig.stash[_OPTIONS].cluster


class _ClusterHolder:
    """The session's cluster; replaced by a fresh one when a test leaves it unhealthy."""

    def __init__(self, images: ImageSet, config: ClusterConfig, root: Path, run_ids: list[str]) -> None:
        self.images = images
        self.config = config
        self.root = root
        self.run_ids = run_ids
        self.cluster: KafkaCluster | None = None

    def get(self) -> KafkaCluster:
        if self.cluster is None:
            from chaos.cluster.cluster import KafkaCluster

            cluster = KafkaCluster(self.images, self.config)
            cluster.run_dir = self.root / f"cluster-{cluster.run_id}"
            self.run_ids.append(cluster.run_id)
            cluster.start()
            print(f"chaos cluster {cluster.run_id} ready in {cluster.start_duration_s:.1f} s")
            self.cluster = cluster
        return self.cluster

    def discard(self) -> None:
        if self.cluster is not None:
            cluster, self.cluster = self.cluster, None
            cluster.close()


@pytest.fixture(scope="session")
def _chaos_cluster_holder(
    pytestconfig: pytest.Config,
    chaos_images: ImageSet,
    chaos_cluster_config: ClusterConfig,
    chaos_report_dir: Path,
) -> Iterator[_ClusterHolder]:
    holder = _ClusterHolder(
        chaos_images, chaos_cluster_config, chaos_report_dir, pytestconfig.stash[_RUN_IDS]
    )
    try:
        yield holder
    finally:
        holder.discard()


@pytest.fixture
def kafka_cluster(
    request: pytest.FixtureRequest, _chaos_cluster_holder: _ClusterHolder, run_dir: Path
) -> Iterator[KafkaCluster]:
    """The session's cluster (started once, reused). After each test: every fault healed, the topics the
    test created deleted, and every ISR full — else the cluster is rebuilt for the next test."""
    from chaos.faults.heal import heal_all

    cluster = _chaos_cluster_holder.get()
    before = cluster.topics(internal=False)
    try:
        yield cluster
    finally:
        if _did_not_pass(request.node):
            try:
                cluster.capture_logs(run_dir / "logs")
            except Exception as exc:  # the heal below must run: the next test needs an uncut cluster
                print(f"chaos: broker logs of {request.node.nodeid} not captured: {exc!r}")
        try:
            heal_all(cluster)
            if not request.config.stash.get(_INTERRUPTED, False):  # else the cluster is removed next
                cluster.delete_topics(sorted(cluster.topics(internal=False) - before))
                cluster.wait_healthy(60)
        except Exception as exc:
            print(
                f"chaos: cluster {cluster.run_id} unhealthy after {request.node.nodeid} ({exc}); rebuilding"
            )
            _chaos_cluster_holder.discard()


def _did_not_pass(item: pytest.Item) -> bool:
    """Whether a test's broker logs are worth keeping: its call failed, or never completed (interrupted, or
    a later fixture's setup failed); not when it passed or was skipped."""
    phases = item.stash.get(_REPORT, {})
    call = phases.get("call")
    if call is not None:
        return call.failed
    setup = phases.get("setup")
    return setup is None or not setup.skipped


@pytest.fixture
def nemesis(kafka_cluster: KafkaCluster) -> Iterator[Nemesis]:
    """A nemesis on the session cluster; stopped and everything healed when the test ends."""
    from chaos.faults.nemesis import Nemesis

    running = Nemesis(kafka_cluster)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def run_dir(request: pytest.FixtureRequest, chaos_report_dir: Path) -> Path:
    """This test's artifact directory, ``<report dir>/tests/<test>/``: empty when the test starts (the
    previous run's artifacts are replaced), kept after it. While another live session holds that directory
    (same report dir, same test) this session gets ``<test>~2/`` (or the next free one) instead: a session
    never deletes or writes into another live session's run (:class:`chaos.run.locks.RunDirs`)."""
    from chaos.run.locks import RunDirs

    config = request.config
    dirs = config.stash.get(_RUN_DIRS, None)
    if dirs is None:
        dirs = config.stash[_RUN_DIRS] = RunDirs(chaos_report_dir / "tests")
        config.add_cleanup(dirs.release)  # held for the whole session, so its reports stay its own
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_")[:150]
    return dirs.claim(name)


@pytest.fixture
def scenario_run(
    request: pytest.FixtureRequest,
    pytestconfig: pytest.Config,
    kafka_cluster: KafkaCluster,
    run_dir: Path,
    chaos_seed: int,
) -> Callable[..., ScenarioRun]:
    """``scenario_run(SCENARIO, "vulnerable")`` -> an unopened ScenarioRun on the session's cluster, in this
    test's run directory, with the session's seed, profile, audit engine, strictness, duration, plan
    (``replay=`` a saved plan instead of ``--chaos-plan``'s) and client library (``client_library=``).
    :func:`chaos.scenario.chaos_scenario` uses it; a hand-written scenario test may too."""
    from chaos.scenario import ScenarioRun

    def make(
        scenario: Scenario,
        variant: str,
        engine: Engine | None = None,
        *,
        replay: Plan | None = None,
        client_library: str | None = None,
    ) -> ScenarioRun:
        return ScenarioRun(
            scenario,
            variant,
            kafka_cluster,
            run_dir,
            seed=chaos_seed,
            profile=pytestconfig.getoption("--chaos-profile"),
            nodeid=request.node.nodeid,
            engine=engine or pytestconfig.stash[_OPTIONS].audit_engine,
            strict_symptoms=pytestconfig.getoption("--chaos-strict-symptoms"),
            group_protocol=pytestconfig.stash[_OPTIONS].group_protocol,
            client_library=client_library or pytestconfig.stash[_OPTIONS].client,
            spark_master=pytestconfig.stash[_OPTIONS].spark_master,
            duration_s=pytestconfig.stash[_OPTIONS].duration_s,
            replay=replay or pytestconfig.stash[_OPTIONS].plan,
        )

    return make
