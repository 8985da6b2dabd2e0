"""A broker of the fake clusters the fault tests build: its id, its container's name, the container."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

C = TypeVar("C")


class FakeBroker(Generic[C]):
    """What a fault reads of a broker: its ``node_id``, ``name``, ``docker`` (the fake container), status."""

    def __init__(self, node_id: int, container: C) -> None:
        self.node_id = node_id
        self.name: str = getattr(container, "name", f"broker-{node_id}")
        self.docker = container

    def status(self) -> str:
        container: Any = self.docker
        return str(container.status)
