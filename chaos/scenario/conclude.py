"""A closed run's conclusion: audit its history (and, with Spark, its topic), judge it against the variant's
guarantee, record the declared symptoms — ``audit.json`` and ``evidence.json`` written — as a
:class:`~chaos.scenario.result.ScenarioResult`; and what its clients really ran with: each client's
effective configuration as ``scenario.json`` records it (:func:`client_records`), and the consumer group's
isolation level the audit takes from it (:func:`group_isolation`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

from chaos.audit.facts import DEFAULT_OPTIONS, AuditOptions
from chaos.audit.logpolicy import TopicRules
from chaos.gate.gatefile import canonical
from chaos.gate.redact import MASK, is_secret, redact
from chaos.history import read_events
from chaos.run.events import Event, Isolation, TopicPolicy
from chaos.run.evidence import EvidenceLog, write_evidence
from chaos.run.manifest import ClientInfo, ConfigFlag, ExpectedSymptom, GroupIsolation, Scalar
from chaos.scenario.model import ScenarioError, Variant
from chaos.scenario.result import ScenarioResult
from chaos.workload import DrainSummary, RunContext
from chaos.workload.clientconf import librdkafka_value
from chaos.workload.effective import ClientConfig

if TYPE_CHECKING:
    from chaos.audit.run import Engine

LIBRDKAFKA_ISOLATION: Final = "read_committed"
"""librdkafka's default ``isolation.level`` (a consumer that does not set it reads committed records)."""


SHORT_RETENTION_MS: Final = 3_600_000
"""A topic that deletes records younger than this is audited from the final drain's reads: read again
through Kafka after the drain, records could have expired in between and look lost (docs/audit.md)."""


def _expires_soon(events: Sequence[Event], topic: str) -> bool:
    """Whether ``topic``'s recorded policy deletes by size, or by time within :data:`SHORT_RETENTION_MS`."""
    policies = [e for e in events if isinstance(e, TopicPolicy) and e.topic == topic]
    if not policies:
        return False
    last = policies[-1]  # the topic's latest recorded policy
    rules = TopicRules(last.cleanup_policy, last.retention_ms, last.retention_bytes, last.delete_retention_ms)
    return rules.deletes and (0 <= last.retention_ms < SHORT_RETENTION_MS or last.retention_bytes >= 0)


def conclude(
    context: RunContext,
    variant: Variant,
    symptoms: Sequence[ExpectedSymptom],
    drained: Sequence[DrainSummary],
    *,
    engine: Engine,
    spark_master: str,
    strict_symptoms: bool,
    options: AuditOptions = DEFAULT_OPTIONS,
    isolations: Sequence[Isolation] = ("read_uncommitted", "read_committed"),
    streams: Mapping[str, str] | None = None,
) -> ScenarioResult:
    """Audit (with ``options``) and judge the run in ``context.run_dir`` (its history closed).

    ``isolations``: the levels the topic's contents are read at — the final drain's (the reference engine
    reads the drain) and Spark's reads of the topic through Kafka alike, so both engines judge the same
    contents (a transactional output read at ``read_committed`` only has no aborted copies).
    ``streams``: producers judged by a guarantee of their own (:attr:`RunWorkers.streams`)."""
    from chaos.audit.run import TopicSource, audit_run

    if context.run_dir is None:
        raise ScenarioError("conclude: the run's context has no run_dir to audit")
    run_dir = context.run_dir
    events = tuple(read_events(run_dir))
    topic = (
        TopicSource(context.bootstrap_servers, (context.topic,), tuple(isolations))
        if engine == "spark" and not _expires_soon(events, context.topic)
        else None
    )
    audit_started = time.monotonic()
    audit = audit_run(
        run_dir,
        guarantee=str(variant.guarantee),
        engine=engine,
        master=spark_master,
        topic=topic,
        options=options,
        streams=streams,
    )
    result = ScenarioResult(
        run_dir=run_dir,
        run_id=context.run_id,
        topic=context.topic,
        audit=audit,
        events=events,
        drained=tuple(drained),
        expected_verdict=variant.expected_verdict,
        checks=EvidenceLog(strict_symptoms),
        audit_s=time.monotonic() - audit_started,
    )
    result.check_declared(symptoms)
    result.record_client_failures()
    write_evidence(run_dir, result.evidence)
    return result


def client_records(clients: Sequence[ClientConfig], variant: Variant) -> tuple[ClientInfo, ...]:
    """Each client's effective configuration as ``scenario.json`` records it: secrets redacted, and a flag
    for every setting the variant asked for (a gate run's variant: the gate file's settings) that the client
    did not run with as asked."""
    records = []
    for client in clients:
        asked = variant.producer_config if client.side == "producer" else variant.consumer_config
        records.append(
            ClientInfo(
                process=client.process,
                role=client.role,
                profile=client.profile,
                settings=redact(client.settings),
                origins=client.origins,
                flags=config_flags(asked or {}, client),
            )
        )
    return tuple(records)


def config_flags(asked: Mapping[str, Scalar], client: ClientConfig) -> tuple[ConfigFlag, ...]:
    """The settings of ``asked`` that ``client`` did not run with as asked: its value and who changed it, or
    ``None`` when its client profile does not set the key at all (librdkafka's default applies). Keys are
    compared by librdkafka's canonical name (``linger.ms`` is ``queue.buffering.max.ms``), values in
    librdkafka's string form. Secret values are masked."""
    names = {canonical(key): key for key in client.settings}
    flags = []
    for key, want in asked.items():
        have = names.get(canonical(key))
        if have is None:
            flag = ConfigFlag(
                key,
                want,
                None,
                f"not set: the worker ran with client profile {client.profile}, which does not set it "
                "(librdkafka's default applies)",
            )
        elif _same(want, client.settings[have]):
            continue
        else:
            flag = ConfigFlag(key, want, client.settings[have], client.origins[have])
        if is_secret(key):
            flag = ConfigFlag(key, MASK, MASK if flag.effective is not None else None, flag.changed_by)
        flags.append(flag)
    return tuple(flags)


def _same(asked: Scalar, effective: Scalar) -> bool:
    if asked is None or effective is None:
        return asked is effective
    want, have = (librdkafka_value(v).strip().lower() for v in (asked, effective))
    if want == have or {want, have} == {"all", "-1"}:  # acks=all is acks=-1
        return True
    try:
        return float(want) == float(have)
    except ValueError:
        return False


def member_levels(clients: Sequence[ClientConfig], group: str) -> dict[str, set[str]]:
    """The effective ``isolation.level`` of each announced member of ``group`` (librdkafka's default where
    unset): level -> the members' process names."""
    levels: dict[str, set[str]] = {}
    for client in clients:
        if client.side == "consumer" and client.settings.get("group.id") == group:
            level = str(client.settings.get("isolation.level", LIBRDKAFKA_ISOLATION)).strip().lower()
            levels.setdefault(level, set()).add(client.process)
    return levels


def group_isolation(clients: Sequence[ClientConfig], group: str) -> GroupIsolation | None:
    """The isolation level the audit takes for the consumer group ``group``, from its members' effective
    ``isolation.level`` (librdkafka's default, read_committed, where a member does not set it):
    read_committed only when every member read committed records. One member reading uncommitted ones
    makes it read_uncommitted: the audit applies one level to every delivery of the group, and a delivery
    of an aborted record to that member is no anomaly — the group's read_committed members then go
    unchecked for ``aborted_read`` (the reason says so). ``None`` when no member of ``group`` was announced
    (no delivery to judge: the audit's default stands)."""
    levels = member_levels(clients, group)
    if not levels:
        return None
    committed = sorted(levels.pop("read_committed", set()))
    uncommitted = sorted(p for names in levels.values() for p in names)
    if not uncommitted:
        return GroupIsolation(
            "read_committed", f"every member read committed records: {', '.join(committed)}"
        )
    reason = f"read_uncommitted: {', '.join(uncommitted)}"
    if committed:
        reason += (
            f"; read_committed: {', '.join(committed)} — a mixed group: a delivery of an aborted record is "
            "not counted as aborted_read for any member (the audit takes one level for the group)"
        )
    return GroupIsolation("read_uncommitted", reason)


def audit_options(isolation: GroupIsolation | None) -> AuditOptions:
    """The audit's options for a run whose group read at ``isolation`` (the default without one)."""
    if isolation is None:
        return DEFAULT_OPTIONS
    level: Isolation = "read_committed" if isolation.level == "read_committed" else "read_uncommitted"
    return AuditOptions(group_isolation=level)


def given_isolation(options: AuditOptions, members: GroupIsolation | None) -> GroupIsolation:
    """What ``scenario.json`` records when the run's ``finish()`` was given the audit's ``options``: their
    level, and the members' own when known."""
    reason = "given to finish(options=...)"
    if members is not None:
        reason += f"; the members read {members.level} ({members.reason})"
    return GroupIsolation(options.group_isolation, reason)
