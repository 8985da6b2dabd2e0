"""MD3 `md_fast_client_restart_metadata_timeout` — a client restarted inside its old member's session.

docs/catalog.md 1C MD3 (seed 002 › 场景5: "跟前面类似，只不过这次是kafka客户端启停太快"). Broker 2's network
was
cut; the client was stopped at ~17:13:51 and started again ~26 s later, inside the old member's session. The
coordinator removed the old member only on heartbeat expiration ("Member consumer-2-… has failed, removing
it from the group … reason: removing member … on heartbeat expiration") — so the old client had not left
the group — and the restarted Java client failed exactly 60 s after its start with ``TimeoutException:
Timeout expired while fetching topic metadata``. The seed's reading: the start coincided with the
coordinator removing the previous member, so reading offsets timed out.

What librdkafka does (measured; the test records it as evidence, as PB1 does):

- the restarted client's start-up reads do **not** time out: a fresh client connects to every bootstrap
  broker and uses the first that answers, so the cut broker does not hold up ``list_topics(topic)`` (Java's
  metadata fetch) nor ``committed()`` (the group's offsets, from the coordinator, a healthy broker); both
  answer within a fraction of the seed's ``default.api.timeout.ms`` (T = 12 s ``ci``, 60 s faithful) and
  return the offsets the old member committed;
- what the fast restart *does* cost is the **group join**: the new member's JoinGroup puts the group into
  a rebalance that waits for every known member, and the old member — dead without a LeaveGroup — is only
  removed when its session expires (``session.timeout.ms``, 9 s ``ci``). The restarted member receives its
  assignment no earlier than the old member's last heartbeat + the session timeout; librdkafka retries the
  join by itself, no error reaches the application. With a Java client that wait overlapped the 60 s
  metadata deadline; with librdkafka it is a start-up delay, not an exception.

Timeline (every variant): topic of 3 partitions, RF 3, ``min.insync.replicas=2``; 60 records produced
(acks=all); member ``consumer-0`` (a child process, commit after processing) consumes and commits them all;
network cut of broker B (not the active controller, not the group's coordinator — the seed's coordinator
was on a surviving broker); the old client disappears; the client restarts: a fresh consumer reads the
topic metadata and the group's committed offsets (``startup_probe``: ``probe_call`` ``metadata`` and
``committed``, timeout T), then ``consumer-0`` starts again (a new member id) and 30 more records are
produced; wait until the restarted member delivered them; heal; drain; audit (reference).

The coordinator's own log lines (captured into the run's ``logs/``) are the evidence for the group side:
"Dynamic member … joins group … in Stable|Empty state", "Member <id> in group <g> has failed, removing it
from the group" (the seed's line, word for word), "has left group through explicit `LeaveGroup`".

- ``vulnerable`` — the seed's stop: the old client is SIGKILLed (no close, no LeaveGroup) and restarted at
  once, inside its session. Expected: probes succeed in < T / 2; the new member joins the group "in Stable
  state" (the old member still in it); the coordinator logs "Member <old> … has failed, removing it from
  the group" 0.5–1 × session (+1 s) after the kill; the new member's assignment comes after that line
  (≤ 3 s later) with generation old + 1 — the join waited for the old member's session to expire.
- ``remediated`` — the seed's lesson 3 ("启停kafka客户端操作时也不要动作太快"): same kill, but the client is
  restarted only once the coordinator reports the group without members (its session expired). Expected:
  probes succeed; the expiry line precedes the restart; the new member joins "in Empty state", generation
  old + 2 (one for the emptying, one for the join), assigned in less than a session.
- ``graceful`` — the old client is closed properly (``close()``: LeaveGroup) and restarted at once.
  Expected: probes succeed; "has left group through explicit `LeaveGroup`", no expiry line; the new member
  joins "in Empty state", generation old + 2, assigned in less than a session — the fast restart alone is
  harmless.

Verdicts: an idempotent producer (acks=all); the group commits after processing; the old member committed
everything before it died; every variant audits ``pass`` (idempotent: no loss, no duplicate). The producer
is idempotent because the 30 records produced right after the cut wait, on partitions where B is an in-sync
follower, for the ISR shrink (``replica.lag.time.max.ms``, 6 s ``ci``), which can come after the producer's
``request.timeout.ms`` (6 s ``ci``): a non-idempotent producer then retries and duplicates — measured once
in three runs with the ``at_least_once`` profile (24 of 30 records written twice, D1's mechanism), a side
effect unrelated to MD3.

What the test checks: the audit, and the restarted member's assignment delay — the availability figure —
which in ``remediated`` and ``graceful`` must stay under a session. The probes' results, the coordinator's
log lines, the generations and the expiry timing are recorded as evidence (symptoms); the timeline's order
(cut, then stop, then restart — in ``vulnerable`` inside the old member's session) is the case's
precondition.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from chaos.cluster.logs import log_files, read_log_lines
from chaos.faults.network import NetworkCut
from chaos.history import Commit, Event
from chaos.scenario import ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import IDEMPOTENT

RECORDS = 60
MORE = 30

SCENARIO = Scenario(
    scenario_id="md_fast_client_restart_metadata_timeout",
    case_id="MD3",
    title="Fast client restart inside the old member's session while a broker is cut",
    source="002 › Troubleshooting › 场景5",
    symptom=(
        "第一次重启kafka client端（stop then start）失败！ — Application run failed … "
        "org.apache.kafka.common.errors.TimeoutException: Timeout expired while fetching topic metadata"
    ),
    guarantee="idempotent",
    expected_verdict="pass",
    client=IDEMPOTENT,
    topic_config={"min.insync.replicas": 2},
    variants=(
        Variant(
            "vulnerable",
            "Old client killed (no LeaveGroup), restarted at once inside its session, broker cut.",
            expected_symptoms=(
                ExpectedSymptom(
                    "broker_log",
                    "heartbeat expiration",
                    "the restarted member's assignment waits until the coordinator expires the old member",
                ),
            ),
        ),
        Variant(
            "remediated",
            "Old client killed; restarted once the coordinator has expired the old member (seed lesson 3).",
        ),
        Variant("graceful", "Old client closed properly (LeaveGroup), restarted at once."),
    ),
    remediation=(
        "Do not restart a client inside its previous member's session (seed: 启停kafka客户端操作时也不要动作"
        "太快): wait session.timeout.ms, or until the group shows no member.",
        "Close consumers properly (close() sends LeaveGroup) so the coordinator does not wait for a session "
        "to expire; or use static membership (group.instance.id) so a restart takes its place back.",
        "Treat start-up timeouts as retriable rather than failing the application.",
    ),
    related=("MD2", "PB1", "MPI2"),
)


def _committed_total(events: list[Event], process: str, topic: str) -> int:
    """Sum over partitions of the highest offset ``process`` committed successfully."""
    best: dict[int, int] = {}
    for e in events:
        if isinstance(e, Commit) and e.process == process and e.outcome == "ok":
            for p in e.offsets:
                if p.topic == topic and p.offset is not None and p.error is None:
                    best[p.partition] = max(best.get(p.partition, 0), p.offset)
    return sum(best.values())


def _group_members(run: ScenarioRun) -> int:
    """Members of the run's group as its coordinator reports them now (raw DescribeGroups: a timed-out
    AdminClient describe_consumer_groups can abort the process inside librdkafka, librdkafka#4605)."""
    return len(run.cluster.describe_group(run.group).members)


def _coordinator_lines(run_dir: Path, group: str, member: str) -> list[tuple[float, str]]:
    """(epoch, text) of the broker log lines about ``member`` of ``group`` (captured into ``logs/``)."""
    found = []
    for path in (p for p in log_files(run_dir / "logs") if p.name.startswith("broker-")):
        for line in read_log_lines(path):
            if member in line and group in line:
                stamp = datetime.fromisoformat(line[:26]).replace(tzinfo=UTC).timestamp()
                found.append((stamp, line[31:]))
    return sorted(found)


def _committed_sum(result: str | None) -> int | None:
    """The sum of the offsets in a ``committed`` probe's result (``"0:20 1:25 2:15"``); None if unreadable."""
    try:
        return sum(int(part.split(":")[1]) for part in (result or "").split())
    except (IndexError, ValueError):
        return None


def _all_in(texts: list[str], part: str) -> bool:
    """Whether every one of ``texts`` (at least one) contains ``part``."""
    return bool(texts) and all(part in t for t in texts)


@chaos_scenario(SCENARIO)
def test_md3(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=3, replication_factor=3)
    session_s = run.time.session_timeout_ms / 1000
    api_timeout_s = run.time.api_timeout_s
    member = run.process_member(run.member_spec("consumer-0", batch_size=100)).start()
    run.on_close(lambda: member.stop() if member.running else None)
    stats = run.producer(count=RECORDS, rate=None, duration_s=30.0).join()
    assert stats.ok == RECORDS, stats
    run.wait_for(
        "the old member committed every prefilled record",
        lambda ev: _committed_total(ev, "consumer-0", run.topic) == RECORDS,
        30,
    )
    broker = run.target_partition(avoid_coordinator=True).leader
    assert broker is not None, "the target partition has no leader"
    run.introspect(interval_s=0.5)
    fault = run.fault(NetworkCut, broker)
    fault.inject()
    if variant == "graceful":
        member.stop()
    else:
        member.crash()
    run.mark("old-client-stopped")
    run.note(f"old client {'closed' if variant == 'graceful' else 'killed'}")
    if variant == "remediated":
        waited = run.wait_until(
            "the coordinator expired the old member", lambda: _group_members(run) == 0, 3 * session_s
        )
        run.note(f"group without members {waited:.1f} s after the kill")
    run.mark("client-restart")
    probed = run.startup_probe(timeout_s=api_timeout_s, group=True)
    # The restarted client: same actor name, a new member id (on a thread: no interpreter start to wait).
    run.mark("consumer-started")
    run.member("consumer-0", batch_size=100)
    more = run.producer("producer-1", count=MORE, rate=None, duration_s=30.0).join()
    assert more.ok == MORE, more
    run.wait_for(
        "the restarted member delivered every record",
        lambda ev: views.acked_ids(ev) <= views.delivered_ids(ev),
        3 * session_s + 10,
    )
    fault.heal()
    run.wait_until("every broker sees the healed cluster", lambda: run.converged(full_isr=True), 60)
    result = run.finish()

    events = result.events
    stopped = views.mark(events, "old-client-stopped")
    restart = views.mark(events, "client-restart")
    started = views.mark(events, "consumer-started")
    cut, _ = views.fault_window(events, fault)
    probes = [p for p in views.probe_calls(events) if p.process == "probe"]
    assigns = [r for r in views.rebalances(events, "consumer-0") if r.action == "assign" and r.partitions]
    old = [r for r in assigns if r.mono < stopped.mono]
    old_gen = max(r.generation or 0 for r in old)
    old_member = old[-1].member or ""
    new = next(r for r in assigns if r.mono > restart.mono)
    lines = _coordinator_lines(result.run_dir, run.group, old_member)
    joined = [
        text
        for _, text in _coordinator_lines(result.run_dir, run.group, new.member or "?")
        if "joins group" in text
    ]
    expired = [ts for ts, text in lines if "has failed, removing it from the group" in text]
    left = [ts for ts, text in lines if "explicit `LeaveGroup`" in text]
    after_stop = [round(ts - stopped.ts, 2) for ts in expired]
    assigned_s = new.mono - started.mono
    print(
        f"\n{variant}: cut broker {broker}; session {session_s} s; restart "
        f"+{restart.mono - stopped.mono:.2f} s after the old client "
        f"{'closed' if variant == 'graceful' else 'died'}; "
        f"probes {[(p.operation, p.error, round(p.duration_ms), p.result) for p in probes]}; "
        f"old member expired {after_stop} s / left {len(left)} after the stop; new member "
        f"{[t[t.index('joins group') :][:60] for t in joined]}; assignment +{assigned_s:.2f} s after the "
        f"consumer start (+{new.mono - stopped.mono:.2f} s after the stop), generation {old_gen} -> "
        f"{new.generation}"
    )

    assert result.count("lost_acked") == result.count("duplicate_in_log") == 0
    result.precondition(
        f"broker {broker} was cut before the old client stopped, and the client restarted after that",
        cut < stopped.mono < restart.mono,
        f"cut {cut:.2f}, stop {stopped.mono:.2f}, restart {restart.mono:.2f} (monotonic s)",
    )
    # librdkafka's start-up reads do not time out: metadata and the committed offsets (all 60 records,
    # committed by the old member) arrive well within the seed's default.api.timeout.ms.
    result.symptom(
        f"the start-up reads (metadata, committed) succeeded in < T / 2 (T = {api_timeout_s} s)",
        probed
        and [p.operation for p in probes] == ["metadata", "committed"]
        and all(p.error is None and p.duration_ms < 0.5 * api_timeout_s * 1000 for p in probes),
        [(p.operation, p.error, round(p.duration_ms)) for p in probes],
    )
    if run.client_library == "java":
        # The seed's own client: its restart failed with this exception after default.api.timeout.ms.
        result.symptom(
            "the seed's Java exception: partitionsFor failed with TimeoutException \"Timeout expired while "
            f'fetching topic metadata" (T = {api_timeout_s} s)',
            any(p.error == "TimeoutException" and "topic metadata" in (p.message or "") for p in probes),
            [(p.operation, p.error, p.message, round(p.duration_ms)) for p in probes],
        )
    committed = next((p.result for p in probes if p.operation == "committed"), None)
    result.symptom(
        f"committed() returned the old member's offsets ({RECORDS} records)",
        _committed_sum(committed) == RECORDS,
        f"committed {committed!r}",
    )
    result.symptom("the coordinator logged the new member's JoinGroup", bool(joined), joined)
    generations = f"generation {old_gen} -> {new.generation}"
    if variant == "graceful":
        # close() sent LeaveGroup: the coordinator dropped the old member at once, no expiry.
        result.symptom("the old member left through an explicit LeaveGroup", bool(left), lines)
        result.symptom("the coordinator did not expire the old member", not expired, lines)
    else:
        # The old member died without LeaveGroup: the coordinator expired it (the seed's "Member … has
        # failed, removing it from the group"), at most a session after its last heartbeat — which preceded
        # the kill.
        result.symptom(
            'the coordinator expired the old member once ("has failed, removing it from the group")',
            len(expired) == 1,
            lines,
        )
        result.symptom("the old member sent no LeaveGroup", not left, lines)
        result.symptom(
            f"the expiry came 0.5 .. 1 session (+1 s) after the kill (session {session_s} s)",
            bool(expired) and 0.5 * session_s <= expired[0] - stopped.ts <= session_s + 1.0,
            f"expired {after_stop} s after the kill",
        )
    if variant == "vulnerable":
        # Restarted inside the old member's session: the new member's join completed the rebalance only
        # once the old member was expired — one generation later, no earlier than the expiry.
        result.precondition(
            "the client restarted inside the old member's session (< session / 2 after the kill)",
            restart.mono - stopped.mono < 0.5 * session_s,
            f"restart {restart.mono - stopped.mono:.2f} s after the kill, session {session_s} s",
        )
        result.symptom(
            "the new member joined while the old one was still in the group (Stable state)",
            _all_in(joined, "in Stable state"),
            joined,
        )
        result.symptom(
            "the new member's assignment came with the old member's expiry (-0.05 .. +3 s)",
            bool(expired) and expired[0] - 0.05 <= new.ts <= expired[0] + 3.0,
            f"assigned {new.ts - stopped.ts:.2f} s after the kill, expired {after_stop} s after it",
        )
        result.symptom("the join took one generation", new.generation == old_gen + 1, generations)
        return
    if variant == "remediated":
        result.symptom(
            "the coordinator's expiry line precedes the restart",
            bool(expired) and expired[0] <= restart.ts,
            f"expired {after_stop} s, restart {restart.ts - stopped.ts:.2f} s after the kill",
        )
    # Restarted once the old member was gone (expired or left): the new member joined an empty group (one
    # generation for the emptying, one for the join) without waiting on a session.
    result.symptom("the new member joined an empty group", _all_in(joined, "in Empty state"), joined)
    result.symptom("the join took two generations", new.generation == old_gen + 2, generations)
    bound_s, why = session_s, f"session {session_s} s"
    if run.client_library == "java":
        # The Java client bootstraps from one broker at a time: when it picks the cut one, its first request
        # waits request.timeout.ms before it tries the next (librdkafka dials every bootstrap broker at once).
        request_s = run.time.socket_timeout_ms / 1000
        bound_s += request_s
        why += f" + the Java client's request.timeout.ms {request_s} s on the cut bootstrap broker"
        on_cut = [
            e.message
            for e in views.client_logs(events)
            if e.process == "consumer-0" and e.mono > started.mono and "disconnected" in (e.message or "")
        ]
        result.symptom(
            'the restarted Java member first waited on the cut broker ("Bootstrap broker … disconnected")',
            bool(on_cut),
            on_cut[:2],
        )
    assert assigned_s < bound_s, f"assigned {assigned_s:.2f} s after the start; {why}"
