"""PB4 `pb_rolling_fault_script` — the seed's own continuous test script, end to end.

docs/catalog.md 1A PB4 (seed 002 › 场景4 › "重新设计连续测试场景"). The script, verbatim: ``borker 0 1 2
alive:
start client, test`` → ``kill 2(both zookeeper&kafka), borker 0 1 alive: test, restart client, test`` →
``resume 2, borker 0 1 2 alive: test, restart client, test`` → ``shutdown network for borker 2, borker 0 1
alive: test, restart client, test``. The seed's timing rule, learnt the hard way: "启停kafka服务操作时不要动作
太快" and "启停kafka客户端操作时也不要动作太快" (don't stop/start the brokers, nor the clients, too fast).

Replay (brokers 1..3 here; KRaft, so "kill 2 (zookeeper & kafka)" is one broker process): topic of 3
partitions, RF 3, ``min.insync.replicas=2``; an **idempotent** producer (``enable.idempotence=true``,
acks=all) and a one-member group (``consumer-0``, a thread member, commit after processing). B is a broker
that leads a partition, neither the active controller nor the group's coordinator (the script's "2": the
seed's coordinator survived too). Each **test** step produces N = 30 keyed records (a producer of its own,
as fast as it can) and waits until the group delivered every acknowledged record. **restart client** is a
graceful close (commit, LeaveGroup) and a new consumer under the same name. Phases:

0. all alive: start client, test ``t0``;
1. ``Crash`` B (``docker kill``): test ``t1a``, restart client, test ``t1b``;
2. resume B (``docker start``, wait for "Kafka Server started"): test ``t2a``, restart client, test ``t2b``;
3. ``NetworkCut`` B (iptables DROP, silent): test ``t3a``, restart client, test ``t3b``; heal; wait until
   every broker, asked itself, reports full ISRs and the same leaders (a broker back from a cut answers
   from its stale metadata for a moment: a drain reading it then sees a stale high watermark and reports
   acknowledged records as lost — measured once in MD3 before this wait); drain; audit.

The runner's introspection reads leaders and ISRs every 0.5 s throughout.

- ``vulnerable`` — the seed's timing: every step right after the previous one. Expected: ``t1a`` and ``t3a``
  cannot complete before B has left the ISRs (acks=all waits for every in-sync replica): after the crash
  the controller fences B after ``broker.session.timeout.ms`` (6 s ``ci``); after the cut, B (back in every
  ISR by then, leading nothing) is dropped after ``replica.lag.time.max.ms`` (6 s ``ci``). So the last ack
  of ``t1a`` / ``t3a`` comes no earlier than the last introspection sample still showing B in an ISR
  (minus 0.5 s: a broker's metadata cache may trail the controller); those steps' worst ack latency is
  several seconds (measured 5.4–6.5 s).
- ``remediated`` — the seed's rule as gates on cluster state: after the crash and after the cut, wait until
  B is in no ISR and leads nothing (the fault is fenced); after the resume, wait until no partition is
  under-replicated. Expected: ``t1a`` / ``t3a`` start after the last introspection sample showing B in
  an ISR (− 0.5 s), and their worst ack latency stays below 0.5 × ``broker.session.timeout.ms`` (3 s
  ``ci``): no step waits for a failover.

Both variants: every test step's records delivered; loss = 0 (``lost_acked``, ``unseen_by_group``),
duplicates = 0 (in the log and in deliveries); verdict ``pass`` under ``idempotent``. The faster script
does not lose or duplicate anything with an idempotent producer and commit-after-processing; it makes the
client wait out the failovers (the seed's "client start fails" came from its restore step: PB1/MD3).
"""

from __future__ import annotations

from collections.abc import Callable

from chaos.faults.network import NetworkCut
from chaos.faults.process import Crash
from chaos.history import ClusterSample, Event
from chaos.scenario import Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import IDEMPOTENT

N = 30
STEPS = ("t0", "t1a", "t1b", "t2a", "t2b", "t3a", "t3b")

SCENARIO = Scenario(
    scenario_id="pb_rolling_fault_script",
    case_id="PB4",
    title="The seed's rolling fault script: kill, resume, cut one broker; test and restart the client",
    source="002 › Troubleshooting › 场景4 › 重新设计连续测试场景",
    symptom=(
        "borker 0 1 2 alive: start client, test → kill 2(both zookeeper&kafka), borker 0 1 alive: test, "
        "restart client, test → resume 2 … → shutdown network for borker 2 … — "
        "启停kafka服务操作时不要动作太快；启停kafka客户端操作时也不要动作太快"
    ),
    guarantee="idempotent",
    expected_verdict="pass",
    client=IDEMPOTENT,
    topic_config={"min.insync.replicas": 2},
    variants=(
        Variant("vulnerable", "The seed's timing: phases and client restarts back to back."),
        Variant(
            "remediated",
            "Each phase gated on the cluster: the fault fenced (B out of every ISR, leading nothing), "
            "no under-replicated partition after the resume.",
        ),
    ),
    remediation=(
        "Don't stop/start brokers too fast (seed): before the next step, wait until the faulted broker is "
        "fenced (out of every ISR, no leadership) and, after a restart, until no partition is "
        "under-replicated.",
        "Don't restart clients too fast (seed): restart them once the cluster has settled.",
        "Use an idempotent producer (acks=all) and commit after processing: the rolling faults then cost "
        "latency, not data.",
    ),
    related=("PB1", "ISR2", "MD3"),
)


def _fenced(run: ScenarioRun, broker: int) -> bool:
    return all(
        broker not in s.isr and s.leader not in (broker, None)
        for s in run.cluster.describe_partitions([run.topic])
    )


def _isr_exit(samples: list[ClusterSample], broker: int, after: float) -> tuple[float, float] | None:
    """``(last, first)``: monos of the last introspection sample after ``after`` with ``broker`` still in an
    ISR of the topic, and of the first one with ``broker`` in none — the ISR shrink happened between.
    ``None`` when no sample after ``after`` shows ``broker`` out of every ISR."""
    last = after
    for s in samples:
        if s.mono <= after or not s.partition_states:
            continue
        if all(broker not in p.isr for p in s.partition_states):
            return last, s.mono
        last = s.mono
    return None


@chaos_scenario(SCENARIO)
def test_pb4(run: ScenarioRun) -> None:
    variant = run.variant.name
    gated = variant == "remediated"
    run.create_topic(partitions=3, replication_factor=3)
    session_s = run.cluster.config.detection_timeout_s("broker.session.timeout.ms", 9000)
    member = run.member("consumer-0", batch_size=100)
    run.introspect(interval_s=0.5)

    def test(step: str) -> None:
        run.mark(f"step-{step}")
        run.note(f"test {step}")
        stats = run.producer(f"producer-{step}", count=N, rate=None, duration_s=30.0).join()
        assert stats.ok == N, (step, stats)
        run.wait_for(
            f"{step}: the group delivered every acked record",
            lambda ev: views.acked_ids(ev) <= views.delivered_ids(ev),
            30,
        )

    def restart_client() -> None:
        run.note("restart client")
        member.restart()

    def gate(what: str, condition: Callable[[], bool]) -> None:
        if gated:
            took = run.wait_until(what, condition, 60)
            run.note(f"gate: {what} after {took:.1f} s")

    test("t0")
    broker = run.target_partition(avoid_coordinator=True).leader
    assert broker is not None, "the target partition has no leader"
    crash = run.fault(Crash, broker)
    crash.inject()
    gate(f"broker {broker} fenced after the crash", lambda: _fenced(run, broker))
    test("t1a")
    restart_client()
    test("t1b")
    crash.heal()
    run.note(f"broker {broker} restarted in {crash.restart_s or 0:.1f} s")
    gate("no under-replicated partition", lambda: not run.cluster.under_replicated_partitions([run.topic]))
    test("t2a")
    restart_client()
    test("t2b")
    cut = run.fault(NetworkCut, broker)
    cut.inject()
    gate(f"broker {broker} fenced after the cut", lambda: _fenced(run, broker))
    test("t3a")
    restart_client()
    test("t3b")
    cut.heal()
    run.wait_until("every broker sees the healed cluster", lambda: run.converged(full_isr=True), 60)
    result = run.finish()

    # Loss = 0 and duplicates = 0 for the idempotent producer, with commit after processing.
    counts = {k: v for k, v in result.audit.facts.counts().items() if v}
    assert not {k: v for k, v in counts.items() if k.startswith(("lost", "unseen", "duplicate"))}, counts
    assert result.audit.facts.totals.acked == N * len(STEPS)

    events = result.events
    notes = [(e.message or "", e.mono) for e in views.client_logs(events, facility="SCENARIO")]
    marked = views.marks(events)
    starts = {step: marked[f"step-{step}"].mono for step in STEPS if f"step-{step}" in marked}
    samples = views.samples(events, process="introspect")
    crashed, resumed = views.fault_window(events, crash)
    cut_at, _ = views.fault_window(events, cut)
    exit_crash = _isr_exit(samples, broker, crashed)
    exit_cut = _isr_exit(samples, broker, cut_at)
    ran = result.precondition("every test step of the script ran", sorted(starts) == sorted(STEPS), starts)
    for fault, exit_ in (("crash", exit_crash), ("cut", exit_cut)):
        result.precondition(
            f"the introspection saw broker {broker} leave every ISR after the {fault}",
            exit_ is not None,
            f"(last sample in an ISR, first in none): {exit_}",
        )
    if not ran or exit_crash is None or exit_cut is None:
        return
    (in_isr_crash, out_after_crash), (in_isr_cut, out_after_cut) = exit_crash, exit_cut
    bounds = [*[starts[s] for s in STEPS], float("inf")]

    def step_of(e: Event) -> str:
        return next(s for s, lo, hi in zip(STEPS, bounds, bounds[1:], strict=False) if lo <= e.mono < hi)

    worst: dict[str, float] = {}
    last_ack: dict[str, float] = {}
    for o in views.outcomes(events, "ok"):
        step = step_of(o)
        worst[step] = max(worst.get(step, 0.0), o.latency_ms or 0.0)
        last_ack[step] = max(last_ack.get(step, 0.0), o.mono)
    print(
        f"{variant}: broker {broker}; worst ack latency per step (ms) "
        f"{ {s: round(worst.get(s, 0)) for s in STEPS} }; B out of every ISR "
        f"+{out_after_crash - crashed:.1f} s after the crash, +{out_after_cut - cut_at:.1f} s after the cut; "
        f"steps at {[round(starts[s] - starts['t0'], 1) for s in STEPS]} s; resume at "
        f"+{(resumed or 0) - starts['t0']:.1f} s; gates "
        f"{[t for t, _ in notes if t.startswith(('gate', 'broker'))]}"
    )

    # The introspection reads a broker's metadata cache, which may trail the controller by a moment.
    lag_s = 0.5
    if variant == "vulnerable":
        # t1a / t3a started while B was still in the ISRs, and acks=all waits for every in-sync replica:
        # their last ack came only after B had left them (after the last sample still showing it).
        before_cut = [s for s in samples if s.mono < cut_at and s.partition_states]
        if result.precondition(
            f"t1a started before broker {broker} left the ISRs after the crash",
            starts["t1a"] < out_after_crash,
            (starts["t1a"], out_after_crash),
        ):
            assert last_ack["t1a"] >= in_isr_crash - lag_s, (last_ack["t1a"], in_isr_crash)
        back = result.precondition(
            f"broker {broker} was back in an ISR before the cut (last sample before it)",
            bool(before_cut) and any(broker in p.isr for p in before_cut[-1].partition_states),
            [(p.partition, p.isr) for p in before_cut[-1].partition_states] if before_cut else "no sample",
        )
        early = result.precondition(
            f"t3a started before broker {broker} left the ISRs after the cut",
            starts["t3a"] < out_after_cut,
            (starts["t3a"], out_after_cut),
        )
        if back and early:
            assert last_ack["t3a"] >= in_isr_cut - lag_s, (last_ack["t3a"], in_isr_cut)
    else:
        # The steps after the faults started once B was out of every ISR (an independent observer: the
        # introspection), and their acks did not wait for a failover (which takes a broker session).
        if result.precondition(
            f"t1a started once broker {broker} was out of every ISR after the crash",
            starts["t1a"] >= in_isr_crash - lag_s,
            (starts["t1a"], in_isr_crash),
        ):
            assert worst["t1a"] < 0.5 * session_s * 1000, worst
        if result.precondition(
            f"t3a started once broker {broker} was out of every ISR after the cut",
            starts["t3a"] >= in_isr_cut - lag_s,
            (starts["t3a"], in_isr_cut),
        ):
            assert worst["t3a"] < 0.5 * session_s * 1000, worst
