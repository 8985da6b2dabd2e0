"""A gate file's ``[service]`` table: the team's own service, run by the gate's service cases (SV1)
between an input topic the harness writes and the run's topic, which the audit reads.

The table holds the fields of :class:`chaos.service.ServiceSpec` (docs/your-service.md): ``command`` (with
``cwd``, relative to the gate file) or ``image``, ``env`` and ``properties`` (templates of the placeholders),
``instances``, ``id``, ``name``, ``ready_pattern``, ``ready_timeout_s``, ``stop_grace_s``. The spec checks
them; a refusal is reported with the table's file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from chaos.service import ServiceSpec
from chaos.service.spec import ServiceConfigError
from chaos.workload.clientconf import librdkafka_value

SERVICE_KEYS: Final[tuple[str, ...]] = (
    "command",
    "image",
    "cwd",
    "env",
    "properties",
    "instances",
    "id",
    "name",
    "ready_pattern",
    "ready_timeout_s",
    "stop_grace_s",
)
_STRINGS: Final = ("image", "cwd", "id", "name", "ready_pattern")
_SECONDS: Final = ("ready_timeout_s", "stop_grace_s")


@dataclass(frozen=True)
class GateService:
    """The team's service of a gate file: the checked :class:`~chaos.service.ServiceSpec` and where the
    table is (``path:line``)."""

    spec: ServiceSpec
    origin: str

    def describe(self) -> str:
        return self.spec.describe()

    def to_dict(self) -> dict[str, Any]:
        """What ``gate.json`` keeps of it: how it starts, how many run, and the names of the environment
        variables it is given (never their values: a team's may hold credentials)."""
        spec = self.spec
        return {
            "command": list(spec.command) if spec.command is not None else None,
            "image": spec.image,
            "instances": spec.instances,
            "id": spec.id,
            "env": [key for key, _ in spec.env],
        }


Problem = Callable[[tuple[str, ...], str], None]


def read_service(section: Mapping[str, Any], base: Path, problem: Problem, origin: str) -> GateService | None:
    """The ``[service]`` table (its unknown keys already reported), or ``None`` after reporting through
    ``problem(key parts, text)`` why it cannot run. ``base``: the gate file's directory (``cwd`` is relative
    to it)."""
    options: dict[str, Any] = {}
    command = section.get("command")
    if command is not None:
        if not isinstance(command, list) or not all(isinstance(a, str) for a in command):
            problem(
                ("service", "command"),
                f"expected a list of arguments such as ['{{python}}', 'app.py']; got {command!r}",
            )
            return None
        options["command"] = command
    for key in _STRINGS:
        if key in section:
            value = section[key]
            if not isinstance(value, str):
                problem(("service", key), f"expected a string; got {value!r}")
                return None
            options[key] = str(base / value) if key == "cwd" else value
    for key in ("env", "properties"):
        if key in section:
            table = section[key]
            if not isinstance(table, dict) or not all(
                isinstance(v, str | int | float | bool) and not isinstance(v, dict) for v in table.values()
            ):
                problem(("service", key), f"expected a table of names to strings; got {table!r}")
                return None
            options[key] = {str(k): librdkafka_value(v) for k, v in table.items()}
    if "instances" in section:
        options["instances"] = section["instances"]
    for key in _SECONDS:
        if key in section:
            value = section[key]
            if type(value) not in (int, float):
                problem(("service", key), f"expected seconds; got {value!r}")
                return None
            options[key] = float(value)
    try:
        spec = ServiceSpec(options.pop("command", None), **options)
    except ServiceConfigError as exc:
        problem(
            ("service",),
            re.sub(r"^ServiceSpec(\.|: )", lambda m: "service." if m[1] == "." else "", str(exc)),
        )
        return None
    return GateService(spec, origin)
