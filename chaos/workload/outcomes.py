"""Classify a producer delivery report as ok / fail / info (Jepsen's ok, definitely-not-written, unknown).

``fail`` is claimed only when the error proves the message is not in the log; anything that could have been
written is ``info``. docs/workload.md gives the reasoning per code. Unknown codes are ``info``: a wrong
``fail`` would let the audit call a present record "unexpected", a wrong ``info`` only loses precision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

# Deterministic rejections: validation of the request or the record that every attempt would fail the same
# way, or a local error raised before the message ever left the client. Never written.
DEFINITE_FAIL: Final = frozenset(
    {
        "MSG_SIZE_TOO_LARGE",  # librdkafka uses code 10 for its local size check too
        "RECORD_LIST_TOO_LARGE",
        "INVALID_MSG",  # CORRUPT_MESSAGE (2): CRC check failed on the broker, before the append
        "INVALID_RECORD",
        "INVALID_REQUIRED_ACKS",
        "INVALID_TIMESTAMP",
        "TOPIC_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "POLICY_VIOLATION",
        "UNSUPPORTED_FOR_MESSAGE_FORMAT",
        "UNSUPPORTED_VERSION",
        "_INVALID_ARG",
        "_QUEUE_FULL",  # the harness gave up enqueueing: produce() never accepted the message
        "_KEY_SERIALIZATION",
        "_VALUE_SERIALIZATION",
    }
)

# The last attempt was rejected before the broker appended it. That proves "not written" only if there
# was no earlier attempt: with retries, an earlier attempt may have timed out in flight after an append,
# and librdkafka itself keeps such a message "possibly persisted" (rdkafka_msg.c: "Don't downgrade a
# message from any form of PERSISTED to NOT_PERSISTED"). confluent-kafka does not expose that status.
REJECTED_LAST_ATTEMPT: Final = frozenset(
    {
        "NOT_ENOUGH_REPLICAS",
        "NOT_LEADER_FOR_PARTITION",
        "LEADER_NOT_AVAILABLE",
        "UNKNOWN_TOPIC_OR_PART",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "_UNKNOWN_TOPIC",
        "_UNKNOWN_PARTITION",
        "_PURGE_QUEUE",  # purged from the queue: never sent, unless it sat there waiting for a retry
    }
)

# Explicitly unknown (documented in docs/workload.md); any code not listed above is treated the same.
KNOWN_UNKNOWN: Final = frozenset(
    {
        "_MSG_TIMED_OUT",  # may have been in flight when message.timeout.ms expired
        "_TIMED_OUT",
        "_TRANSPORT",
        "REQUEST_TIMED_OUT",  # acks=all: appended on the leader, replication did not finish in time
        "NETWORK_EXCEPTION",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",  # appended on the leader, then the ISR shrank
        "KAFKA_STORAGE_ERROR",
        "_PURGE_INFLIGHT",
        "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "UNKNOWN_PRODUCER_ID",
        "INVALID_PRODUCER_EPOCH",
        "DUPLICATE_SEQUENCE_NUMBER",
        "_FATAL",
        "_FENCED",
        "_GAPLESS_GUARANTEE",
        "_INCONSISTENT",
        "_STATE",
        "_ALL_BROKERS_DOWN",
        "_NO_DELIVERY_REPORT",  # harness: no report arrived before the producer was closed
    }
)


JAVA_ERROR_NAMES: Final = {
    "MESSAGE_TOO_LARGE": "MSG_SIZE_TOO_LARGE",
    "CORRUPT_MESSAGE": "INVALID_MSG",
    "NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION",
    "UNKNOWN_TOPIC_OR_PARTITION": "UNKNOWN_TOPIC_OR_PART",
}
"""The Java client's names (``Errors.name()``) of codes librdkafka names otherwise: a Java worker's error is
classified under librdkafka's name (the history keeps the Java one)."""

COMMIT_UNKNOWN: Final = frozenset(
    {
        "_TIMED_OUT",
        "_TRANSPORT",
        "REQUEST_TIMED_OUT",  # the Java client's TimeoutException
        "NETWORK_EXCEPTION",
        "InterruptException",  # a Java worker interrupted inside a commit it may have sent
    }
)
"""A synchronous commit that failed with one of these may still have reached the coordinator: ``info``
(unknown); any other error is the coordinator's answer: ``fail``."""


@dataclass(frozen=True)
class Classified:
    """A delivery error's verdict: ``fail`` (not written) or ``info`` (unknown), and why."""

    outcome: Literal["fail", "info"]
    reason: str


def classify_delivery_error(error: str, *, single_attempt: bool) -> Classified:
    """Classify a delivery-report error code name (``KafkaError.name()``).

    :param single_attempt: the producer makes one attempt per message (``retries=0``, not idempotent):
        see :attr:`ClientProfile.single_attempt <chaos.workload.configs.ClientProfile.single_attempt>`.
    """
    if error in DEFINITE_FAIL:
        return Classified("fail", "rejected deterministically before any append")
    if error in REJECTED_LAST_ATTEMPT:
        if single_attempt:
            return Classified("fail", "the only attempt was rejected before the append")
        return Classified(
            "info", "the last attempt was rejected, but an earlier attempt may have been appended"
        )
    if error in KNOWN_UNKNOWN:
        return Classified("info", "the message may have been appended")
    return Classified("info", "unclassified error: treated as unknown")


def classify_produce_exception(error: str) -> Classified:
    """Classify an exception raised synchronously by ``produce()``: the message was never enqueued."""
    return Classified("fail", f"produce() refused the message ({error}); it was never enqueued")
