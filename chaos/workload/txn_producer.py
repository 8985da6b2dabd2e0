"""The transactional producer: the run's producer loop, in transactions of ``txn_size`` sends.

``init_transactions()`` (recorded as a ``TXN_INIT`` client log line), then per transaction:
``begin_transaction()`` and a :class:`TxnMarker` ``begin``; ``txn_size`` sends paced at ``rate``, each
recorded as :class:`~chaos.workload.producer.ProducerWorker` records its sends (a :class:`SendInvoke` before
``produce()``, one :class:`SendOutcome` from the delivery report); ``flush()``; ``commit_transaction()``
and a ``commit`` marker listing the transaction's value ids. ``txn_requires_abort`` → ``abort_transaction()``
and an ``abort`` marker, and the next transaction sends new values; a retriable commit error is retried; any
other error (fatal: fenced by a newer instance of the ``transactional.id``…) is recorded as a ``commit`` of
outcome ``info`` naming the error and ends the producer, as does a failed ``begin_transaction()`` (a
``begin`` of outcome ``fail``) or ``abort_transaction()`` (an ``abort`` of outcome ``info``). Ending on a
fatal error is the producer's behaviour under test, not a harness failure: the child exits 0.

Its markers carry the producer's name as ``process``, the ``process`` and ``producer`` of its sends, so the
audit pairs them (docs/audit.md, "Transactions"): a send made inside a transaction is acked only by its
recorded commit, failed when the abort is recorded or observed, indeterminate with no recorded end.

It runs in a child process (:class:`TransactionalProducer`, ``python -m chaos.workload.txn_producer``) so
that it can die or stall for real: :meth:`~ChildProcess.crash` (SIGKILL), :meth:`~ChildProcess.pause` /
:meth:`~ChildProcess.resume` (SIGSTOP / SIGCONT) at any moment; ``crash_in_txn=n`` SIGKILLs and
``freeze_in_txn=n`` SIGSTOPs the process itself inside its n-th transaction, after that transaction's sends
were flushed (acknowledged, in the log) and before the commit, each announced first by a client log line
(facility ``TXN_CRASH`` / ``TXN_FREEZE``). The transaction stays open until a new instance of the
``transactional.id`` calls ``init_transactions()`` (which aborts it) or the coordinator aborts it after
``transaction.timeout.ms``; until then no read_committed consumer reads past its first record.
``abort_txns`` / ``abort_rate`` abort transactions on purpose instead of committing them (after the flush,
announced by a ``TXN_ABORT`` client log line, then an ``abort`` marker).
"""

from __future__ import annotations

import math
import os
import random
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Final

from confluent_kafka import KafkaException, Producer

from chaos.errors import ConfigError, WorkloadError
from chaos.run.context import RunContext
from chaos.workload.common import ClientLogBridge, child_payload, error_name, notice
from chaos.workload.consumer import ChildProcess
from chaos.workload.effective import ClientConfig, announce
from chaos.workload.member_child import serve
from chaos.workload.producer import Pacer, ProducerSpec, SendRecorder
from chaos.workload.transactional import TxnMarkers, end_transaction, init_transactions

MAX_TXN_SIZE: Final = 10_000
HALTS: Final = (
    ("crash_in_txn", signal.SIGKILL, "TXN_CRASH"),
    ("freeze_in_txn", signal.SIGSTOP, "TXN_FREEZE"),
)
"""What the spec can make the process do to itself inside a transaction: field, signal, log facility."""


@dataclass(frozen=True)
class TxnProducerSpec(ProducerSpec):
    """:class:`ProducerSpec`'s sends — ``rate`` sends/s until ``count`` sends or ``duration_s``, to ``topic``
    (``None``: the run's), ``keys``, ``overrides``, ``traffic`` — in transactions of ``txn_size`` sends.

    The client profile must be transactional (``TRANSACTIONAL``, or any whose guarantee is exactly_once).
    ``transactional.id`` is ``chaos-<name>`` unless ``overrides`` sets it: a new instance of a producer under
    another name with the old one's id fences the old one. ``api_timeout_s``: the timeout of each
    transactional call (``None``: the time profile's API timeout). ``crash_in_txn`` / ``freeze_in_txn``: the
    transaction (1 = the first) inside which the process SIGKILLs / SIGSTOPs itself, after the flush, before
    the commit; a frozen one waits for its parent's ``resume()``. Deliberate aborts: the transactions
    numbered in ``abort_txns``, and each other one with probability ``abort_rate`` (drawn from
    ``abort_seed`` and the transaction's number: the same seed aborts the same transactions), are aborted
    after their sends were flushed instead of committed.
    """

    def aborts(self, transaction: int) -> bool:
        """Whether ``transaction`` (1 = the first) is aborted on purpose."""
        if transaction in self.abort_txns:
            return True
        return (
            self.abort_rate > 0
            and random.Random(f"{self.abort_seed}/{transaction}").random() < self.abort_rate
        )

    rate: float | None = 100.0
    duration_s: float | None = 30.0
    txn_size: int = 10
    api_timeout_s: float | None = None
    crash_in_txn: int | None = None
    freeze_in_txn: int | None = None
    abort_rate: float = 0.0
    abort_txns: tuple[int, ...] = ()
    abort_seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        if type(self.txn_size) is not int or not 1 <= self.txn_size <= MAX_TXN_SIZE:
            raise ConfigError(
                f"{owner}.txn_size: expected 1..{MAX_TXN_SIZE} sends per transaction; got {self.txn_size!r}"
            )
        if self.api_timeout_s is not None and not self.api_timeout_s > 0:
            raise ConfigError(
                f"{owner}.api_timeout_s: expected seconds > 0, or None; got {self.api_timeout_s!r}"
            )
        transactions = math.ceil(self.count / self.txn_size) if self.count is not None else None
        for field, _, _ in HALTS:
            number = getattr(self, field)
            if number is None:
                continue
            if type(number) is not int or number < 1:
                raise ConfigError(
                    f"{owner}.{field}: expected a transaction number >= 1 (1 = the first), or None; "
                    f"got {number!r}"
                )
            if transactions is not None and number > transactions:
                raise ConfigError(
                    f"{owner}.{field}={number}: count={self.count} in transactions of txn_size="
                    f"{self.txn_size} makes only {transactions}; lower {field} or raise count"
                )
        if type(self.abort_rate) not in (int, float) or not 0.0 <= self.abort_rate < 1.0:
            raise ConfigError(
                f"{owner}.abort_rate: expected the share of transactions to abort on purpose, 0 <= rate < 1; "
                f"got {self.abort_rate!r}"
            )
        txns = tuple(self.abort_txns) if isinstance(self.abort_txns, (list, tuple)) else None
        if txns is None or not all(type(n) is int and n >= 1 for n in txns):
            raise ConfigError(
                f"{owner}.abort_txns: expected transaction numbers >= 1 (1 = the first) to abort on purpose; "
                f"got {self.abort_txns!r}"
            )
        object.__setattr__(self, "abort_txns", txns)
        if type(self.abort_seed) is not int:
            raise ConfigError(f"{owner}.abort_seed: expected an int; got {self.abort_seed!r}")
        if self.crash_in_txn is not None and self.crash_in_txn == self.freeze_in_txn:
            raise ConfigError(
                f"{owner}: crash_in_txn and freeze_in_txn both name transaction {self.crash_in_txn}; "
                "a process is either killed or frozen there: set one, or freeze in an earlier transaction"
            )

    def client_config(self, context: RunContext) -> ClientConfig:
        """The producer's effective configuration in ``context`` (with its ``transactional.id``)."""
        client = context.client
        if not client.transactional:
            raise ConfigError(
                f"{type(self).__name__} {self.name}: the client profile {client.name!r} is not "
                f"transactional (guarantee {client.guarantee}); run it with a transactional one: a scenario "
                "with guarantee exactly_once (e.g. client=TRANSACTIONAL), or "
                "dataclasses.replace(context, client=TRANSACTIONAL)"
            )
        return super().client_config(context)


@dataclass(frozen=True)
class TxnProducerStats:
    """What one transactional producer did: transactions begun, committed and aborted, and the name of the
    error that ended it (``None``: it ran to its count, duration or stop)."""

    transactions: int
    committed: int
    aborted: int
    error: str | None = None


def run_txn_producer(context: RunContext, spec: TxnProducerSpec, stop: threading.Event) -> TxnProducerStats:
    """Send ``spec``'s values in transactions until its count or duration is reached, ``stop`` is set (the
    open transaction is committed first) or an error ends it (see the module docstring)."""
    client = spec.client_config(context)
    tid = str(client.settings["transactional.id"])
    timeout = spec.api_timeout_s or context.time.api_timeout_s
    logs = ClientLogBridge(context.sink, context.run_id, spec.name)
    sends = SendRecorder(
        context, spec.name, spec.topic or context.topic, spec.keys, shape=spec.shape(context)
    )
    marker = TxnMarkers(context.sink, context.run_id, spec.name, tid)
    producer = Producer({**client.settings, **logs.callbacks()})
    begun = committed = aborted = 0
    error: str | None = None
    try:
        init_transactions(producer, timeout, context.sink, context.run_id, spec.name, tid)
        pace = Pacer(spec, stop)
        while pace.ready(producer):
            try:
                producer.begin_transaction()
            except KafkaException as exc:
                marker("begin", "fail", exc=exc)
                error = error_name(exc)
                break
            marker("begin")
            begun += 1
            value_ids: list[str] = []
            while len(value_ids) < spec.txn_size and pace.ready(producer):
                value_ids.append(sends.send(producer, pace.seq))
                pace.sent(producer)
            producer.flush(spec.flush_timeout_s)  # every send of the transaction reported: in the log
            _halt_if_asked(context, spec, begun, len(value_ids))
            try:
                if spec.aborts(begun):
                    _abort_on_purpose(context, spec, producer, timeout, marker, begun, value_ids)
                    aborted += 1
                elif end_transaction(producer, timeout, marker, value_ids):
                    committed += 1
                else:
                    aborted += 1
            except WorkloadError as exc:  # recorded as a commit of outcome info
                error = error_name(exc.__cause__ or exc)
                break
            except KafkaException as exc:  # from abort_transaction(): the abort was not confirmed
                marker("abort", "info", value_ids, exc=exc)
                error = error_name(exc)
                break
    finally:
        sends.close(producer, spec.flush_timeout_s)
        logs.detach()
    return TxnProducerStats(begun, committed, aborted, error)


def _halt_if_asked(context: RunContext, spec: TxnProducerSpec, transaction: int, sent: int) -> None:
    """SIGKILL or SIGSTOP this process inside ``transaction`` if the spec asks, announced first."""
    for field, signum, facility in HALTS:
        if getattr(spec, field) != transaction:
            continue
        what = "SIGKILL" if signum == signal.SIGKILL else "SIGSTOP (until the parent resumes it)"
        notice(
            context,
            spec.name,
            facility,
            f"{what} inside transaction {transaction}: its {sent} sends flushed, not committed",
        )
        _signal_self(signum)


def _abort_on_purpose(
    context: RunContext,
    spec: TxnProducerSpec,
    producer: Producer,
    timeout: float,
    marker: TxnMarkers,
    transaction: int,
    value_ids: list[str],
) -> None:
    """Abort ``transaction`` instead of committing it: announced (facility ``TXN_ABORT``), then an ``abort``
    marker listing its values. A failed abort raises (recorded by the caller as an ``abort`` of outcome
    ``info``)."""
    notice(
        context,
        spec.name,
        "TXN_ABORT",
        f"aborting transaction {transaction} on purpose: its {len(value_ids)} sends flushed",
    )
    producer.abort_transaction(timeout)
    marker("abort", "ok", value_ids)


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)


class TransactionalProducer(ChildProcess):
    """:func:`run_txn_producer` in a child process; its events come back over a pipe into the context's sink
    (:class:`~chaos.workload.consumer.ChildProcess`): ``stop()`` ends it gracefully (the open transaction is
    committed), ``crash()`` SIGKILLs it, ``pause()`` / ``resume()`` freeze and thaw it. A spec that does not
    fit the context's client profile raises here, in the parent."""

    module = "chaos.workload.txn_producer"

    def __init__(self, context: RunContext, spec: TxnProducerSpec) -> None:
        # refused in the parent, not in the child, which builds this very configuration (same spec, same
        # context): the run records it
        announce(context, spec.client_config(context))
        super().__init__(spec.name, child_payload(context, spec.to_data()), context.sink)
        self.spec = spec
        self.context = context


def main() -> int:
    return serve(lambda context, spec, stop: run_txn_producer(context, TxnProducerSpec.from_data(spec), stop))


if __name__ == "__main__":
    sys.exit(main())
