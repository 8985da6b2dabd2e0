"""On the real cluster: transactional outcomes judged right, evidence scoped to its run.

- **a transactional worker that aborts and reprocesses**: the consume-transform-produce worker
  (``chaos.workload.transactional``) copies 200 inputs to the run's topic, whose ``max.message.bytes``
  (256) refuses its batches at first: librdkafka fails the transaction with an abortable error, the worker
  aborts (an ``abort`` marker listing the inputs it carried), rewinds and processes the batch again; once the
  topic takes the batches again (the setting deleted) the same inputs are committed. The audit must report no
  ``aborted_read`` — the inputs were aborted in one attempt and committed by the next — nor a duplicate
  delivery (the reads inside the aborted attempts are rolled back), and pass the run under
  ``exactly_once``. 256 bytes:
  more than a transaction marker's batch (about 80 bytes: the coordinator must still write the abort
  markers), less than a batch of five records. ``linger.ms`` 500 keeps every
  record of a transaction queued until the commit flushes them, so no ``produce()`` call meets the abortable
  state.
- **a transactional producer killed mid-transaction** (``run.txn_producer``, ``crash_in_txn``): its third
  transaction's sends were acknowledged by the brokers (delivery reports ``ok``) and never committed; a new
  instance of its ``transactional.id`` fences it (and aborts that transaction), then commits three more. No
  ``lost_acked``; the killed transaction's values are failed (observed aborted) or indeterminate, the
  committed ones acked, and the run passes under ``exactly_once``.
- **logs of one run carry no line from the run before**: two runs on the session's cluster, the second
  started more than ``LOG_MARGIN_S`` after the first ended; the second run's ``logs/`` start no earlier than
  its start less the margin and hold no line of the first run's window, while the first run's logs do hold
  lines of it (its topic's creation).

Each test is bounded (every wait has a timeout) and takes well under 90 s here.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import replace

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, not in __all__
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from chaos.cluster.logs import log_files, read_log_lines
from chaos.history import Delivery, Event, SendInvoke, SendOutcome, TxnMarker
from chaos.report.symptoms import parse_line
from chaos.run.manifest import ScenarioInfo, read_scenario
from chaos.scenario import Scenario, ScenarioRun, Variant, views
from chaos.scenario.runner import LOG_MARGIN_S
from chaos.workload import (
    IDEMPOTENT,
    TRANSACTIONAL,
    ChildProcess,
    ProducerSpec,
    ProducerWorker,
    TransactionalWorker,
    TxnWorkerSpec,
)

pytestmark = pytest.mark.integration

SOURCE = "tests/integration/test_txn_verdicts.py"
GROUP = {"session.timeout.ms": 6_000, "heartbeat.interval.ms": 1_000, "max.poll.interval.ms": 6_000}

# ---- a transactional worker that aborts and reprocesses ---------------------------------------------

INPUTS = 200
BATCH = 50
REFUSING_BYTES = 256
TRANSFORMER = "transformer-0"

ABORT = Scenario(
    scenario_id="txn_worker_abort_then_commit",
    case_id="X14",
    title="Consume-transform-produce whose transactions abort, then commit the same inputs",
    source=SOURCE,
    symptom=(
        "a value aborted in one transaction attempt and committed by the next stayed aborted: every read "
        "of it was an aborted_read, and a correct exactly-once pipeline failed"
    ),
    client=IDEMPOTENT,  # the input's producer; the transform runs with TRANSACTIONAL
    guarantee="exactly_once",
    client_guarantee="idempotent",
    expected_verdict="pass",
    consumer_config=GROUP,
    variants=(
        Variant(
            "abort_then_commit",
            f"the output's max.message.bytes={REFUSING_BYTES} refuses the first batches, then is reset",
            topic_config={"max.message.bytes": REFUSING_BYTES},
        ),
    ),
)


def markers(events: list[Event], process: str | None = None) -> list[TxnMarker]:
    return [e for e in events if isinstance(e, TxnMarker) and (process is None or e.process == process)]


def committed_values(events: list[Event]) -> set[str]:
    return {v for m in markers(events) if m.action == "commit" and m.outcome == "ok" for v in m.value_ids}


def aborted_values(events: list[Event]) -> set[str]:
    return {v for m in markers(events) if m.action == "abort" and m.outcome == "ok" for v in m.value_ids}


def running(child: ChildProcess, condition: Callable[[list[Event]], bool]) -> Callable[[list[Event]], bool]:
    """``condition``, failing at once with the child's stderr when the child died."""

    def check(events: list[Event]) -> bool:
        if condition(events):
            return True
        if not child.running:
            raise AssertionError(f"{child.name} exited with {child.returncode}: {child.stderr_tail()}")
        return False

    return check


def reset_topic_setting(run: ScenarioRun, key: str) -> None:
    """Delete ``key`` from the run topic's configuration: the broker's default applies again."""
    entry = ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
    resource = ConfigResource(ResourceType.TOPIC, run.topic, incremental_configs=[entry])
    for future in run.cluster.admin().incremental_alter_configs([resource]).values():
        future.result(30)


def test_a_transform_that_aborts_then_commits_the_same_inputs_has_no_aborted_read(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(ABORT, "abort_then_commit") as run:
        run.create_topic(partitions=2, replication_factor=3)  # the output: what the audit reads
        source = f"in-{run.run_id}"
        run.cluster.create_topic(source, 2, 3)
        stats = (
            ProducerWorker(
                run.context,
                ProducerSpec(name="producer-0", topic=source, rate=None, count=INPUTS, duration_s=30.0),
            )
            .start()
            .join()
        )
        assert stats.ok == INPUTS, stats
        spec = TxnWorkerSpec(
            TRANSFORMER,
            input_topic=source,
            batch_size=BATCH,
            duration_s=80.0,
            consumer_overrides=tuple(GROUP.items()),
            producer_overrides=(("linger.ms", 500),),
        )
        worker = TransactionalWorker(replace(run.context, client=TRANSACTIONAL), spec).start()
        run.on_close(worker.stop)
        aborted_in = run.wait_for(
            "a transaction aborted (the output refused its batch)",
            running(worker, lambda ev: bool(aborted_values(ev))),
            30,
        )
        reset_topic_setting(run, "max.message.bytes")
        run.note("the output's max.message.bytes reset: it takes the transform's batches again")
        committed_in = run.wait_for(
            "every input committed",
            running(worker, lambda ev: views.acked_ids(ev) <= committed_values(ev)),
            45,
        )
        run.wait_quiet("the transform idle", lambda e: isinstance(e, Delivery | TxnMarker), 2.0, 20)
        result = run.finish()

    events = list(result.events)
    ends = [(m.action, m.outcome) for m in markers(events) if m.action != "begin"]
    reprocessed = aborted_values(events) & committed_values(events)
    counts = sorted((action, outcome, ends.count((action, outcome))) for action, outcome in set(ends))
    print(
        f"\nfirst abort after {aborted_in:.1f} s, every input committed {committed_in:.1f} s after the "
        f"reset; transaction ends {counts}; {len(reprocessed)} inputs aborted then committed; "
        f"{result.summary()}"
    )
    inputs = views.acked_ids(events)
    assert len(inputs) == INPUTS
    assert reprocessed, "no input was aborted and later committed: the case did not happen"
    assert committed_values(events) == inputs
    assert result.count("aborted_read") == 0
    assert result.count("lost_acked") == 0
    assert result.count("unseen_by_group") == 0
    assert result.count("duplicate_in_log") == 0
    # the reads inside the aborted attempts are rolled back (docs/audit.md): no duplicate delivery
    assert result.count("duplicate_delivery_other") == 0
    assert result.count("duplicate_delivery_after_rebalance") == 0
    assert result.audit.verdict == "pass", result.audit.failed_by


# ---- a transactional producer killed mid-transaction ------------------------------------------------

TXN = 20
CRASH_IN = 3
FIRST, SECOND = "txn-producer-0", "txn-producer-1"

KILLED = Scenario(
    scenario_id="txn_producer_killed_mid_transaction",
    case_id="X14",
    title="A transactional producer SIGKILLed inside a transaction, then replaced by a new instance",
    source=SOURCE,
    symptom=(
        "the killed transaction's sends had ok delivery reports and no commit: counted acked, their "
        "records (rightly) not committed, so the audit reported them lost"
    ),
    client=TRANSACTIONAL,
    guarantee="exactly_once",
    expected_verdict="pass",
    consumer_config=GROUP,
    variants=(
        Variant(
            "killed",
            f"SIGKILL in transaction {CRASH_IN} after its flush; a new instance of the transactional.id "
            "fences it and commits more",
        ),
    ),
)


def test_a_transactional_producer_killed_mid_transaction_loses_nothing_acked(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(KILLED, "killed") as run:
        run.create_topic(partitions=2, replication_factor=3)
        run.member("consumer-0")  # read_committed (the TRANSACTIONAL profile)
        first = run.txn_producer(FIRST, txn_size=TXN, rate=200.0, count=TXN * CRASH_IN, crash_in_txn=CRASH_IN)
        code = first.wait(45.0)
        if code is None:
            first.crash()
        assert code == -signal.SIGKILL, f"{FIRST} did not kill itself: exit {code}, {first.stderr_tail()}"
        second = run.txn_producer(
            SECOND, txn_size=TXN, rate=200.0, count=TXN * 3, overrides={"transactional.id": f"chaos-{FIRST}"}
        )
        assert second.wait(45.0) == 0, f"{SECOND} did not finish: {second.stderr_tail()}"
        run.wait_caught_up(30)
        result = run.finish()

    events = list(result.events)
    ours = markers(events, FIRST)
    assert [m.action for m in ours] == ["begin", "commit"] * (CRASH_IN - 1) + ["begin"]
    after = events[events.index(ours[-1]) :]  # the killed transaction's begin, then the rest of the run
    killed = {e.value_id for e in after if isinstance(e, SendInvoke) and e.process == FIRST}
    acked_by_broker = {
        e.value_id
        for e in events
        if isinstance(e, SendOutcome) and e.outcome == "ok" and e.value_id in killed
    }
    committed = committed_values(events)
    totals = result.audit.facts.totals
    print(
        f"\n{len(killed)} values in the killed transaction ({len(acked_by_broker)} with ok delivery "
        "reports), "
        f"{len(committed)} committed; totals {totals}; {result.summary()}"
    )
    assert len(killed) == TXN
    assert acked_by_broker == killed, "the killed transaction's sends were flushed before the kill"
    assert len(committed) == TXN * (CRASH_IN - 1 + 3)
    assert not killed & committed
    assert result.count("lost_acked") == 0
    assert totals.sends == len(committed) + len(killed)
    assert totals.acked == len(committed)
    assert totals.failed + totals.indeterminate == len(killed)
    assert result.audit.verdict == "pass", result.audit.failed_by


# ---- logs of one run carry no line from the run before ----------------------------------------------

LOGS = Scenario(
    scenario_id="run_scoped_broker_logs",
    case_id="X14",
    title="Two runs on one cluster: each run's broker logs are its own",
    source=SOURCE,
    symptom="each run's logs/ held the session's whole broker logs: a symptom observed from an earlier run",
    client=IDEMPOTENT,
    guarantee="at_least_once",
    expected_verdict="pass",
    variants=(Variant("run", "create the topic, produce 20 values, one member consumes them"),),
)


def short_run(scenario_run: Callable[..., ScenarioRun]) -> tuple[ScenarioRun, ScenarioInfo]:
    with scenario_run(LOGS, "run") as run:
        run.create_topic(partitions=1, replication_factor=3)
        run.member("consumer-0")
        run.producer(count=20, rate=None).join()
        run.wait_caught_up(30)
        run.finish(drain_timeout_s=30.0)
    info = read_scenario(run.dir)
    assert info is not None
    assert info.started_ts is not None
    assert info.ended_ts is not None
    return run, info


def log_lines(run: ScenarioRun, info: ScenarioInfo) -> list[tuple[float, str]]:
    """Every timestamped line of the run's captured logs: (epoch seconds, text)."""
    files = log_files(run.dir / info.log_dir)
    assert files, f"no captured logs in {run.dir / info.log_dir}"
    lines = []
    for path in files:
        for raw in read_log_lines(path):
            ts, text = parse_line(raw)
            if ts is not None:
                lines.append((ts, text))
    return lines


def test_a_runs_broker_logs_hold_no_line_from_the_run_before(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    first, first_info = short_run(scenario_run)
    assert first_info.ended_ts is not None
    # the second run's window (its start less the margin) must open after the first run ended
    time.sleep(max(0.0, first_info.ended_ts + LOG_MARGIN_S + 2.0 - time.time()))
    second, second_info = short_run(scenario_run)
    assert first_info.started_ts is not None
    assert second_info.started_ts is not None

    earlier = log_lines(first, first_info)
    later = log_lines(second, second_info)
    since = second_info.started_ts - LOG_MARGIN_S
    first_window = (first_info.started_ts, first_info.ended_ts)
    assert later, "the second run captured no timestamped broker log line"
    print(
        f"\nfirst run {len(earlier)} lines, second run {len(later)} lines from "
        f"{min(ts for ts, _ in later) - since:+.2f} s after its window opened"
    )
    # not vacuous: the first run's window has lines (its topic's creation), and the second run's own
    assert any(first.topic in text for ts, text in earlier if first_window[0] <= ts <= first_window[1])
    assert any(second.topic in text for _, text in later)
    too_early = [(ts, text) for ts, text in later if ts < since - 0.5]
    assert not too_early, f"{len(too_early)} lines before the second run's window, first {too_early[0]}"
    from_first = [(ts, text) for ts, text in later if first_window[0] <= ts <= first_window[1]]
    assert not from_first, f"{len(from_first)} lines of the first run's window, first {from_first[0]}"
