"""The plugin's options and their environment variables are checked once at session start: a bad value is
one usage error (exit 4, no traceback) naming the input and the fix, before any test runs (pytester)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from chaos import versions

ENV = (
    "CHAOS_SEED",
    "CHAOS_IMAGES",
    "CHAOS_REPORT_DIR",
    "CHAOS_KAFKA_VERSION",
    "CHAOS_AUDIT_ENGINE",
    "CHAOS_CLIENT",
    "CHAOS_SPARK_MASTER",
)

# A test that would leave a mark if the session ever got as far as running it.
NEVER_RUNS = """
from pathlib import Path

def test_runs():
    Path(__file__).with_name("ran").write_text("yes")
"""


@pytest.fixture(autouse=True)
def _no_chaos_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def _under_a_file(pytester: pytest.Pytester) -> str:
    blocker = pytester.path / "blocker"
    blocker.write_text("a file where a directory is needed")
    return str(blocker / "reports")


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ["--kafka-version", "9.9.9"],
            {},
            "ERROR: chaos: --kafka-version 9.9.9: kafka_version '9.9.9' is not supported: choose one of*"
            f"default {versions.KAFKA_VERSION}",
        ),
        (
            [],
            {"CHAOS_KAFKA_VERSION": "9.9.9"},
            "ERROR: chaos: CHAOS_KAFKA_VERSION='9.9.9': kafka_version '9.9.9' is not supported: choose*",
        ),
        (
            ["--chaos-brokers", "7"],
            {},
            "ERROR: chaos: --chaos-brokers 7: brokers=7 is out of range*(pass e.g. --chaos-brokers 3)",
        ),
        (
            [],
            {"CHAOS_SEED": "abc"},
            "ERROR: chaos: CHAOS_SEED='abc': not an integer; set a whole number (e.g. CHAOS_SEED=42)*",
        ),
        (
            [],
            {"CHAOS_IMAGES": "offical"},
            "ERROR: chaos: CHAOS_IMAGES='offical': image source 'offical' is not one of official, local*",
        ),
        (["--chaos-seed", "abc"], {}, "*--chaos-seed: invalid int value: 'abc'"),
        (["--chaos-brokers", "three"], {}, "*--chaos-brokers: invalid int value: 'three'"),
        (["--chaos-images", "offical"], {}, "*--chaos-images: invalid choice: 'offical'*"),
        (
            [],
            {"CHAOS_GROUP_PROTOCOL": "eager"},
            "ERROR: chaos: CHAOS_GROUP_PROTOCOL='eager': expected one of classic, consumer",
        ),
        (
            ["--chaos-group-protocol", "consumer", "--kafka-version", "3.9.2"],
            {},
            "ERROR: chaos: --chaos-group-protocol consumer: the consumer group protocol (KIP-848) is "
            "generally available from Kafka 4.0; the cluster runs 3.9.2: pass --kafka-version 4.0.2*",
        ),
        (
            ["--chaos-audit-engine", "duckdb"],
            {},
            "ERROR: chaos: --chaos-audit-engine duckdb: expected one of spark, reference",
        ),
        (
            [],
            {"CHAOS_AUDIT_ENGINE": "sprak"},
            "ERROR: chaos: CHAOS_AUDIT_ENGINE='sprak': expected one of spark, reference",
        ),
        (
            ["--chaos-client", "kafka-python"],
            {},
            "ERROR: chaos: --chaos-client kafka-python: expected one of librdkafka, java",
        ),
        (
            [],
            {"CHAOS_CLIENT": "jvm"},
            "ERROR: chaos: CHAOS_CLIENT='jvm': expected one of librdkafka, java",
        ),
        (
            ["--chaos-duration", "ten minutes"],
            {},
            "ERROR: chaos: --chaos-duration ten minutes: duration 'ten minutes': expected a positive number "
            "of seconds, or one with a unit: 60, 90s, 5m, 1h",
        ),
        (
            ["--chaos-fault-kinds", "crash,meteor"],
            {},
            "ERROR: chaos: --chaos-fault-kinds crash,meteor: fault kinds 'crash,meteor': meteor not known; *",
        ),
        (
            ["--chaos-plan", "nowhere/plan.json"],
            {},
            "ERROR: chaos: --chaos-plan nowhere/plan.json: cannot read the plan nowhere/plan.json: *",
        ),
        (
            ["--chaos-spark-master", "localhost:7077"],
            {},
            "ERROR: chaos: --chaos-spark-master localhost:7077: not a Spark master URL: 'localhost:7077'; "
            "give local[[]N], spark://HOST:PORT, sc://HOST:PORT *",  # [[] is fnmatch's literal [
        ),
        (
            [],
            {"CHAOS_SPARK_MASTER": "local[two]"},
            "ERROR: chaos: CHAOS_SPARK_MASTER='local[[]two]': not a Spark master URL: *",
        ),
    ],
    ids=[
        "kafka-version",
        "CHAOS_KAFKA_VERSION",
        "brokers",
        "CHAOS_SEED",
        "CHAOS_IMAGES",
        "seed-option",
        "brokers-option",
        "images-option",
        "CHAOS_GROUP_PROTOCOL",
        "consumer-protocol-on-3.9",
        "audit-engine-option",
        "CHAOS_AUDIT_ENGINE",
        "client-option",
        "CHAOS_CLIENT",
        "duration-option",
        "fault-kinds-option",
        "plan-option",
        "spark-master-option",
        "CHAOS_SPARK_MASTER",
    ],
)
def test_bad_input_is_one_usage_error(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    expected: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_inner=NEVER_RUNS)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([expected])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert not (pytester.path / "ran").exists()


@pytest.mark.parametrize("via", ["option", "env"])
def test_a_report_dir_that_cannot_be_created_is_a_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, via: str
) -> None:
    target = _under_a_file(pytester)
    pytester.makepyfile(test_inner=NEVER_RUNS)
    if via == "env":
        monkeypatch.setenv("CHAOS_REPORT_DIR", target)
        result = pytester.runpytest()
        given = f"CHAOS_REPORT_DIR={target!r}"
    else:
        result = pytester.runpytest("--chaos-report-dir", target)
        given = f"--chaos-report-dir {target}"
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: chaos: {given}: cannot create or write {target} (Not a directory); name a writable *"]
    )
    assert "Traceback" not in result.stderr.str()
    assert not (pytester.path / "ran").exists()


def test_the_default_report_dir_is_not_created_up_front(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    pass\n")
    pytester.runpytest().assert_outcomes(passed=1)
    assert not (pytester.path / "reports").exists()


def test_valid_input_reaches_the_fixtures(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CHAOS_SEED", " 42 ")
    monkeypatch.setenv("CHAOS_KAFKA_VERSION", versions.KAFKA_VERSION)
    report_dir = tmp_path / "new" / "reports"
    pytester.makepyfile(
        f"""
        from pathlib import Path

        def test_fixtures(chaos_seed, chaos_cluster_config, chaos_report_dir):
            assert chaos_seed == 42
            assert chaos_cluster_config.brokers == 5
            assert chaos_cluster_config.profile == "faithful"
            assert chaos_cluster_config.kafka_version == {versions.KAFKA_VERSION!r}
            assert chaos_report_dir == Path({str(report_dir)!r})
            assert chaos_report_dir.is_dir()
        """
    )
    result = pytester.runpytest(
        "--chaos-brokers", "5", "--chaos-profile", "faithful", "--chaos-report-dir", str(report_dir)
    )
    result.assert_outcomes(passed=1)


def test_the_seed_option_wins_over_the_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAOS_SEED", "7")
    pytester.makepyfile("def test_seed(chaos_seed):\n    assert chaos_seed == 11\n")
    pytester.runpytest("--chaos-seed", "11").assert_outcomes(passed=1)


def test_the_header_names_the_seed_a_random_session_drew(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_seed(chaos_seed):\n    print('drawn', chaos_seed)\n")
    result = pytester.runpytest("-s")
    result.assert_outcomes(passed=1)
    drawn = next(line.split()[-1] for line in result.stdout.lines if line.startswith("drawn "))
    result.stdout.fnmatch_lines([f"chaos: seed {drawn}, Kafka {versions.KAFKA_VERSION}, 3 brokers, *"])


def test_help_is_not_blocked_by_bad_input(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAOS_SEED", "abc")
    result = pytester.runpytest("--help")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*--chaos-seed*"])


def _scenario_tests(pytester: pytest.Pytester, tests: str) -> None:
    """A project whose test file defines scenario ``S`` (variant ``v``) above ``tests``; its
    ``kafka_cluster`` is a stand-in: opening a ScenarioRun object needs no cluster (nothing runs until it
    is entered)."""
    pytester.makeconftest("import pytest\n\n@pytest.fixture\ndef kafka_cluster():\n    return object()\n")
    scenario = """
        from chaos.scenario import Scenario, Variant
        from chaos.workload import IDEMPOTENT

        S = Scenario(scenario_id="option_choice", case_id="X1", title="t", source="here", symptom="none",
                     client=IDEMPOTENT, guarantee="at_least_once", expected_verdict="pass",
                     variants=(Variant("v", "a variant"),))
        """
    pytester.makepyfile(textwrap.dedent(scenario) + textwrap.dedent(tests))


def _spark_starts(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> list[str]:
    """Set ``env``; returns the list the session's background Spark starts are recorded in (the master of
    each), instead of starting a JVM."""
    import chaos.audit.spark

    started: list[str] = []
    monkeypatch.setattr(chaos.audit.spark, "start_in_background", started.append)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return started


@pytest.mark.parametrize(
    ("args", "env", "engine", "master"),
    [
        ([], {}, "spark", "local[2]"),
        (["--chaos-audit-engine", "reference"], {}, "reference", "local[2]"),
        ([], {"CHAOS_AUDIT_ENGINE": " Reference "}, "reference", "local[2]"),
        (["--chaos-audit-engine", "spark"], {"CHAOS_AUDIT_ENGINE": "reference"}, "spark", "local[2]"),
        (["--chaos-spark-master", "spark://127.0.0.1:7077"], {}, "spark", "spark://127.0.0.1:7077"),
        ([], {"CHAOS_SPARK_MASTER": " sc://127.0.0.1:15002 "}, "spark", "sc://127.0.0.1:15002"),
        (["--chaos-spark-master", "local[1]"], {"CHAOS_SPARK_MASTER": "local[4]"}, "spark", "local[1]"),
    ],
    ids=[
        "default",
        "engine",
        "CHAOS_AUDIT_ENGINE",
        "engine-wins",
        "master",
        "CHAOS_SPARK_MASTER",
        "master-wins",
    ],
)
def test_the_audit_engine_and_spark_master_reach_scenario_runs_and_the_header(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    engine: str,
    master: str,
) -> None:
    import chaos.audit.spark

    started: list[str] = []
    monkeypatch.setattr(chaos.audit.spark, "start_in_background", started.append)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _scenario_tests(
        pytester,
        f"""
        def test_engine(scenario_run):
            assert scenario_run(S, "v").engine == {engine!r}
            assert scenario_run(S, "v", engine="reference").engine == "reference"
            assert scenario_run(S, "v").spark_master == {master!r}

        def test_without_a_run():
            pass
        """,
    )
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2)
    on = f" on {master.replace('[', '[[]')}" if engine == "spark" else ""  # [[] is fnmatch's literal [
    result.stdout.fnmatch_lines([f"chaos: seed *, audit engine {engine}{on}"])
    # Spark's JVM starts as the session starts (its start overlaps the first cluster's), on the runs'
    # master, only when a scenario run will audit with it
    assert started == ([master] if engine == "spark" else [])


def test_no_spark_is_started_for_a_session_without_scenario_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import chaos.audit.spark

    started: list[str] = []
    monkeypatch.setattr(chaos.audit.spark, "start_in_background", started.append)
    pytester.makepyfile("def test_ok():\n    pass\n")
    pytester.runpytest().assert_outcomes(passed=1)
    assert started == []


def test_collect_only_starts_no_spark_even_with_scenario_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--collect-only`` runs nothing (a JVM started and stopped for it cost such a session ~7 s)."""
    started = _spark_starts(monkeypatch, {})
    _scenario_tests(pytester, "def test_engine(scenario_run):\n    pass\n")
    result = pytester.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["*::test_engine"])
    assert started == []
    pytester.runpytest("-k", "nothing-matches")
    assert started == []
    pytester.runpytest("--co", "-q")
    assert started == []


def test_the_duration_and_the_plan_reach_scenario_runs(pytester: pytest.Pytester) -> None:
    from chaos.faults.plan import FaultStep, Plan

    plan = Plan(3, 3, (FaultStep(1.0, 2.0, "pause", 2),), 90.0)
    (pytester.path / "plan.resolved.json").write_text(plan.to_json())
    _scenario_tests(
        pytester,
        f"""
        from chaos.faults.plan import Plan

        def test_options(scenario_run, request):
            # pytest-timeout's limit (--timeout 100) plus the replayed plan's 90 s
            assert request.node.get_closest_marker("timeout").args == (190.0,)
            run = scenario_run(S, "v", engine="reference")
            assert run.duration_s == 300.0
            assert run.plan() == Plan.from_json({plan.to_json()!r})
            assert run.length_s == 90.0  # the replayed plan's length wins
        """,
    )
    result = pytester.runpytest(
        "--chaos-duration", "5m", "--chaos-plan", "plan.resolved.json", "--timeout", "100"
    )
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("args", "kinds", "fake_clock", "log_dir_mb"),
    [
        ([], None, False, 0),
        (["--chaos-fault-kinds", "all"], "ALL_KINDS", True, 1024),
        (["--chaos-fault-kinds", "crash, clock_drift"], ("crash", "clock_drift"), True, 0),
        (["--chaos-plan", "plan.json"], None, False, 1024),  # a replayed plan's disk_full step
    ],
    ids=["default", "all", "named", "replayed-plan"],
)
def test_the_fault_kinds_reach_scenario_runs_and_the_cluster_has_what_they_act_on(
    pytester: pytest.Pytester, args: list[str], kinds: object, fake_clock: bool, log_dir_mb: int
) -> None:
    from chaos.faults.plan import FaultStep, Plan

    plan = Plan(3, 3, (FaultStep(1.0, 5.0, "disk_full", 2),), 30.0)
    (pytester.path / "plan.json").write_text(plan.to_json())
    _scenario_tests(
        pytester,
        f"""
        from chaos.faults.plan import ALL_KINDS, KINDS

        def test_kinds(scenario_run, chaos_cluster_config):
            run = scenario_run(S, "v", engine="reference")
            assert run.fault_kinds == {kinds}
            config = chaos_cluster_config
            assert (config.fake_clock, config.log_dir_mb) == ({fake_clock}, {log_dir_mb})
            if run.fault_kinds and run.replay is None:  # the session's kinds are the plan's
                plan = run.plan(duration_s=600, brokers=3, topic="t", concurrency=2)
                drawn = {{s.kind for s in plan.steps}}
                assert drawn <= set(run.fault_kinds) and drawn - set(KINDS), drawn
        """,
    )
    result = pytester.runpytest("--chaos-seed", "7", *args)
    result.assert_outcomes(passed=1)
    chosen = args[:1] == ["--chaos-fault-kinds"]
    assert (", fault kinds " in result.stdout.str()) == chosen  # the header names kinds a user chose
    if isinstance(kinds, tuple):
        assert f", fault kinds {','.join(kinds)}" in result.stdout.str()
