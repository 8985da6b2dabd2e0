"""The team's configuration as a variant of a catalog case, and what of it the run's clients do not get."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from chaos.gate.cases import TRAFFIC_NOT_APPLICABLE
from chaos.gate.gatefile import LOG_POLICY_KEYS, ClientSettings, GateFile, canonical, flag, is_secret
from chaos.scenario.model import Scenario, Setting, Variant

if TYPE_CHECKING:
    from chaos.audit.facts import Removal
    from chaos.workload.consumer import CommitStrategy

GATE_ID: Final = "gate"
"""The pytest parameter id of the gate variant (``test_pb1[gate]``)."""
GATE_PROFILE: Final = "gate"
TIMELINE: Final = "remediated"
CALIBRATION: Final = ("vulnerable", "remediated")

NOT_PASSED: Final[Mapping[str, str]] = MappingProxyType(
    {
        "transactional.id": "the workload runs its own transactions where a case needs them",
        "client.id": "the workload names each client",
        "group.id": "the run's group is the run's own",
        "group.instance.id": "one static id shared by every member of the run would fence them",
        "security.protocol": "the gate's cluster is plaintext",
    }
)
"""Settings of the team's clients the gate reads (the lint judges them) but does not hand to the run's
clients, and why. Also every ``sasl.*`` and ``ssl.*`` setting (the gate's cluster has no security) and
any secret: no secret ever reaches a run's ``scenario.json``."""


def not_passed(key: str) -> str | None:
    """Why the gate does not pass setting ``key`` to the run's clients, or ``None`` when it does."""
    name = canonical(key)
    if name in NOT_PASSED:
        return NOT_PASSED[name]
    if name.startswith(("sasl.", "ssl.")) or is_secret(name):
        return "the gate's cluster is plaintext, without credentials"
    return None


def is_timing(key: str) -> bool:
    """A client timing setting (``*.ms``): the case's value is kept where the team gives none."""
    return canonical(key).endswith(".ms")


def _client_config(
    case: Mapping[str, Setting] | None, team: ClientSettings | None
) -> tuple[dict[str, Setting], tuple[str, ...]]:
    """The team's settings (those the run can use) over the case's timing settings; notes on the rest."""
    given = team.as_dict() if team is not None else {}
    names = {canonical(k) for k in given}
    config: dict[str, Setting] = {
        k: v for k, v in (case or {}).items() if is_timing(k) and canonical(k) not in names
    }
    notes: list[str] = []
    for key, value in given.items():
        why = not_passed(key)
        if why is None:
            config[key] = value
        else:
            notes.append(f"{key} not passed to the run's clients: {why}")
    return config, tuple(notes)


def poll_interval_at_least_session(consumer: dict[str, Setting], team: Mapping[str, object]) -> None:
    """librdkafka refuses a ``max.poll.interval.ms`` below ``session.timeout.ms``. Where the team's session
    timeout exceeds a case's own poll interval (a case's timing setting the team did not give), the interval
    is raised to the session: the case keeps its timeline, and the group detects a silent member as slowly
    as the team's service would."""
    keys = {canonical(k): k for k in consumer}
    interval, session = keys.get("max.poll.interval.ms"), keys.get("session.timeout.ms")
    if interval is None or session is None or "max.poll.interval.ms" in {canonical(k) for k in team}:
        return  # the team's own pair is theirs to fix (librdkafka says so when the client is built)
    if int(str(consumer[interval])) < int(str(consumer[session])):
        consumer[interval] = consumer[session]


def timeline_of(scenario: Scenario, gate: GateFile) -> str:
    """The built-in variant whose timeline the gate replays: the case's ``remediated`` one; O6's
    ``vulnerable`` (the at-least-once transform) for a configuration without a ``transactional.id``, whose
    transform cannot run the transactional timeline."""
    if scenario.case_id == "O6" and not gate.transactional:
        return "vulnerable"
    return TIMELINE


def gate_variant(scenario: Scenario, gate: GateFile, timeline: str | None = None) -> Variant:
    """The team's configuration as a variant of ``scenario`` (see the module docstring). Raises
    :class:`~chaos.scenario.model.ScenarioError` when the case has no such timeline."""
    base = scenario.variant(timeline or timeline_of(scenario, gate))
    producer, _ = _client_config(base.producer_config, gate.producer)
    team_consumer = gate.consumer.settings if gate.consumer else None
    consumer, _ = _client_config(base.consumer_config, team_consumer)
    poll_interval_at_least_session(consumer, team_consumer.as_dict() if team_consumer is not None else {})
    idempotent = str(producer.get("enable.idempotence", "")).lower() in ("true", "t", "1")
    if gate.transactional and not idempotent:
        producer["enable.idempotence"] = "true"  # implied by the transactional.id the run does not use
        idempotent = True
    topic: dict[str, Setting] = {
        "min.insync.replicas": int(gate.topic_setting("min.insync.replicas").value),
        "unclean.leader.election.enable": gate.topic_setting("unclean.leader.election.enable").value
        == "true",
    }
    for key in LOG_POLICY_KEYS:  # the broker's defaults where the file gives none
        if gate.topic_given(key):
            value = gate.topic_setting(key).value
            topic[key] = value if key == "cleanup.policy" else int(value)
    source = gate.path.name if gate.path is not None else "the gate file"
    return Variant(
        base.name,
        f"gate: the team's configuration ({source}) on the case's {base.name} timeline",
        guarantee=gate.guarantee,
        expected_verdict="pass",
        client_profile=GATE_PROFILE,
        producer_config=producer,
        consumer_config=consumer,
        topic_config=topic,
        client_guarantee="idempotent" if idempotent else "at_least_once",
    )


def config_notes(gate: GateFile) -> tuple[str, ...]:
    """What of the team's client settings the run's clients do not get, and why (shown once per run)."""
    _, producer = _client_config(None, gate.producer)
    _, consumer = _client_config(None, gate.consumer.settings if gate.consumer else None)
    return (*(f"producer {n}" for n in producer), *(f"consumer {n}" for n in consumer))


def traffic_not_applicable(case: str, client_library: str = "librdkafka") -> str | None:
    """Why ``case``'s run does not take the gate file's ``[traffic]`` (``None``: it does)."""
    if client_library == "java":
        return "the Java client's producer takes a key count only, no traffic shape"
    return TRAFFIC_NOT_APPLICABLE.get(case)


def commit_strategy(gate: GateFile, client_library: str = "librdkafka") -> CommitStrategy | None:
    """How the application commits (the gate's ``[consumer] commit`` and its auto-commit settings), as the
    strategy every member of a case takes (:attr:`chaos.scenario.workers.RunWorkers.commit`); ``None``
    for ``transaction`` (a transform's members keep the case's) or without a ``[consumer]``."""
    if gate.consumer is None:
        return None
    settings = gate.consumer.settings
    auto_commit = flag(settings.get("enable.auto.commit"), True)
    auto_store = flag(settings.get("enable.auto.offset.store"), True)
    commit = gate.consumer.commit.value
    strategy: CommitStrategy | None
    if commit == "auto":  # the gate file holds it to auto commit with the automatic offset store
        strategy = "auto"
    elif commit == "after_processing":
        strategy = "store_after" if auto_commit and not auto_store else "commit_after"
    elif commit == "before_processing":
        strategy = "commit_before"
    else:
        strategy = None
    if strategy == "store_after" and client_library == "java":
        strategy = "commit_after"  # the Java client keeps no offset store: a commit after processing
    return strategy


def removal_notes(removals: Sequence[Removal], topic: str | None) -> tuple[str, ...]:
    """What the topic's log policy removed in a run, in words: ``compacted 340 (cleanup.policy=compact):
    superseded by a later value of their key, by design``; ``expired_unread 57 of expired 120
    (retention.ms=5000): removed by retention before the group read them``."""
    mine = [r for r in removals if r.topic == topic] or list(removals)
    notes: list[str] = []
    compacted = sum(r.compacted for r in mine)
    expired = sum(r.expired for r in mine)
    unread = sum(r.expired_unread for r in mine)
    policy = next((r for r in mine), None)
    if compacted and policy is not None:
        notes.append(
            f"compacted {compacted} (cleanup.policy={policy.cleanup_policy}): values superseded by a later "
            "value of their key, removed by the cleaner as compaction promises — not lost"
        )
    if expired and policy is not None:
        what = f"expired {expired}" + (f", {unread} of them unread by the group" if unread else "")
        retention = f"retention.ms={policy.retention_ms}"
        if policy.retention_bytes is not None and policy.retention_bytes >= 0:
            retention += f", retention.bytes={policy.retention_bytes}"
        deleted = any(r.deleted_to is not None for r in mine)
        cause = "retention or DeleteRecords" if deleted else "retention"
        notes.append(
            f"{what} ({retention}, cleanup.policy={policy.cleanup_policy}): removed by {cause}"
            + (" before the group read them: retention shorter than the group's outage" if unread else "")
        )
    return tuple(notes)


def gate_scenario(scenario: Scenario, variant: Variant) -> Scenario:
    """``scenario`` with ``variant`` as its only variant and no defaults of its own (the variant is
    complete): what a :class:`~chaos.scenario.runner.ScenarioRun` of the gate variant is opened on."""
    return replace(
        scenario,
        variants=(variant,),
        guarantee=None,
        expected_verdict=None,
        client=None,
        client_profile=None,
        client_guarantee=None,
        producer_config={},
        consumer_config={},
        topic_config={},
    )
