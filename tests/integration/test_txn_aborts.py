"""A transactional producer that aborts 10 % of its transactions on purpose.

``run.txn_producer(abort_rate=0.1, abort_txns=(3,))``: 60 transactions of 10 sends; the third and those the
session's seed picks (about 6) are aborted after their sends were flushed — the records are in the log,
under abort markers. The read_committed group must never read one of their values, the committed ones all,
and the audit passes the run under ``exactly_once`` (an aborted send is failed, not lost).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from chaos.history import TxnMarker
from chaos.scenario import Scenario, ScenarioRun, Variant, views
from chaos.workload import TRANSACTIONAL

pytestmark = pytest.mark.integration

TXN, TRANSACTIONS, RATE = 10, 60, 0.1

ABORTS = Scenario(
    scenario_id="txn_producer_deliberate_aborts",
    case_id="X17",
    title="A transactional producer aborting 10 % of its transactions on purpose",
    source="tests/integration/test_txn_aborts.py",
    symptom="the transactional profile never ran a transaction, and nothing aborted one on purpose",
    client=TRANSACTIONAL,
    guarantee="exactly_once",
    expected_verdict="pass",
    variants=(Variant("aborts", f"{TRANSACTIONS} transactions of {TXN}; abort_rate {RATE}"),),
)


def test_deliberately_aborted_values_are_never_read_committed(
    scenario_run: Callable[..., ScenarioRun],
) -> None:
    with scenario_run(ABORTS, "aborts") as run:
        run.create_topic(partitions=2, replication_factor=3)
        run.member("consumer-0")  # read_committed (the TRANSACTIONAL profile)
        producer = run.txn_producer(
            txn_size=TXN, rate=500.0, count=TXN * TRANSACTIONS, abort_rate=RATE, abort_txns=(3,)
        )
        assert producer.wait(60.0) == 0, producer.stderr_tail()
        run.wait_caught_up(30)
        result = run.finish()

    events = list(result.events)
    ends = [e for e in events if isinstance(e, TxnMarker) and e.action in ("commit", "abort")]
    aborted = {v for e in ends if e.action == "abort" and e.outcome == "ok" for v in e.value_ids}
    committed = {v for e in ends if e.action == "commit" and e.outcome == "ok" for v in e.value_ids}
    delivered = views.delivered_ids(events)
    announced = views.client_logs(events, facility="TXN_ABORT")
    print(
        f"\n{len(ends)} transactions: {len(aborted) // TXN} aborted on purpose, {len(committed) // TXN} "
        f"committed; {len(delivered)} values delivered; {result.summary()}"
    )
    assert len(ends) == TRANSACTIONS
    assert 1 <= len(announced) == len(aborted) // TXN <= TRANSACTIONS // 3
    assert len(aborted) + len(committed) == TXN * TRANSACTIONS
    assert not delivered & aborted, "a read_committed member read a value of an aborted transaction"
    assert delivered == committed
    totals = result.audit.facts.totals
    assert (totals.acked, totals.failed) == (len(committed), len(aborted))
    assert result.count("aborted_read") == 0
    assert result.audit.verdict == "pass", result.audit.failed_by
