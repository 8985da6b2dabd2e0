"""The page's story ("What happened", "What to change"): every number, partition, offset and time it names is
one of the facts it was given, in at most five sentences; a passing run is one sentence with its worst
availability figure; an inconclusive one names the precondition that did not hold."""

from __future__ import annotations

import re
from dataclasses import replace

from chaos.audit.facts import (
    ANOMALIES,
    AnomalyReport,
    AuditFacts,
    Availability,
    ConsumeGap,
    Consumption,
    Example,
    PartitionRange,
    Removal,
    Totals,
)
from chaos.audit.verdict import AuditResult, judge
from chaos.report.attribution import attribute, describe_event, group_examples
from chaos.report.explain import ANOMALY_HINTS
from chaos.report.story import StoryFacts, tell
from chaos.report.symptoms import LogLine
from chaos.report.timeline import FaultSpan
from chaos.run.evidence import Check
from tests.story_check import contradictions

T0 = 1_800_000_000.0
MONO0 = 500.0
TOPIC = "t-isr2"
LOST = range(44, 105)  # 61 acknowledged offsets only the old leader had


def _span(fault: str, target: str, start: float, end: float | None) -> FaultSpan:
    return FaultSpan(
        fault,
        target,
        T0 + start,
        None if end is None else T0 + end,
        MONO0 + start,
        None if end is None else MONO0 + end,
        "{}",
    )


SPANS = (_span("replication_cut", "broker-1", 10.0, 30.0), _span("crash", "broker-2", 23.5, 31.0))
LINES = (
    LogLine(
        "broker-2.log.gz",
        10,
        T0 + 17.0,
        f"[Partition {TOPIC}-0 broker=2] Shrinking ISR from 2,1 to 2. Leader: (highWatermark: 44, "
        "endOffset: 50). Out of sync replicas: (brokerId: 1, endOffset: 44).",
    ),
    LogLine(
        "broker-1.log.gz",
        20,
        T0 + 30.2,
        f"[Broker id=1] Leader {TOPIC}-0 with topic id Some(x) starts at leader epoch 1 from offset 39 with "
        "partition epoch 3, high watermark 39, ISR [1], adding replicas [] and removing replicas [] .",
    ),
)


def _judge(facts: AuditFacts) -> AuditResult:
    return judge(facts, "at_least_once", "reference")


def _lost(count: int, kept: range) -> AuditResult:
    examples = tuple(
        Example(f"r:p:{o}", TOPIC, 0, o, T0 + 20.0 + (o - 44) * 0.05) for o in kept
    )  # acked from t+20.0 to t+23.0 s
    reports = {name: AnomalyReport(0) for name in ANOMALIES}
    reports["lost_acked"] = AnomalyReport(count, examples)
    facts = AuditFacts(
        "r",
        tuple((n, reports[n]) for n in ANOMALIES),
        Availability(6.5, MONO0 + 24.0, MONO0 + 30.5),
        Totals(3000, 2900, 0, 100, 2839, 2839),
    )
    return _judge(facts)


TWO_PARTITIONS = (
    PartitionRange(TOPIC, 0, 58, 44, 101, T0 + 20.0, T0 + 22.9),
    PartitionRange(TOPIC, 2, 3, 7, 9, T0 + 21.0, T0 + 22.0),
)


def _ranged(audit: AuditResult, ranges: tuple[PartitionRange, ...], count: int | None = None) -> AuditResult:
    """``audit`` whose lost_acked report has these per-partition ranges (and ``count``)."""
    anomalies = tuple(
        (n, replace(r, ranges=ranges, count=r.count if count is None else count) if n == "lost_acked" else r)
        for n, r in audit.facts.anomalies
    )
    return replace(audit, facts=replace(audit.facts, anomalies=anomalies))


def _facts(audit: AuditResult, **more: object) -> StoryFacts:
    report = audit.facts.anomaly("lost_acked")
    pairs = [(e, attribute(e, SPANS, LINES)) for e in report.examples]
    base = StoryFacts(
        verdict=audit.verdict,
        guarantee=audit.guarantee,
        audit=audit,
        groups={"lost_acked": group_examples(pairs)},
        spans=SPANS,
        t0=T0,
        mono0=MONO0,
        remediation=("Keep unclean.leader.election.enable=false.",),
    )
    return replace(base, **more)  # type: ignore[arg-type]


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:\.\d+)?", text))


def test_a_loss_is_told_with_its_count_partition_offsets_times_faults_and_broker_events() -> None:
    audit = _lost(61, LOST)
    story = tell(_facts(audit))
    said = " ".join(story.what_happened)
    assert 1 <= len(story.what_happened) <= 5
    assert all(s.endswith(".") for s in story.what_happened)
    first, where, faults, events, promise = story.what_happened
    assert first == "The audit found 61 acknowledged writes lost (lost_acked), which at_least_once forbids."
    assert where == f"All 61 are on {TOPIC}-0, offsets 44–104, acknowledged t+20.0–23.0 s."
    assert "during replication_cut broker-1 (t+10.0–30.0 s)" in faults
    assert "0.5–3.5 s before crash broker-2 (t+23.5–31.0 s) began" in faults
    assert "broker 2 shrank the ISR from [2,1] to [2] (high watermark 44, log end 50) at t+17.0 s" in events
    assert "broker 1 became leader at epoch 1 from offset 39 (ISR [1]) at t+30.2 s" in events
    assert promise.startswith("The claimed guarantee, at_least_once, promised that every acknowledged write")
    # every partition it names is the examples' one; every number is a fact it was given
    assert set(re.findall(rf"{TOPIC}-\d+", said)) == {f"{TOPIC}-0"}
    given = {"61", "44", "104", "20.0", "23.0", "10.0", "30.0", "0.5", "3.5", "23.5", "31.0", "2", "1", "50"}
    given |= {"17.0", "39", "30.2", "0"}
    assert _numbers(said) <= given, _numbers(said) - given
    assert story.what_to_change == (
        "Keep unclean.leader.election.enable=false.",
        ANOMALY_HINTS["lost_acked"],
    )


def test_when_the_audit_kept_fewer_examples_the_story_says_they_are_examples() -> None:
    story = tell(_facts(_lost(61, range(44, 54))))
    assert story.what_happened[1] == (
        f"The 10 the audit kept as examples (of 61) are on {TOPIC}-0, offsets 44–53, "
        "acknowledged t+20.0–20.5 s."
    )


def test_with_the_audits_ranges_the_story_names_where_every_instance_is() -> None:
    """The audit's per-partition ranges cover every instance, not the 10 it kept: the sentence says all 61
    and their whole offset and time range (busiest partition first)."""
    audit = _ranged(_lost(61, range(44, 54)), TWO_PARTITIONS)
    assert tell(_facts(audit)).what_happened[1] == (
        f"They are on {TOPIC}-0 (58, offsets 44–101, acknowledged t+20.0–22.9 s) and {TOPIC}-2 (3, "
        "offsets 7–9, acknowledged t+21.0–22.0 s)."
    )
    one = _ranged(audit, TWO_PARTITIONS[:1], count=58)
    assert tell(_facts(one)).what_happened[1] == (
        f"All 58 are on {TOPIC}-0, offsets 44–101, acknowledged t+20.0–22.9 s."
    )


def test_losses_on_several_partitions_name_each_with_its_count() -> None:
    audit = _lost(4, range(44, 46))
    other = (Example("r:p:x", TOPIC, 2, 7, T0 + 21.0), Example("r:p:y", TOPIC, 2, 9, T0 + 22.0))
    report = audit.facts.anomaly("lost_acked")
    anomalies = tuple(
        (n, replace(r, examples=r.examples + other) if n == "lost_acked" else r)
        for n, r in audit.facts.anomalies
    )
    audit = replace(audit, facts=replace(audit.facts, anomalies=anomalies))
    assert len(report.examples) == 2
    where = tell(_facts(audit)).what_happened[1]
    assert where == (
        f"They are on {TOPIC}-0 (2, offsets 44–45, acknowledged t+20.0 s) and {TOPIC}-2 (2, "
        "offsets 7–9, acknowledged t+21.0–22.0 s)."
    )


def test_removals_by_the_log_policy_are_mentioned_as_not_loss() -> None:
    audit = _lost(61, LOST)
    removal = Removal(TOPIC, 1, "delete", 2000, -1, 86_400_000, 40, None, 40, 0, 0)
    facts = replace(audit.facts, totals=replace(audit.facts.totals, expired=40), removals=(removal,))
    story = tell(_facts(replace(audit, facts=facts)))
    assert len(story.what_happened) == 5
    assert story.what_happened[-1].endswith(
        f"separately, the topics' log policy removed 40 records on purpose, which is not loss (40 expired, "
        f"0 compacted: {TOPIC}-1 under retention.ms=2000)."
    )
    cleaned = Removal(TOPIC, 2, "compact", 604_800_000, -1, 86_400_000, 0, None, 0, 12, 0)
    facts = replace(facts, totals=replace(facts.totals, compacted=12), removals=(removal, cleaned))
    assert (
        tell(_facts(replace(audit, facts=facts)))
        .what_happened[-1]
        .endswith(
            f"(40 expired, 12 compacted: {TOPIC}-1 under retention.ms=2000, {TOPIC}-2 under "
            "cleanup.policy=compact)."
        )
    )


def test_a_passing_run_is_one_sentence_with_its_worst_availability_figure() -> None:
    audit = _lost(0, range(0))
    assert audit.verdict == "pass"
    story = tell(_facts(audit))
    assert story.what_happened == (
        "Passed: nothing at_least_once forbids happened to the 2,900 acknowledged writes; the worst "
        "availability figure is 6.5 s without an acknowledgement (t+24.0–30.5 s, during replication_cut "
        "broker-1, crash broker-2).",
    )
    assert story.what_to_change == ()


def test_a_services_input_stall_longer_than_any_other_figure_is_the_worst() -> None:
    """A service's input partition waited longer than the producer did and than any output partition: the
    passing run's sentence names it, and the story check holds it to the audit."""
    base = _lost(0, range(0))
    consumer = Consumption(
        gaps=(ConsumeGap("out", 0, 2.0, MONO0 + 1.0, MONO0 + 3.0, True),),
        service_gaps=(ConsumeGap("in", 1, 7.25, MONO0 + 5.0, MONO0 + 12.25, True),),
    )
    audit = replace(
        base,
        facts=replace(base.facts, availability=replace(base.facts.availability, consumer=consumer)),
    )
    told = list(tell(_facts(audit)).what_happened)
    assert told == [
        "Passed: nothing at_least_once forbids happened to the 2,900 acknowledged writes; the worst "
        "availability figure is a stall of the service's input of 7.2 s on in-1 (t+5.0–12.2 s, during "
        "replication_cut broker-1).",
    ]
    assert contradictions(told, audit) == []
    assert contradictions([told[0].replace("on in-1", "on in-0")], audit) == [
        "says a stall of the service's input of 7.2 s on in-0, the audit 7.2 s on in-1"
    ]
    as_consume_stall = told[0].replace("a stall of the service's input of", "a consume stall of")
    assert contradictions([as_consume_stall], audit) == [
        "says a consume stall of 7.2 s on in-1, the audit 2.0 s on out-0"
    ]


def test_an_inconclusive_run_names_the_precondition_that_did_not_hold() -> None:
    audit = _lost(0, range(0))
    unmet = Check("precondition", "follower 1 leaves the ISR", False, "the ISR stayed [2, 1]")
    story = tell(_facts(audit, verdict="unknown", checks=(Check("symptom", "x", True), unmet)))
    assert story.what_happened == (
        "Inconclusive: the case did not happen as planned — “follower 1 leaves the ISR” did not hold "
        "(the ISR stayed [2, 1]), so the audit's verdict (pass) does not count.",
    )
    no_audit = tell(StoryFacts(verdict="unknown"))
    assert "no audit result" in no_audit.what_happened[0]


def test_broker_lines_are_said_in_words() -> None:
    def said(*text: str, file: str = "broker-3.log.gz") -> str:
        return describe_event(LogLine(file, 1, T0, "".join(text)))

    unclean = said("[QuorumController id=1] UNCLEAN partition change for t-1 with topic ID x: ",
                   "isr: [2] -> [3], leader: 2 -> 3")  # fmt: skip
    assert unclean == "the controller elected broker 3 leader uncleanly (the previous leader: 2)"
    truncated = said("[ReplicaFetcher replicaId=2, leaderId=3] Truncating partition t-1 with ",
                     "TruncationState(offset=35, completed=true) due to leader epoch")  # fmt: skip
    assert truncated == "broker 2 truncated its log to offset 35"
    assert said("[UnifiedLog partition=t-1] Truncating to 35 ") == "broker 3 truncated its log to offset 35"
    follower = said("[Broker id=2] Follower t-0 starts at leader epoch 1 from offset 39 with ",
                    "partition epoch 1 and high watermark 0. Current leader is 1.")  # fmt: skip
    assert follower == "broker 2 followed broker 1 at epoch 1 from offset 39"


def test_the_story_check_finds_nothing_in_a_told_story_and_each_contradiction_in_a_changed_one() -> None:
    """tests/story_check.py, the check a real report tree is held to: every count, partition and offset
    range "What happened" names is the audit's."""
    audit = _ranged(_lost(61, range(44, 54)), TWO_PARTITIONS)
    told = list(tell(_facts(audit)).what_happened)
    assert contradictions(told, audit) == []
    single = _ranged(_lost(61, LOST), (PartitionRange(TOPIC, 0, 61, 44, 104, T0, T0),))
    assert contradictions(list(tell(_facts(single)).what_happened), single) == []
    changed = [told[0].replace("61", "60"), told[1].replace("(3, offsets 7–9", "(4, offsets 7–8")]
    found = contradictions(changed, audit)
    assert found == [
        "lost_acked: says 60, the audit 61",
        f"{TOPIC}-2: says 4, the audit 3",
        f"{TOPIC}-2: offsets (7, 8), the audit (7, 9)",
    ], found
