"""The plugin's options: each ``--chaos-*`` flag and its environment variable, read and checked once at
session start (:class:`Options`, a bad value is one usage error), shown in pytest's header."""

from __future__ import annotations

import argparse
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from chaos.audit.run import Engine
    from chaos.cluster.config import ClusterConfig
    from chaos.cluster.images import Source
    from chaos.faults.plan import Plan
    from chaos.run.profiles import GroupProtocol

from chaos.plugin.keys import (
    AUDIT_ENGINES,
    ENV_AUDIT_ENGINE,
    ENV_CLIENT,
    ENV_GROUP_PROTOCOL,
    ENV_REPORT_DIR,
    ENV_SEED,
    SPARK_OWNED,
)


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
        "--chaos-fault-kinds",
        default=None,
        metavar="KINDS",
        help="The fault kinds a scenario's random plan draws from (RN1): default, all (the broker clock and "
        "disk faults too; the session's cluster then starts with a fakeable clock and log directories of its "
        "own) or kinds separated by commas (docs/faults.md).",
    )
    group.addoption(
        "--chaos-plan",
        default=None,
        metavar="PLAN_NAME",
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


@dataclass(frozen=True)
class Options:
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
    fault_kinds: tuple[str, ...] | None = None  # None: a plan's own default kinds


OPTIONS: pytest.StashKey[Options] = pytest.StashKey()
"""Where the session keeps its :class:`Options` (read at session start)."""


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[OPTIONS] = _read_options(session.config)
    from chaos.audit.spark import jvm_running

    # a session stops only the Spark JVM it started (a pytester session inside another keeps its host's)
    session.config.stash[SPARK_OWNED] = not jvm_running()


def pytest_report_header(config: pytest.Config) -> str | None:
    """The session's chaos options in pytest's header: the seed among them, the one way to draw a random
    session's fault plans again."""
    options = config.stash.get(OPTIONS, None)
    if options is None:
        return None
    cluster = options.cluster
    return (
        f"chaos: seed {options.seed}, Kafka {cluster.kafka_version}, {cluster.brokers} brokers, profile "
        f"{cluster.profile}, client {options.client}, group protocol {options.group_protocol}, "
        f"audit engine {options.audit_engine}"
        + (f" on {options.spark_master}" if options.audit_engine == "spark" else "")
        + (f", fault kinds {','.join(options.fault_kinds)}" if options.fault_kinds is not None else "")
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """With a scenario run among the selected tests: lengthen their timeouts by the asked duration, and
    with the Spark engine start the Spark session now, in the background: its JVM's start overlaps the
    cluster's (the first test's fixtures). The session's finish stops it
    (:func:`chaos.audit.spark.stop_spark`), even when SIGTERM or Ctrl-C ends the session. ``--collect-only``
    runs nothing, so starts nothing."""
    from chaos.scenario.api import RUN_FIXTURE

    options = session.config.stash.get(OPTIONS, None)
    runs = [item for item in session.items if RUN_FIXTURE in getattr(item, "fixturenames", ())]
    if options is None or not runs:
        return
    _lengthen_timeouts(session.config, runs, options)
    if options.audit_engine == "spark" and not session.config.option.collectonly:
        from chaos.audit.spark import start_in_background

        start_in_background(options.spark_master)


def _lengthen_timeouts(config: pytest.Config, runs: list[pytest.Item], options: Options) -> None:
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


def _read_options(config: pytest.Config) -> Options:
    """Read and check every chaos option; raise pytest.UsageError naming the bad input and its fix."""
    from chaos import versions
    from chaos.audit.spark import SCENARIO_MASTER, SPARK_MASTER_ENV, check_master
    from chaos.audit.warm import master_or
    from chaos.cluster.config import ClusterConfig
    from chaos.cluster.images.catalog import ENV_SOURCE, Source
    from chaos.errors import ConfigError, PlanError
    from chaos.faults.plan import Plan, needs_of, parse_kinds
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
        raw_seed = os.environ.get(ENV_SEED, "").strip()
        try:
            seed = int(raw_seed) if raw_seed else secrets.randbelow(2**31)
        except ValueError:
            raise _usage(
                _given("--chaos-seed", None, ENV_SEED),
                f"not an integer; set a whole number (e.g. {ENV_SEED}=42), or unset it for a random seed",
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
    if dir_option or os.environ.get(ENV_REPORT_DIR):
        try:
            report_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=report_dir):
                pass
        except OSError as exc:
            raise _usage(
                _given("--chaos-report-dir", dir_option, ENV_REPORT_DIR),
                f"cannot create or write {report_dir} ({exc.strerror or exc}); name a writable directory",
            ) from None
    protocol_option: str | None = config.getoption("--chaos-group-protocol")
    protocol = (protocol_option or os.environ.get(ENV_GROUP_PROTOCOL) or "classic").strip().lower()
    given_protocol = _given("--chaos-group-protocol", protocol_option, ENV_GROUP_PROTOCOL)
    if protocol not in GROUP_PROTOCOLS:
        raise _usage(given_protocol, f"expected one of {', '.join(GROUP_PROTOCOLS)}")
    if protocol == "consumer" and versions.kafka_major(cluster.kafka_version) < 4:
        raise _usage(
            given_protocol,
            f"the consumer group protocol (KIP-848) is generally available from Kafka 4.0; the cluster runs "
            f"{cluster.kafka_version}: pass --kafka-version 4.0.2 or later, or use the classic protocol",
        )
    engine_option: str | None = config.getoption("--chaos-audit-engine")
    engine = (engine_option or os.environ.get(ENV_AUDIT_ENGINE) or "spark").strip().lower()
    if engine not in AUDIT_ENGINES:
        raise _usage(
            _given("--chaos-audit-engine", engine_option, ENV_AUDIT_ENGINE),
            f"expected one of {', '.join(AUDIT_ENGINES)}",
        )
    client_option: str | None = config.getoption("--chaos-client")
    client = (client_option or os.environ.get(ENV_CLIENT) or "librdkafka").strip().lower()
    if client not in CLIENTS:
        given_client = _given("--chaos-client", client_option, ENV_CLIENT)
        raise _usage(given_client, f"expected one of {', '.join(CLIENTS)}")
    master_option: str | None = config.getoption("--chaos-spark-master")
    try:
        spark_master = check_master(
            master_option or os.environ.get(SPARK_MASTER_ENV) or master_or(SCENARIO_MASTER)
        )
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
    kinds_option: str | None = config.getoption("--chaos-fault-kinds")
    try:
        fault_kinds = parse_kinds(kinds_option) if kinds_option is not None else None
    except PlanError as exc:
        raise _usage(f"--chaos-fault-kinds {kinds_option}", str(exc)) from None
    # the clock and disk faults need a cluster that has what they act on, from its start
    drawn = [*(fault_kinds or ()), *(step.kind for step in (plan.steps if plan is not None else ()))]
    cluster = needs_of(drawn).applied_to(cluster)
    return Options(
        duration_s=duration_s,
        plan=plan,
        fault_kinds=fault_kinds,
        images=images,
        report_dir=report_dir,
        seed=seed,
        cluster=cluster,
        group_protocol=protocol,
        audit_engine=engine,  # type: ignore[arg-type]  # checked against AUDIT_ENGINES above
        client=client,
        spark_master=spark_master,
    )


def _given(option: str, value: object, env: str) -> str:
    """How the user gave a value, for an error message: ``--option value`` or ``ENV='value'``."""
    return f"{option} {value}" if value is not None else f"{env}={os.environ.get(env)!r}"


def _usage(given: str, problem: str) -> pytest.UsageError:
    return pytest.UsageError(f"chaos: {given}: {problem}")
