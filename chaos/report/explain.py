"""One sentence per anomaly, for readers who were not in the test run, and generic remediation hints."""

from __future__ import annotations

from typing import Final

ANOMALY_TEXT: Final[dict[str, str]] = {
    "lost_acked": "A write the broker acknowledged is not in the topic: the client was told it was safe and "
    "it is gone.",
    "lost_indeterminate": "A write whose outcome the client never learned (e.g. timed out) is not in the "
    "topic; this is not proof of loss and never fails a verdict.",
    "unseen_by_group": "A record that is in the topic was never delivered to the consumer group.",
    "expired_unread": "The topic's retention (or a DeleteRecords call) removed an acknowledged record before "
    "the consumer group read it: no broker lost it, but the group never processed it.",
    "duplicate_in_log": "The same value was written at two or more offsets: a retry appended it again.",
    "duplicate_delivery_after_rebalance": "The group received a value again after a rebalance, because "
    "offsets committed before the rebalance lagged what had been processed.",
    "duplicate_delivery_other": "The group received a value again without a rebalance in between, e.g. "
    "after a commit that did not take.",
    "poll_skip": "A consumer jumped over records it should have read next: a record visible at its "
    "isolation level lies between two of its successive deliveries of a partition, with no rebalance or "
    "seek in between (Jepsen: poll-skip).",
    "nonmonotonic_poll": "A consumer went back (or stood still) in a partition: a delivery at or below the "
    "offset of its previous one, with no rebalance or seek in between (Jepsen: nonmonotonic-poll).",
    "reordered": "A producer's values for one key appear in the partition out of the order they were sent.",
    "nonmonotonic_send": "A producer's acknowledged offsets in one partition went back: a later send was "
    "acked at or below an earlier one's offset (Jepsen: nonmonotonic-send).",
    "inconsistent_offsets": "One partition offset was observed holding two different values by different "
    "readers.",
    "aborted_read": "A reader saw a value whose send failed or whose transaction was aborted.",
    "precommitted_read": "A read_committed reader saw a transactional record before its producer had even "
    "asked to commit the transaction (Jepsen: precommitted-read).",
    "unexpected": "The topic holds a record this run never sent (or a foreign payload).",
}
"""Anomaly name -> one plain sentence (definitions: docs/audit.md)."""

ANOMALY_HINTS: Final[dict[str, str]] = {
    "lost_acked": "Use acks=all with min.insync.replicas >= 2 on a replication factor >= 3 topic, and keep "
    "unclean.leader.election.enable=false.",
    "unseen_by_group": "Commit offsets only after processing (commit_after), and check that the group "
    "resumes every partition after a rebalance.",
    "expired_unread": "Keep retention.ms (and retention.bytes) longer than the longest consumer outage you "
    "plan for, or give the group the capacity to stay within retention; alert on consumer lag in time, not "
    "only in records.",
    "duplicate_in_log": "Enable idempotence (enable.idempotence=true) so retries cannot append a value "
    "twice.",
    "duplicate_delivery_after_rebalance": "Commit in on_revoke / before giving up partitions, or make "
    "processing idempotent; exactly-once needs transactions with read_committed consumers.",
    "duplicate_delivery_other": "Check the commit results in the history: failed or timed-out commits make "
    "the group read again from the last committed offset.",
    "poll_skip": "Check what moved the consumer: an offset reset (auto.offset.reset after an out-of-range "
    "fetch or a truncation), or a seek the application did not record; keep unclean election off.",
    "nonmonotonic_poll": "Check for unrecorded seeks or offset resets (auto.offset.reset=earliest after an "
    "out-of-range fetch), and record every rebalance callback.",
    "reordered": "Enable idempotence, or limit max.in.flight.requests.per.connection to 1 when retries are "
    "on.",
    "nonmonotonic_send": "Enable idempotence (enable.idempotence=true): only it keeps a producer's retried "
    "batches in order within a partition.",
    "inconsistent_offsets": "This points at truncation after an unclean leader election or a log "
    "divergence: keep unclean.leader.election.enable=false and min.insync.replicas >= 2.",
    "aborted_read": "Consumers of transactional topics must use isolation.level=read_committed.",
    "precommitted_read": "The broker let a read_committed reader past an open transaction (the last stable "
    "offset): report it with the history; no client setting fixes it.",
    "unexpected": "Another writer shares the topic, or the run reused a topic: use a fresh topic per run.",
}
"""Anomaly name -> a generic remediation hint (the scenario's catalog hints come first)."""


def explain(name: str) -> str:
    """The one-sentence explanation of an anomaly (the name itself when unknown)."""
    return ANOMALY_TEXT.get(name, name.replace("_", " "))


ANOMALY_NOUN: Final[dict[str, tuple[str, str]]] = {
    "lost_acked": ("acknowledged write lost", "acknowledged writes lost"),
    "lost_indeterminate": ("write of unknown outcome missing", "writes of unknown outcome missing"),
    "unseen_by_group": ("record never delivered to the group", "records never delivered to the group"),
    "expired_unread": (
        "record expired before the group read it",
        "records expired before the group read them",
    ),
    "duplicate_in_log": ("value written twice", "values written twice"),
    "duplicate_delivery_after_rebalance": (
        "value redelivered after a rebalance",
        "values redelivered after a rebalance",
    ),
    "duplicate_delivery_other": (
        "value redelivered without a rebalance",
        "values redelivered without a rebalance",
    ),
    "poll_skip": ("record a consumer skipped", "records a consumer skipped"),
    "nonmonotonic_poll": ("consumer step backwards", "consumer steps backwards"),
    "reordered": ("value out of its key's order", "values out of their key's order"),
    "nonmonotonic_send": ("acknowledgement at a lower offset", "acknowledgements at lower offsets"),
    "inconsistent_offsets": ("offset holding two values", "offsets holding two values"),
    "aborted_read": ("read of an aborted or failed write", "reads of aborted or failed writes"),
    "precommitted_read": ("read before its transaction's commit", "reads before their transaction's commit"),
    "unexpected": ("record this run never sent", "records this run never sent"),
}
"""Anomaly name -> what one instance is and what several are, in words (the story's sentences)."""

ANOMALY_TIME: Final[dict[str, str]] = {
    "lost_acked": "acknowledged",
    "expired_unread": "acknowledged",
    "nonmonotonic_send": "acknowledged",
    "duplicate_delivery_after_rebalance": "delivered",
    "duplicate_delivery_other": "delivered",
    "poll_skip": "delivered",
    "nonmonotonic_poll": "delivered",
    "precommitted_read": "delivered",
}
"""Anomaly name -> what its examples' time is (docs/audit.md); every other anomaly's is the send."""

GUARANTEE_PROMISE: Final[dict[str, str]] = {
    "at_most_once": "never to write or deliver a value twice, at the price of losing some",
    "at_least_once": "that every acknowledged write stays in the topic and reaches the consumer group at "
    "least once (duplicates allowed)",
    "idempotent": "that every acknowledged write stays in the topic exactly once and in each producer's "
    "order (the group may still redeliver after a rebalance)",
    "exactly_once": "that every acknowledged write is in the topic and processed exactly once, aborted "
    "transactions never read",
}
"""Guarantee -> what it promises, as the object of "promised"."""


def noun(name: str, count: int) -> str:
    """``61 acknowledged writes lost`` (the anomaly's name itself when unknown)."""
    one, many = ANOMALY_NOUN.get(name, (name.replace("_", " "), name.replace("_", " ")))
    return f"{count:,} {one if count == 1 else many}"
