"""librdkafka's check of a client configuration: a typo fails when a scenario is defined or a client's
configuration is built, named, instead of as a timeout once the run is under way."""

from __future__ import annotations

from typing import Any

import pytest

import chaos.workload.clientconf as clientconf
from chaos.scenario import Scenario, Variant
from chaos.scenario.model import ScenarioDefinitionError
from chaos.workload import CI, FAITHFUL, IDEMPOTENT, RunContext, consumer_config, custom_profile
from chaos.workload.clientconf import (
    ClientConfigError,
    check_client_config,
    client_config_problems,
    librdkafka_refusal,
    refusals,
)
from chaos.workload.consumer import MemberSpec, ProcessMember, ThreadMember
from chaos.workload.producer import ProducerSpec, ProducerWorker

CONTEXT = RunContext(
    run_id="r",
    bootstrap_servers="127.0.0.1:9092",
    topic="t",
    group="g",
    client=IDEMPOTENT,
    sink=lambda e: None,
)


def scenario(**variant: Any) -> Scenario:
    return Scenario(
        scenario_id="xx_typo_case",
        case_id="PB1",
        title="a typo",
        source="here",
        symptom="a timeout",
        guarantee="at_least_once",
        expected_verdict="pass",
        client=IDEMPOTENT,
        variants=(Variant("remediated", "fine"), Variant("vulnerable", "the typo", **variant)),
    )


# --- the check itself --------------------------------------------------------------------------------------


def test_librdkafka_refusal_quotes_librdkafka() -> None:
    assert librdkafka_refusal("producer", {"acks": "all", "linger.ms": 5}) is None
    assert librdkafka_refusal("producer", {"acsk": "all"}) == 'No such configuration property: "acsk"'
    assert librdkafka_refusal("consumer", {"isolation.level": "sometimes"}) is not None


def test_each_bad_key_is_named_with_a_suggestion() -> None:
    problems = client_config_problems("producer", {"acsk": "all", "linger.ms": "soon", "retries": 3})
    assert len(problems) == 2
    assert problems[0].startswith("producer setting acsk: librdkafka: No such configuration property")
    assert "did you mean 'acks'?" in problems[0]
    # librdkafka names linger.ms by its alias; the problem names the user's key
    assert problems[1].startswith("producer setting linger.ms: librdkafka: Invalid value")


def test_a_problem_never_shows_the_value_it_may_be_a_secret() -> None:
    (problem,) = client_config_problems("producer", {"sasl.pasword": "hunter2"})
    assert "sasl.pasword" in problem
    assert "did you mean 'sasl.password'?" in problem
    assert "hunter2" not in problem


def test_a_key_of_the_other_side_is_a_problem_named_as_written() -> None:
    (problem,) = client_config_problems("consumer", {"enable.auto.commit": False, "acks": "all"})
    assert problem.startswith(
        "consumer setting acks: librdkafka: Configuration property request.required.acks"
    )
    assert "move it to the producer's settings" in problem


def test_a_combination_is_not_pinned_on_one_key() -> None:
    # max.poll.interval.ms is refused alone (below librdkafka's default session timeout), fine with this one
    fine = {"max.poll.interval.ms": 10_000, "session.timeout.ms": 9_000}
    assert client_config_problems("consumer", fine) == []
    found = refusals("consumer", {**fine, "enable.auto.comit": False, "session.timeout.ms": 45_000})
    assert list(found.keys) == ["enable.auto.comit"]
    assert found.combination is not None
    assert "max.poll.interval.ms" in found.combination
    assert client_config_problems("consumer", {"max.poll.interval.ms": 10_000}, combinations=False) == []


def test_check_client_config_raises_a_config_error_naming_the_owner() -> None:
    check_client_config("producer", {"enable.idempotence": True}, "mine")
    with pytest.raises(ClientConfigError, match=r"^mine: producer setting acsk: ") as caught:
        check_client_config("producer", {"acsk": 1}, "mine")
    assert isinstance(caught.value, ValueError)  # a ConfigError: bad input, exit 2


# --- a scenario's variant ----------------------------------------------------------------------------------


def test_a_producer_typo_fails_the_scenario_definition_naming_it() -> None:
    with pytest.raises(ScenarioDefinitionError) as caught:
        scenario(producer_config={"acsk": "all"})
    text = str(caught.value)
    assert text.startswith(
        "Scenario xx_typo_case, variant vulnerable: producer_config: producer setting acsk: "
    )
    assert 'No such configuration property: "acsk"' in text
    assert "did you mean 'acks'?" in text


def test_a_consumer_typo_fails_the_scenario_definition_naming_it() -> None:
    with pytest.raises(
        ScenarioDefinitionError, match=r"variant vulnerable: consumer_config: .*enable\.auto\.comit"
    ):
        scenario(consumer_config={"enable.auto.comit": False})


def test_a_typo_in_the_scenarios_defaults_names_the_first_variant() -> None:
    with pytest.raises(ScenarioDefinitionError, match=r"variant remediated: producer_config: .*linger\.sm"):
        Scenario(
            scenario_id="xx_typo_case",
            case_id="PB1",
            title="t",
            source="s",
            symptom="s",
            guarantee="at_least_once",
            expected_verdict="pass",
            producer_config={"linger.sm": 5},
            variants=(Variant("remediated", "fine"),),
        )


def test_a_correct_configuration_passes_and_keeps_its_values() -> None:
    built = scenario(
        producer_config={"acks": "all", "enable.idempotence": True, "linger.ms": 5},
        consumer_config={"enable.auto.commit": False, "max.poll.interval.ms": 20_000},
    )
    variant = built.variant("vulnerable")
    assert variant.producer_config is not None
    assert variant.producer_config["linger.ms"] == 5
    # refused with librdkafka's default session timeout only: left to the run, which knows its timeouts
    assert variant.consumer_config is not None
    assert variant.consumer_config["max.poll.interval.ms"] == 20_000


def test_every_catalog_scenario_passes() -> None:
    from chaos.scenario import discover

    assert len(discover()) >= 15


# --- configurations the run builds -------------------------------------------------------------------------


def test_the_run_refuses_a_combination_with_its_own_timeouts() -> None:
    client = custom_profile("slow", "at_least_once", {}, {"max.poll.interval.ms": 20_000})
    assert consumer_config(client, "127.0.0.1:9092", "c", "g", CI)["max.poll.interval.ms"] == 20_000
    with pytest.raises(ClientConfigError, match=r"consumer c \(client profile slow\): .*max\.poll\.interval"):
        consumer_config(client, "127.0.0.1:9092", "c", "g", FAITHFUL)  # session.timeout.ms 45 s


def test_an_ad_hoc_producer_typo_fails_before_the_producer_starts() -> None:
    spec = ProducerSpec(name="producer-9", overrides=(("acsk", "all"),))
    with pytest.raises(ClientConfigError, match=r"producer producer-9 .*acsk.*did you mean 'acks'"):
        ProducerWorker(CONTEXT, spec)


@pytest.mark.parametrize("runner", [ThreadMember, ProcessMember])
def test_an_ad_hoc_member_typo_fails_before_the_member_starts(runner: type) -> None:
    spec = MemberSpec(name="consumer-9", overrides=(("isolation.levle", "read_committed"),))
    with pytest.raises(ClientConfigError, match=r"consumer consumer-9 .*isolation\.levle"):
        runner(CONTEXT, spec)


def test_the_lints_derive_builds_no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from chaos.gate.gatefile import ClientSettings, GateFile, Origin, Setting
    from chaos.gate.lint import check_clients, derive

    where = Origin("t.toml", 1)
    gate = GateFile(
        guarantee="at_least_once",
        producer=ClientSettings.from_mapping("producer", {"enable.idempotence": True}, where),
        consumer=None,
        topic=(Setting("replication_factor", "3", where), Setting("min.insync.replicas", "2", where)),
    )
    built: list[dict[str, Any]] = []
    real = clientconf.construct

    def counting(side: clientconf.Side, conf: dict[str, Any]) -> tuple[str | None, list[str]]:
        built.append(conf)
        return real(side, conf)

    monkeypatch.setattr(clientconf, "construct", counting)
    derive(gate)
    assert built == []
    check_clients(gate)  # the lint's librdkafka check goes through the same function
    assert built == [{"enable.idempotence": "true"}]
