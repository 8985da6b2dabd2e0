"""The steady workload several cases run under their fault: the topic's leaders and ISR introspected, one
group member consuming, one producer at a fixed rate, and the first second's acks waited for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.scenario import views

if TYPE_CHECKING:
    from chaos.scenario.runner import ScenarioRun
    from chaos.workload import AnyProducer


def steady_load(
    run: ScenarioRun,
    *,
    rate: float,
    duration_s: float,
    flush_timeout_s: float,
    batch_size: int = 100,
    warm_up_s: float = 30.0,
) -> AnyProducer:
    """Start it on the run's topic and return the producer once ``rate`` values (one second's worth) are
    acknowledged and delivered to the group; the run stops the member and the producer at its end.

    Delivered means below the high watermark, i.e. on every ISR replica: the followers of a topic created
    a moment ago are replicating before the case's fault hits. (An acks=0 producer's acks say nothing about
    that: make chaos once cut L1's leader 1 s after the topic was created, before its followers had fetched
    anything, and every value of that partition was lost — not only those sent after the cut.)"""
    run.introspect(interval_s=0.5)
    run.member("consumer-0", batch_size=batch_size)
    producer = run.producer(rate=rate, duration_s=duration_s, flush_timeout_s=flush_timeout_s)
    run.wait_for("warm-up acks", lambda ev: len(views.acked_ids(ev)) >= rate, warm_up_s)
    run.wait_for(
        "warm-up values replicated (delivered below the high watermark)",
        lambda ev: len(views.delivered_ids(ev)) >= rate,
        warm_up_s,
    )
    return producer
