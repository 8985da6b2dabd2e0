"""The plugin's fixtures: the session's images, report directory, Spark session, seed and cluster (one,
reused, rebuilt when a test leaves it unhealthy), and per test its run directory, nemesis and
``scenario_run``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from chaos.audit.run import Engine
    from chaos.cluster.cluster import KafkaCluster
    from chaos.cluster.config import ClusterConfig, ClusterNeeds
    from chaos.cluster.images import ImageSet
    from chaos.faults.nemesis import Nemesis
    from chaos.faults.plan import Plan
    from chaos.scenario import Scenario, ScenarioRun

from chaos.plugin.keys import INTERRUPTED, REPORT, RUN_DIRS, RUN_IDS
from chaos.plugin.options import OPTIONS
from chaos.run.layout import LOGS_DIR


@pytest.fixture(scope="session")
def chaos_images(pytestconfig: pytest.Config) -> ImageSet:
    """The images of the selected source, pulled or built as needed (once per session)."""
    from chaos.cluster.images import ensure_images

    options = pytestconfig.stash[OPTIONS]
    return ensure_images(options.images, kafka_version=options.cluster.kafka_version)


@pytest.fixture(scope="session")
def chaos_report_dir(pytestconfig: pytest.Config) -> Path:
    """Root of this session's artifacts: ``--chaos-report-dir``, else ``$CHAOS_REPORT_DIR``, else
    ``reports/`` under pytest's rootdir (the project being tested, never the installed package)."""
    root = pytestconfig.stash[OPTIONS].report_dir
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
    seed = pytestconfig.stash[OPTIONS].seed
    print(f"chaos seed: {seed}")
    return seed


@pytest.fixture(scope="session")
def chaos_cluster_config(pytestconfig: pytest.Config) -> ClusterConfig:
    """The session cluster's configuration, from --chaos-profile, --chaos-brokers and --kafka-version."""
    return pytestconfig.stash[OPTIONS].cluster


class ClusterHolder:
    """The session's cluster; replaced by a fresh one when a test leaves it unhealthy."""

    def __init__(self, images: ImageSet, config: ClusterConfig, root: Path, run_ids: list[str]) -> None:
        self.images = images
        self.config = config
        self.root = root
        self.run_ids = run_ids
        self.cluster: KafkaCluster | None = None

    def get(self, needs: ClusterNeeds | None = None) -> KafkaCluster:
        """The session's cluster; started again with what ``needs`` adds when it lacks it (and kept so for
        the rest of the session, so scenarios that need it do not restart it each)."""
        if needs is not None and not needs.met_by(self.config):
            self.config = needs.applied_to(self.config)
            if self.cluster is not None:
                print(f"chaos: a scenario needs {needs.describe()}: the session's cluster starts again")
            self.discard()
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
) -> Iterator[ClusterHolder]:
    holder = ClusterHolder(chaos_images, chaos_cluster_config, chaos_report_dir, pytestconfig.stash[RUN_IDS])
    try:
        yield holder
    finally:
        holder.discard()


@pytest.fixture
def kafka_cluster(
    request: pytest.FixtureRequest, _chaos_cluster_holder: ClusterHolder, run_dir: Path
) -> Iterator[KafkaCluster]:
    """The session's cluster (started once, reused; started again when a scenario's ``cluster`` needs what
    it lacks). After each test: every fault healed, the topics the test created deleted, and every ISR
    full — else the cluster is rebuilt for the next test."""
    from chaos.faults.heal import heal_all

    scenario = getattr(getattr(request.node, "function", None), "scenario", None)
    cluster = _chaos_cluster_holder.get(getattr(scenario, "cluster", None))
    before = cluster.topics(internal=False)
    try:
        yield cluster
    finally:
        if _did_not_pass(request.node):
            try:
                cluster.capture_logs(run_dir / LOGS_DIR)
            except Exception as exc:  # the heal below must run: the next test needs an uncut cluster
                print(f"chaos: broker logs of {request.node.nodeid} not captured: {exc!r}")
        interrupted = request.config.stash.get(INTERRUPTED, False)
        try:
            heal_all(cluster, interrupted=interrupted)
            if not interrupted:  # else the cluster is removed next
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
    phases = item.stash.get(REPORT, {})
    call = phases.get("call")
    if call is not None:
        return call.failed
    setup = phases.get("setup")
    return setup is None or not setup.skipped


@pytest.fixture
def nemesis(request: pytest.FixtureRequest, kafka_cluster: KafkaCluster) -> Iterator[Nemesis]:
    """A nemesis on the session cluster; stopped and everything healed when the test ends."""
    from chaos.faults.nemesis import Nemesis

    running = Nemesis(kafka_cluster)
    try:
        yield running
    finally:
        running.stop(interrupted=request.config.stash.get(INTERRUPTED, False))


@pytest.fixture
def run_dir(request: pytest.FixtureRequest, chaos_report_dir: Path) -> Path:
    """This test's artifact directory, ``<report dir>/tests/<test>/``: empty when the test starts (the
    previous run's artifacts are replaced), kept after it. While another live session holds that directory
    (same report dir, same test) this session gets ``<test>~2/`` (or the next free one) instead: a session
    never deletes or writes into another live session's run (:class:`chaos.run.locks.RunDirs`)."""
    from chaos.run.locks import RunDirs

    config = request.config
    dirs = config.stash.get(RUN_DIRS, None)
    if dirs is None:
        dirs = config.stash[RUN_DIRS] = RunDirs(chaos_report_dir / "tests")
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
            engine=engine or pytestconfig.stash[OPTIONS].audit_engine,
            strict_symptoms=pytestconfig.getoption("--chaos-strict-symptoms"),
            group_protocol=pytestconfig.stash[OPTIONS].group_protocol,
            client_library=client_library or pytestconfig.stash[OPTIONS].client,
            spark_master=pytestconfig.stash[OPTIONS].spark_master,
            duration_s=pytestconfig.stash[OPTIONS].duration_s,
            replay=replay or pytestconfig.stash[OPTIONS].plan,
            fault_kinds=pytestconfig.stash[OPTIONS].fault_kinds,
        )

    return make
