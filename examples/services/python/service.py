"""A consume-transform-produce service on confluent-kafka: reads INPUT_TOPIC, writes OUTPUT_TOPIC.

Each batch of records is copied — value, key and headers — to the output, the producer flushed, and only
then are the input offsets committed (``COMMIT_ORDER=after``, the default): at-least-once, a crash between
the flush and the commit writes the batch again after the restart.

``COMMIT_ORDER=before`` is the broken variant: it commits the batch's offsets first and produces after, so a
crash between the two loses the batch — its inputs are committed, never written. ``PROCESS_MS`` (default 0)
is the time each record takes to process, between the commit and the produce in the broken variant.

Environment: BOOTSTRAP_SERVERS, INPUT_TOPIC, OUTPUT_TOPIC, GROUP_ID, COMMIT_ORDER, PROCESS_MS,
SESSION_TIMEOUT_MS, MAX_POLL_INTERVAL_MS.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer

running = True


def _stop(signum: int, frame: object) -> None:
    global running
    running = False


def commit(consumer: Consumer) -> None:
    """Commit the consumed offsets; a commit refused after a rebalance (this instance was evicted, say
    frozen past max.poll.interval.ms) is logged: the partitions' new owner reprocesses the batch."""
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        print(f"commit failed: {exc}", flush=True)


def main() -> int:
    env = os.environ
    order = env.get("COMMIT_ORDER", "after")
    if order not in ("after", "before"):
        print(f"COMMIT_ORDER: expected after or before; got {order!r}", file=sys.stderr)
        return 2
    process_s = int(env.get("PROCESS_MS", "0")) / 1000
    consumer = Consumer(
        {
            "bootstrap.servers": env["BOOTSTRAP_SERVERS"],
            "group.id": env["GROUP_ID"],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": int(env.get("SESSION_TIMEOUT_MS", "10000")),
            "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": int(env.get("MAX_POLL_INTERVAL_MS", "60000")),
        }
    )
    producer = Producer(
        {"bootstrap.servers": env["BOOTSTRAP_SERVERS"], "enable.idempotence": True, "linger.ms": 5}
    )
    output = env["OUTPUT_TOPIC"]
    consumer.subscribe([env["INPUT_TOPIC"]], on_assign=lambda c, p: print(f"assigned {len(p)}", flush=True))
    signal.signal(signal.SIGTERM, _stop)
    print(f"service consuming {env['INPUT_TOPIC']} -> {output}, commit {order} producing", flush=True)
    copied = 0
    while running:
        batch = [m for m in consumer.consume(100, 0.5) if m.error() is None]
        if not batch:
            continue
        if order == "before":
            commit(consumer)
        for msg in batch:
            if process_s:
                time.sleep(process_s)
            producer.produce(output, value=msg.value(), key=msg.key(), headers=msg.headers())
            producer.poll(0)
        if producer.flush(30) != 0:
            raise KafkaException("records left unsent after 30 s")
        if order == "after":
            commit(consumer)
        copied += len(batch)
    print(f"service stopping after {copied} records", flush=True)
    producer.flush(10)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
