"""A team's service started for one run: its instances, topics, group, and how it is stopped."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.run.profiles import ClientProfile, custom_profile
from chaos.run.terms import Guarantee
from chaos.service.instance import ServiceError, ServiceInstance
from chaos.service.spec import Binding, ServiceConfigError, ServiceSpec

if TYPE_CHECKING:
    from chaos.cluster.cluster import KafkaCluster

INPUT_PRODUCER: dict[str, str | int | bool] = {
    "enable.idempotence": True,
    "acks": "all",
    "max.in.flight.requests.per.connection": 5,
}


def input_client(guarantee: Guarantee) -> ClientProfile:
    """The input producer's profile: an idempotent producer (nothing duplicated or reordered on the way in)
    whose values are judged by ``guarantee`` — what the *service* claims end to end (docs/your-service.md).
    ``exactly_once`` is refused: a profile claiming it is transactional, and the input is a plain producer
    (``role="input"``); leave ``client=`` out (the input is then judged ``idempotent``, which forbids loss
    and duplicates in the output) and judge the run's facts under ``exactly_once``."""
    if guarantee == "exactly_once":
        raise ServiceConfigError(
            "input_client('exactly_once'): a profile claiming exactly_once is transactional and the input "
            "producer is a plain one; leave client= out of run.producer(role='input') (judged idempotent) "
            "and judge the facts with chaos.audit.verdict.judge(facts, 'exactly_once', engine)"
        )
    return custom_profile(
        f"service_input_{guarantee}",
        guarantee,
        producer=INPUT_PRODUCER,
        description=f"idempotent producer of a service's input, judged {guarantee} end to end",
    )


class Service:
    """The instances of one :class:`ServiceSpec` in a run. :meth:`start` starts every instance;
    :meth:`close` stops them (gracefully, SIGKILL after the grace), keeps their output and removes their
    containers. ``note``: where the run's timeline hears of starts and stops."""

    def __init__(
        self,
        spec: ServiceSpec,
        binding: Binding,
        log_dir: Path,
        cluster: KafkaCluster,
        run_id: str,
        note: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.spec = spec
        self.binding = binding
        self.note = note
        self.instances = tuple(
            ServiceInstance(spec, i, binding, log_dir, cluster, run_id) for i in range(spec.instances)
        )
        self._closed = False

    @property
    def input_topic(self) -> str:
        return self.binding.input_topic

    @property
    def output_topic(self) -> str:
        return self.binding.output_topic

    @property
    def group(self) -> str:
        return self.binding.group

    def __getitem__(self, index: int) -> ServiceInstance:
        return self.instances[index]

    def start(self) -> Service:
        for instance in self.instances:
            instance.start()
            self.note(f"service {instance.name} started ({instance.state().detail})")
        return self

    def close(self) -> None:
        """Stop every instance and keep its output; the first error after trying all."""
        if self._closed:
            return
        self._closed = True
        errors: list[str] = []
        for instance in self.instances:
            try:
                code = instance.stop()
                self.note(f"service {instance.name} stopped (exit status {code})")
            except Exception as exc:
                errors.append(f"{instance.name}: {exc}")
            finally:
                with contextlib.suppress(Exception):
                    instance.close()
        if errors:
            raise ServiceError("could not stop the service cleanly: " + "; ".join(errors))
