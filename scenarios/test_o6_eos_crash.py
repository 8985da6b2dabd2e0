"""O6 `eos_consume_transform_produce_crash` — exactly-once consume-transform-produce survives a crash.

docs/catalog.md 4 O6 (seed 002 § 4.3 / 4.3.1 依赖 interal offset, exactly-once: "对于atomic-read-process-write
需要Producer提交offset"; example 2: ``transactional.id``, ``isolation.level=read_committed``,
beginTransaction → send → sendOffsetsToTransaction → commitTransaction).

Setup: input topic and output topic of 2 partitions each, RF 3; 300 values produced to the input first
(idempotent producer); one transformer (``chaos.workload.transactional``, in a child process so it can be
SIGKILLed) consumes batches of 50 (``read_committed``, no auto commit) and writes each value unchanged to
the output; ``session.timeout.ms`` 6 s. The audit reads the **output** (the run's topic) under
``read_committed`` only: that is the application's result.

Timeline: the transformer commits two batches; in its third it produces the batch, flushes it (the
records are in the output log), and SIGKILLs itself before committing (docs/catalog.md: "between send and
commitTransaction"); a new transformer with the same name (same ``transactional.id``) starts at once,
gets the partitions when the dead member's session expires, and processes everything from the last
committed input offsets; wait until every input was delivered and the transformer is idle; drain the
output (read_committed); audit (the session's engine, Spark by default).

Both variants claim ``idempotent``, the application's need on the output: every input exactly once
(no loss, no duplicate in the read_committed output, no redelivery without a rebalance). The audit's
``exactly_once`` would also forbid ``duplicate_delivery_after_rebalance`` — but the restarted transformer
*must* consume the killed one's uncommitted batch again in both variants; in the transactional one that
redelivery is harmless (the first copy's transaction is aborted), which the audit's delivery model cannot
see. So the guarantee judged is the output's, and the redelivery is asserted as a count.

- ``vulnerable`` — an at-least-once transform (``TxnWorkerSpec(transactional=False)``): idempotent
  producer, produce, flush, then commit the input offsets with the consumer. The killed batch is in the
  output and its offsets are not committed: the restart writes it again. Audit: ``duplicate_in_log`` =
  50 (the batch), output 350 records: verdict **fail**. (An idempotent producer does not help: the
  duplicate comes from reprocessing, not from a retry.)
- ``remediated`` — the transactional transform (``transactional.id``, ``send_offsets_to_transaction``,
  ``commit_transaction``): the restart's ``init_transactions()`` fences the dead instance and aborts its
  open transaction; the read_committed output holds each input once (300 records), every input is in
  exactly one committed transaction: verdict **pass**.

Both: ``duplicate_delivery_after_rebalance`` = 50 (the batch consumed again), no loss, nothing unseen,
no reordering.

Measured (ci, this machine, 3 runs): the restarted transformer consumed again 5.2–6.2 s after the kill
(the dead member's 6 s session); ``vulnerable`` 50 duplicates in the output (350 records) every run;
``remediated`` 6 committed transactions + the one open at the kill (7 begins), ``init_transactions()``
0.8–2.4 s per instance, read_committed output 300 records every run.
"""

from __future__ import annotations

import signal
from collections import Counter

from chaos.history import Commit, Delivery, TxnMarker
from chaos.scenario import ExpectedSymptom, Scenario, ScenarioRun, Variant, chaos_scenario, views
from chaos.workload import IDEMPOTENT, TRANSACTIONAL
from chaos.workload.java_client import JavaTransform
from chaos.workload.transactional import TransactionalWorker, TxnWorkerSpec

INPUTS = 300
BATCH = 50
PARTITIONS = 2
CRASH_IN = 3  # two batches committed, the third produced and flushed, then SIGKILL before its commit
GROUP = {"session.timeout.ms": 6_000, "heartbeat.interval.ms": 1_000, "max.poll.interval.ms": 6_000}
NAME = "transformer-0"

SCENARIO = Scenario(
    scenario_id="eos_consume_transform_produce_crash",
    case_id="O6",
    title="Consume-transform-produce killed between send and commit, restarted with the same id",
    source="002 § 4.3 / 4.3.1 依赖 interal offset, exactly-once (sendOffsetsToTransaction)",
    symptom=(
        "对于atomic-read-process-write需要Producer提交offset — beginTransaction → send → "
        "sendOffsetsToTransaction → commitTransaction"
    ),
    guarantee="idempotent",
    client=IDEMPOTENT,
    consumer_config=GROUP,
    variants=(
        Variant(
            "vulnerable",
            "at-least-once transform: idempotent producer, flush, then commit the input offsets",
            expected_verdict="fail",
            client_profile="idempotent_transform",
        ),
        Variant(
            "remediated",
            "transactional transform (transactional.id, send_offsets_to_transaction), read_committed",
            expected_verdict="pass",
            client_profile="transactional_transform",
            expected_symptoms=(
                ExpectedSymptom("client_log", "init_transactions", "the restart fences the killed instance"),
            ),
        ),
    ),
    remediation=(
        "Produce the output and commit the input offsets in one transaction (send_offsets_to_transaction); "
        "restart with the same transactional.id so init_transactions() fences the dead instance and aborts "
        "its open transaction; read the output with isolation.level=read_committed.",
    ),
    related=("O7", "D3"),
)


def _worker(
    run: ScenarioRun, variant: str, source: str, crash: int | None
) -> TransactionalWorker | JavaTransform:
    transactional = variant == "remediated"
    spec = TxnWorkerSpec(
        NAME,
        input_topic=source,
        consumer_overrides=tuple(GROUP.items()),
        batch_size=BATCH,
        crash_in_txn=crash,
        transactional=transactional,
    )
    return run.transform(spec, client=TRANSACTIONAL if transactional else IDEMPOTENT)


@chaos_scenario(SCENARIO)
def test_o6(run: ScenarioRun) -> None:
    variant = run.variant.name
    run.create_topic(partitions=PARTITIONS, replication_factor=3)  # the output: what the audit reads
    source = f"in-{run.run_id}"
    run.create_topic(PARTITIONS, 3, name=source, config={"min.insync.replicas": "2"})
    stats = run.producer("producer-0", topic=source, rate=None, count=INPUTS, duration_s=30.0).join()
    assert stats.ok == INPUTS, stats
    first = _worker(run, variant, source, CRASH_IN).start()
    code = first.wait(60.0)
    if code is None:
        first.crash()
    crashed = code == -signal.SIGKILL
    exit_detail = f"exit code {code}" + ("" if crashed else f"; stderr {first.stderr_tail()}")
    run.mark("transformer-killed")
    run.note(f"{NAME} SIGKILLed in batch {CRASH_IN}, before its commit")
    second = _worker(run, variant, source, None).start()
    run.on_close(lambda: second.stop())
    run.wait_for("every input processed", lambda ev: views.acked_ids(ev) <= views.delivered_ids(ev), 60)
    run.wait_quiet("the transformer idle", lambda e: isinstance(e, Delivery | TxnMarker | Commit), 2.0, 60)
    result = run.finish(isolations=("read_committed",))

    events = result.events
    markers = [e for e in events if isinstance(e, TxnMarker)]
    committed = Counter(v for m in markers if m.action == "commit" and m.outcome == "ok" for v in m.value_ids)
    inits = [e.message for e in views.client_logs(events, facility="TXN_INIT")]
    crash = views.mark(events, "transformer-killed")
    resumed = next((d for d in views.deliveries(events) if d.mono > crash.mono), None)
    again = f"{resumed.mono - crash.mono:.1f} s" if resumed else "never"
    assert result.count("lost_acked") == 0
    assert result.count("unseen_by_group") == 0
    assert result.count("reordered") == 0
    assert result.count("duplicate_delivery_other") == 0
    if result.precondition(
        f"the transformer was SIGKILLed in batch {CRASH_IN}, before its commit",
        crashed,
        f"{exit_detail}; the restart consumed again {again} after the kill",
    ):
        # the batch in flight at the kill is consumed again by the restarted transformer, in both variants
        assert result.count("duplicate_delivery_after_rebalance") == BATCH
    if variant == "vulnerable":
        result.symptom(
            "the at-least-once transform used no transaction (no marker, no init_transactions())",
            not markers and not inits,
            f"{len(markers)} transaction markers; TXN_INIT {inits}",
        )
        if crashed:
            # ... and, without a transaction, written to the output a second time
            assert result.count("duplicate_in_log") == BATCH
            assert result.audit.facts.totals.log_records == INPUTS + BATCH
            assert result.audit.failed_by == ("duplicate_in_log",)
    else:
        # ... but its first copy was in a transaction that init_transactions() of the restart aborted:
        # read_committed output holds each input exactly once
        begins = [m for m in markers if m.action == "begin"]
        commits = [m for m in markers if m.action == "commit"]
        result.precondition(
            "the kill left one transaction open (begins = commits + 1)",
            len(begins) == len(commits) + 1,
            f"transactions {sorted(Counter((m.action, m.outcome) for m in markers).items())}",
        )
        result.symptom(
            "both instances called init_transactions() with the same transactional.id (the restart fences)",
            len(inits) == 2,
            inits,
        )
        assert result.count("duplicate_in_log") == 0
        assert result.audit.facts.totals.log_records == INPUTS
        assert set(committed) == views.acked_ids(events)
        assert max(committed.values()) == 1, "an input committed in two transactions"
