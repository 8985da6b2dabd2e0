"""What each client really ran with: the layered configuration and who set each key,
the workers announcing their clients, the flags where a client did not run as asked, secrets masked, the
group's isolation level taken from its members, scenario.json round trip, the report showing the flags, and
``ScenarioRun.finish()`` handing the audit that isolation level. No broker is contacted: librdkafka checks
each configuration on a client that is never used."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import chaos.scenario.runner as runner_module
from chaos.audit.facts import DEFAULT_OPTIONS, AuditOptions
from chaos.cluster.cluster import KafkaCluster
from chaos.cluster.images.catalog import ImageSet
from chaos.errors import ConfigError
from chaos.report.render import build_page
from chaos.run.files import RunFileError
from chaos.run.manifest import (
    ClientInfo,
    ConfigFlag,
    GroupIsolation,
    Scalar,
    ScenarioInfo,
    read_scenario,
    write_scenario,
)
from chaos.scenario import Scenario, ScenarioRun, Variant
from chaos.scenario.conclude import audit_options, client_records, config_flags, group_isolation
from chaos.workload import (
    IDEMPOTENT,
    TRANSACTIONAL,
    MemberSpec,
    ProcessMember,
    ProducerSpec,
    ProducerWorker,
    RunContext,
    ThreadMember,
    custom_profile,
)
from chaos.workload.effective import (
    HARNESS,
    MAX_RUNS,
    ClientConfig,
    Layers,
    announce,
    announced,
    take_announced,
)
from chaos.workload.transactional import TransactionalWorker, TxnWorkerSpec

BOOT = "127.0.0.1:9092"
ASKED_AUTO_COMMIT = custom_profile(
    "team", "at_least_once", producer={"acks": "all"}, consumer={"enable.auto.commit": "true"}
)


def context(run_id: str, client: Any = IDEMPOTENT) -> RunContext:
    return RunContext(
        run_id=run_id, bootstrap_servers=BOOT, topic="t", group="g", client=client, sink=lambda event: None
    )


def consumer(
    process: str, isolation: str | None, group: str = "g", role: str = "member", **extra: Any
) -> ClientConfig:
    settings: dict[str, Any] = {"group.id": group, **extra}
    if isolation is not None:
        settings["isolation.level"] = isolation
    return Layers().put("test", settings).client(process, role, "p")  # type: ignore[arg-type]


# ---- the layers and the workers' effective configuration -------------------------------------------


def test_a_member_records_who_set_each_key_and_its_strategy_wins() -> None:
    spec = MemberSpec("consumer-0", strategy="commit_after", overrides=(("session.timeout.ms", 7000),))
    config = spec.client_config(context("r-layers", ASKED_AUTO_COMMIT))
    assert (config.process, config.role, config.profile, config.side) == (
        "consumer-0",
        "member",
        "team",
        "consumer",
    )
    assert config.settings["enable.auto.commit"] is False
    assert config.origins["enable.auto.commit"] == "commit strategy commit_after"
    assert config.settings["session.timeout.ms"] == 7000
    assert config.origins["session.timeout.ms"] == "overrides of member consumer-0"
    assert config.origins["heartbeat.interval.ms"] == "time profile ci"
    assert (config.settings["group.id"], config.origins["group.id"]) == ("g", HARNESS)
    assert config.origins["isolation.level"] == HARNESS
    # the dict the member hands librdkafka is exactly the recorded one: no callback in it
    assert spec.consumer_settings(context("r-layers", ASKED_AUTO_COMMIT)) == dict(config.settings)
    assert not {"logger", "error_cb", "on_commit"} & set(config.settings)
    auto = replace(spec, strategy="auto").client_config(context("r-layers", ASKED_AUTO_COMMIT))
    assert auto.settings["enable.auto.commit"] is True
    assert auto.origins["enable.auto.commit"] == "commit strategy auto"


def test_a_transform_records_both_clients_and_what_the_worker_forces() -> None:
    ctx = context("r-txn", TRANSACTIONAL)
    spec = TxnWorkerSpec("transformer-0", input_topic="in", consumer_overrides=(("isolation.level", "x"),))
    with pytest.raises(ConfigError, match=r"isolation\.level"):  # librdkafka refuses it before anything runs
        spec.consumer_client(ctx)
    spec = TxnWorkerSpec("transformer-0", input_topic="in")
    consumer_side = spec.consumer_client(ctx)
    producer_side = spec.producer_client(ctx)
    assert consumer_side.role == "transform_consumer"
    assert consumer_side.settings["isolation.level"] == "read_committed"
    assert consumer_side.origins["isolation.level"].startswith("transactional worker")
    assert producer_side.role == "transform_producer"
    assert (producer_side.settings["transactional.id"], producer_side.origins["transactional.id"]) == (
        "chaos-transformer-0",
        HARNESS,
    )
    assert producer_side.origins["enable.idempotence"] == "client profile transactional"
    assert spec.producer_settings(ctx) == dict(producer_side.settings)


def test_every_worker_announces_its_clients_when_it_is_built_and_the_run_takes_them() -> None:
    ctx = context("r-announce")
    take_announced(ctx.run_id)
    producer = ProducerWorker(ctx, ProducerSpec(name="producer-0", count=1))
    ThreadMember(ctx, MemberSpec("consumer-0"))
    ProcessMember(ctx, MemberSpec("consumer-1", strategy="auto"))  # not started: no child process
    ThreadMember(ctx, MemberSpec("consumer-0"))  # the same configuration again: kept once
    txn = replace(ctx, client=TRANSACTIONAL)
    TransactionalWorker(txn, TxnWorkerSpec("transformer-0", input_topic="in"))
    clients = announced(ctx.run_id)
    assert [(c.process, c.role) for c in clients] == [
        ("producer-0", "producer"),
        ("consumer-0", "member"),
        ("consumer-1", "member"),
        ("transformer-0", "transform_producer"),
        ("transformer-0", "transform_consumer"),
    ]
    assert clients[0] == producer.client_config
    assert clients[2].settings["enable.auto.commit"] is True
    assert take_announced(ctx.run_id) == clients
    assert announced(ctx.run_id) == ()


def test_only_the_most_recent_runs_are_kept_until_taken() -> None:
    config = consumer("consumer-0", "read_committed")
    for n in range(MAX_RUNS + 1):
        announce(context(f"r-evict-{n}"), config)
    assert announced("r-evict-0") == ()
    assert announced(f"r-evict-{MAX_RUNS}") == (config,)
    for n in range(MAX_RUNS + 1):
        take_announced(f"r-evict-{n}")


def test_a_client_config_needs_an_origin_for_every_key() -> None:
    with pytest.raises(ConfigError, match="origin"):
        ClientConfig("p", "member", "x", {"acks": "all"}, {})
    with pytest.raises(ConfigError, match="role"):
        ClientConfig("p", "admin", "x", {}, {})  # type: ignore[arg-type]


# ---- the flags ----------------------------------------------------------------------------------------


def test_the_strategy_turning_auto_commit_off_is_flagged_with_who_did_it() -> None:
    variant = Variant(
        "team", "the team's", "at_least_once", "pass", consumer_config={"enable.auto.commit": "true"}
    )
    member = MemberSpec("consumer-0").client_config(context("r-flag", ASKED_AUTO_COMMIT))
    ((record),) = client_records([member], variant)
    assert record.flags == (ConfigFlag("enable.auto.commit", "true", False, "commit strategy commit_after"),)
    assert record.settings["enable.auto.commit"] is False
    assert record.origins == member.origins


def test_settings_run_as_asked_are_not_flagged_whatever_their_spelling() -> None:
    client = (
        Layers()
        .put("client profile team", {"acks": -1, "queue.buffering.max.ms": 5, "enable.idempotence": True})
        .put("overrides", {"retries": "10"})
        .client("producer-0", "producer", "team")
    )
    asked: dict[str, Scalar] = {
        "acks": "all",
        "linger.ms": "5",
        "enable.idempotence": "TRUE",
        "retries": 10.0,
    }
    assert config_flags(asked, client) == ()
    changed = config_flags({"acks": 1, "retries": 3}, client)
    assert changed == (
        ConfigFlag("acks", 1, -1, "client profile team"),
        ConfigFlag("retries", 3, "10", "overrides"),
    )


def test_a_key_the_workers_profile_does_not_set_is_flagged_as_not_set() -> None:
    """O6 hands its transform the transactional profile: the variant's max.in.flight is not in it."""
    asked = dict(IDEMPOTENT.producer_settings)
    spec = TxnWorkerSpec("transformer-0", input_topic="in")
    producer = spec.producer_client(context("r-swap", TRANSACTIONAL))
    (flag,) = config_flags(asked, producer)
    assert (flag.key, flag.asked, flag.effective) == ("max.in.flight.requests.per.connection", 5, None)
    assert "client profile transactional" in flag.changed_by
    assert "librdkafka's default" in flag.changed_by


def test_secrets_are_masked_in_the_settings_and_the_flags(tmp_path: Path) -> None:
    client = (
        Layers()
        .put("client profile team", {"sasl.password": "hunter2", "sasl.username": "app"})
        .client("producer-0", "producer", "team")
    )
    variant = Variant(
        "team", "the team's", "at_least_once", "pass", producer_config={"sasl.password": "s3cret"}
    )
    ((record),) = client_records([client], variant)
    assert record.settings == {"sasl.password": "***", "sasl.username": "app"}
    assert record.flags == (ConfigFlag("sasl.password", "***", "***", "client profile team"),)
    write_scenario(tmp_path, ScenarioInfo("s", clients=(record,)))
    text = (tmp_path / "scenario.json").read_text(encoding="utf-8")
    assert "hunter2" not in text
    assert "s3cret" not in text


# ---- the group's isolation level ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        (("read_committed", "read_committed"), "read_committed"),
        (("read_uncommitted", "read_uncommitted"), "read_uncommitted"),
        (("read_committed", "read_uncommitted"), "read_uncommitted"),
        ((None, None), "read_committed"),  # not set: librdkafka's default
    ],
)
def test_the_group_reads_committed_only_when_every_member_does(
    levels: tuple[str | None, str | None], expected: str
) -> None:
    clients = [consumer(f"consumer-{n}", level) for n, level in enumerate(levels)]
    clients += [
        consumer("other", "read_uncommitted", group="another-group"),
        Layers().put("x", {"isolation.level": "read_uncommitted"}).client("producer-0", "producer", "p"),
    ]
    isolation = group_isolation(clients, "g")
    assert isolation is not None
    assert isolation.level == expected
    assert "other" not in isolation.reason
    assert "producer-0" not in isolation.reason
    assert audit_options(isolation) == AuditOptions(group_isolation=expected)  # type: ignore[arg-type]
    if len(set(levels)) > 1:
        assert "mixed group" in isolation.reason
        assert "consumer-0" in isolation.reason
        assert "consumer-1" in isolation.reason


def test_a_run_without_members_keeps_the_audits_default() -> None:
    assert group_isolation([consumer("c", "read_uncommitted", group="elsewhere")], "g") is None
    assert audit_options(None) is DEFAULT_OPTIONS


# ---- scenario.json --------------------------------------------------------------------------------------


def recorded() -> ScenarioInfo:
    record = ClientInfo(
        process="consumer-0",
        role="member",
        profile="team",
        settings={"enable.auto.commit": False, "group.id": "g", "session.timeout.ms": 6000},
        origins={
            "enable.auto.commit": "commit strategy commit_after",
            "group.id": HARNESS,
            "session.timeout.ms": "time profile ci",
        },
        flags=(
            ConfigFlag("enable.auto.commit", "true", False, "commit strategy commit_after"),
            ConfigFlag("max.in.flight.requests.per.connection", 5, None, "not set: <b>profile</b>"),
        ),
    )
    return ScenarioInfo(
        "o6[team]",
        consumer_config={"enable.auto.commit": "true"},
        clients=(record,),
        group_isolation=GroupIsolation("read_uncommitted", "read_uncommitted: consumer-0"),
    )


def test_the_clients_round_trip_through_scenario_json(tmp_path: Path) -> None:
    info = recorded()
    write_scenario(tmp_path, info)
    assert read_scenario(tmp_path) == info
    data = json.loads((tmp_path / "scenario.json").read_text(encoding="utf-8"))
    assert data["format"] == 1
    assert data["clients"][0]["flags"][0] == {
        "key": "enable.auto.commit",
        "asked": "true",
        "effective": False,
        "changed_by": "commit strategy commit_after",
    }
    assert data["group_isolation"] == {"level": "read_uncommitted", "reason": "read_uncommitted: consumer-0"}
    bare = {"format": 1, "scenario_id": "old"}  # a run recorded before clients were
    (tmp_path / "scenario.json").write_text(json.dumps(bare), encoding="utf-8")
    old = read_scenario(tmp_path)
    assert old is not None
    assert (old.clients, old.group_isolation) == ((), None)


@pytest.mark.parametrize(
    ("client", "message"),
    [
        ({"process": "c", "role": "admin", "profile": "p", "settings": {}, "origins": {}}, "ClientInfo.role"),
        ({"process": "c", "role": "member", "profile": "p", "settings": {"a": 1}, "origins": {}}, "origins"),
        (
            {"process": "c", "role": "member", "profile": "p", "settings": {"a": [1]}, "origins": {"a": "x"}},
            "settings",
        ),
        (
            {"process": "c", "role": "member", "profile": "p", "settings": {}, "origins": {}, "colour": 1},
            "colour",
        ),
        ("consumer-0", "clients"),
        (
            {
                "process": "c",
                "role": "member",
                "profile": "p",
                "settings": {},
                "origins": {},
                "flags": [{"key": "a", "asked": 1, "effective": math.inf, "changed_by": "x"}],
            },
            "ConfigFlag.effective",
        ),
    ],
)
def test_a_malformed_client_record_names_the_field(client: object, message: str, tmp_path: Path) -> None:
    (tmp_path / "scenario.json").write_text(
        json.dumps({"scenario_id": "s", "clients": [client]}), encoding="utf-8"
    )
    with pytest.raises(RunFileError, match=message):
        read_scenario(tmp_path)
    with pytest.raises(RunFileError, match=r"GroupIsolation\.level"):
        ScenarioInfo.from_dict({"scenario_id": "s", "group_isolation": {"level": "dirty", "reason": "r"}})


# ---- the report -----------------------------------------------------------------------------------------


def test_the_report_flags_every_setting_not_run_as_asked(tmp_path: Path) -> None:
    write_scenario(tmp_path, recorded())
    html, _ = build_page(tmp_path)
    banner = html[html.index('id="verdict"') : html.index("</section>")]
    assert "did not run with every setting asked for" in banner
    assert 'enable.auto.commit</span>: asked <span class="mono">true</span>, ran with' in banner
    clients = html[html.index('id="clients"') :]
    row = clients[clients.index('<td class="mono">enable.auto.commit</td>') :].split("</tr>")[0]
    assert ">true<" in row
    assert ">false<" in row
    assert "commit strategy commit_after" in row
    assert "not set</span>" in clients
    assert "librdkafka's default" in clients
    assert "&lt;b&gt;profile&lt;/b&gt;" in clients
    assert "<b>profile</b>" not in html
    assert "2 not as asked" in clients
    assert 'read at <span class="mono">read_uncommitted</span>' in clients


def test_the_report_says_when_every_client_ran_as_asked(tmp_path: Path) -> None:
    info = recorded()
    write_scenario(tmp_path, replace(info, clients=(replace(info.clients[0], flags=()),)))
    html, _ = build_page(tmp_path)
    assert "did not run with every setting asked for" not in html
    assert "every client ran with every setting asked for" in html


# ---- finish(): the record and the audit's isolation level -----------------------------------------------


SCENARIO = Scenario(
    scenario_id="effective_configuration",
    case_id="L6",
    title="A variant asks for auto commit",
    source="a hand-written case",
    symptom="the member's strategy turned it off",
    module="scenarios/test_x.py",
    test="test_x",
    variants=(
        Variant(
            "team",
            "auto commit asked",
            "at_least_once",
            "pass",
            client=IDEMPOTENT,
            consumer_config={"enable.auto.commit": True},
        ),
    ),
)


def test_finish_records_the_clients_and_audits_at_the_groups_isolation_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka = KafkaCluster(ImageSet("kafka:x", "toxiproxy:x", "reaper:x", ()))
    kafka.brokers = (SimpleNamespace(node_id=1, bootstrap="127.0.0.1:9091"),)  # type: ignore[assignment]
    asked: dict[str, Any] = {}

    def conclude(*args: Any, **kwargs: Any) -> Any:
        asked.update(kwargs)
        return SimpleNamespace(summary=lambda: "concluded", audit_s=0.5)

    monkeypatch.setattr(runner_module, "drain", lambda *a, **k: [])
    monkeypatch.setattr(runner_module, "conclude", conclude)
    with ScenarioRun(SCENARIO, "team", kafka, tmp_path) as run:
        ThreadMember(run.context, run.member_spec("consumer-0"))  # built, never started
        ThreadMember(
            run.context, run.member_spec("consumer-1", overrides={"isolation.level": "read_committed"})
        )
        run.finish()
    assert asked["options"] == AuditOptions(group_isolation="read_uncommitted")
    info = read_scenario(run.dir)
    assert info is not None
    assert [c.process for c in info.clients] == ["consumer-0", "consumer-1"]
    assert info.clients[0].flags == (
        ConfigFlag("enable.auto.commit", True, False, "commit strategy commit_after"),
    )
    assert info.group_isolation is not None
    assert "mixed group" in info.group_isolation.reason
    assert announced(run.run_id) == ()  # taken by the run
    assert info.timings["audit_s"] == 0.5
    assert 0 <= info.timings["history_s"] < 60


def test_finish_takes_explicit_audit_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kafka = KafkaCluster(ImageSet("kafka:x", "toxiproxy:x", "reaper:x", ()))
    kafka.brokers = (SimpleNamespace(node_id=1, bootstrap="127.0.0.1:9091"),)  # type: ignore[assignment]
    asked: dict[str, Any] = {}
    monkeypatch.setattr(runner_module, "drain", lambda *a, **k: [])
    monkeypatch.setattr(
        runner_module,
        "conclude",
        lambda *a, **k: asked.update(k) or SimpleNamespace(summary=lambda: "", audit_s=0.5),
    )
    explicit = AuditOptions(group_isolation="read_committed", max_examples=3)
    with ScenarioRun(SCENARIO, "team", kafka, tmp_path) as run:
        ThreadMember(run.context, run.member_spec("consumer-0"))
        run.finish(options=explicit)
    assert asked["options"] is explicit
    info = read_scenario(run.dir)
    assert info is not None
    assert info.group_isolation is not None
    assert info.group_isolation.level == "read_committed"  # what the audit took, and what the members did
    assert info.group_isolation.reason.startswith("given to finish(options=...); the members read read_unc")
