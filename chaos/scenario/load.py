"""The steady workload several cases run under their fault: the topic's leaders and ISR introspected, one
group member consuming, one producer at a fixed rate, and the first second's acks waited for."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.scenario import views

if TYPE_CHECKING:
    from chaos.scenario.runner import ScenarioRun
    from chaos.workload import ProducerWorker


def steady_load(
    run: ScenarioRun,
    *,
    rate: float,
    duration_s: float,
    flush_timeout_s: float,
    batch_size: int = 100,
    warm_up_s: float = 30.0,
) -> ProducerWorker:
    """Start it on the run's topic and return the producer once ``rate`` values (one second's worth) are
    acknowledged; the run stops the member and the producer at its end."""
    run.introspect(interval_s=0.5)
    run.member("consumer-0", batch_size=batch_size)
    producer = run.producer(rate=rate, duration_s=duration_s, flush_timeout_s=flush_timeout_s)
    run.wait_for("warm-up acks", lambda ev: len(views.acked_ids(ev)) >= rate, warm_up_s)
    return producer
