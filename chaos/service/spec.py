"""What a team's service is to the harness: how to start it, how many instances, what it is told.

A :class:`ServiceSpec` is frozen and checked when it is built: a wrong field raises a
:class:`ServiceConfigError` that names the field and what to write instead.
"""

from __future__ import annotations

import re
import string
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from chaos.errors import ConfigError

IdMode = Literal["header:chaos-id", "value"]
ID_MODES: Final = ("header:chaos-id", "value")
PLACEHOLDERS: Final = ("bootstrap", "input_topic", "output_topic", "group", "instance", "properties")
"""What a value of ``env`` or ``properties`` may name in braces: ``{bootstrap}`` the cluster's bootstrap
servers, ``{input_topic}``, ``{output_topic}`` (the run's topic, what the audit reads), ``{group}`` the
service's consumer group (or Streams application id), ``{instance}`` the instance's number (0, 1, 2) and
``{properties}`` the path of the ``.properties`` file written for the instance."""
COMMAND_PLACEHOLDERS: Final = ("python",)
"""What an argument of ``command`` may name in braces: ``{python}``, the interpreter the harness runs on (a
service written with confluent-kafka can run on the harness's own environment; a gate file cannot know its
path)."""
MAX_INSTANCES: Final = 3
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME: Final = re.compile(r"^[a-z][a-z0-9-]{0,30}$")


class ServiceConfigError(ConfigError):
    """A :class:`ServiceSpec` field is invalid; the message names the field and the accepted values."""


def _placeholders(text: str, where: str, allowed: tuple[str, ...] = PLACEHOLDERS) -> None:
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise ServiceConfigError(
            f"ServiceSpec.{where}: {text!r} is not a valid template ({exc}); "
            "write a literal brace twice: {{ or }}"
        ) from exc
    for name in fields:
        if name not in allowed:
            raise ServiceConfigError(
                f"ServiceSpec.{where}: unknown placeholder {{{name}}} in {text!r}; the harness fills "
                f"{', '.join('{' + p + '}' for p in allowed)}"
            )


def _pairs(value: Mapping[str, str] | Sequence[tuple[str, str]], where: str) -> tuple[tuple[str, str], ...]:
    items = tuple(value.items()) if isinstance(value, Mapping) else tuple(value)
    result: list[tuple[str, str]] = []
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            raise ServiceConfigError(f"ServiceSpec.{where}: expected names mapped to strings; got {item!r}")
        result.append(item)
    names = [n for n, _ in result]
    if len(set(names)) != len(names):
        raise ServiceConfigError(f"ServiceSpec.{where}: a name given twice in {names}")
    return tuple(result)


@dataclass(frozen=True, init=False)
class ServiceSpec:
    """A team's consume-transform-produce service, run between the run's input topic and its output topic.

    Exactly one of ``command`` (a child process on this host, started in ``cwd`` with this process's
    environment and ``env`` over it) and ``image`` (a container sharing the cluster's network namespace, so
    it reaches the brokers at the addresses they advertise; labelled like every container of the cluster,
    so the reaper removes it even after ``kill -9`` of the runner) with only ``env``.

    ``command`` may name ``{python}`` (:data:`COMMAND_PLACEHOLDERS`).

    :param env: the environment variables the service reads, each a template of :data:`PLACEHOLDERS`
        (``{"BOOTSTRAP_SERVERS": "{bootstrap}", "INPUT_TOPIC": "{input_topic}"}``).
    :param properties: a ``.properties`` file written for each instance (its path is ``{properties}``),
        each value a template as in ``env``; empty: none written.
    :param instances: how many instances run at once (1..3), ``{instance}`` telling them apart.
    :param id: how an output record names the input value it came from: ``header:chaos-id`` (the service
        copies the record's headers — Kafka Streams does through stateless operations) or ``value`` (the
        output value is, or starts with, the input value's id).
    :param input_topic: the input topic's name; ``None``: ``<run topic>-in``.
    :param group: the service's consumer group (or Streams ``application.id``); ``None``: ``svc-<run id>``.
    :param stop_grace_s: how long a graceful stop (SIGTERM, ``docker stop``) waits before SIGKILL.
    :param ready_pattern: a regular expression the service writes to its output once it consumes; the
        harness waits for it after each start (``None``: it does not wait).
    """

    command: tuple[str, ...] | None = None
    image: str | None = None
    cwd: Path | None = None
    env: tuple[tuple[str, str], ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    instances: int = 1
    id: IdMode = "header:chaos-id"
    input_topic: str | None = None
    group: str | None = None
    name: str = "service"
    stop_grace_s: float = 10.0
    ready_pattern: str | None = None
    ready_timeout_s: float = 60.0

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        image: str | None = None,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        properties: Mapping[str, str] | Sequence[tuple[str, str]] = (),
        instances: int = 1,
        id: IdMode = "header:chaos-id",
        input_topic: str | None = None,
        group: str | None = None,
        name: str = "service",
        stop_grace_s: float = 10.0,
        ready_pattern: str | None = None,
        ready_timeout_s: float = 60.0,
    ) -> None:
        setattr_ = object.__setattr__
        if (command is None) == (image is None):
            raise ServiceConfigError(
                "ServiceSpec: give exactly one of command=[...] (a process on this host) and image='...' "
                "(a container on the cluster's network)"
            )
        if command is not None and (
            isinstance(command, str) or not command or not all(isinstance(a, str) and a for a in command)
        ):
            raise ServiceConfigError(
                f"ServiceSpec.command: expected a non-empty list of arguments, e.g. "
                f"['python', 'service.py']; got {command!r}"
            )
        for number, argument in enumerate(command or ()):
            _placeholders(argument, f"command[{number}]", COMMAND_PLACEHOLDERS)
        if image is not None and (not isinstance(image, str) or not image.strip()):
            raise ServiceConfigError(f"ServiceSpec.image: expected an image reference; got {image!r}")
        if cwd is not None:
            if image is not None:
                raise ServiceConfigError(
                    "ServiceSpec.cwd: a container starts in its image's WORKDIR; drop cwd"
                )
            if not Path(cwd).is_dir():
                raise ServiceConfigError(f"ServiceSpec.cwd: {cwd} is not a directory")
        if type(instances) is not int or not 1 <= instances <= MAX_INSTANCES:
            raise ServiceConfigError(f"ServiceSpec.instances: expected 1..{MAX_INSTANCES}; got {instances!r}")
        if id not in ID_MODES:
            raise ServiceConfigError(f"ServiceSpec.id: expected one of {', '.join(ID_MODES)}; got {id!r}")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ServiceConfigError(
                f"ServiceSpec.name: expected lower-case letters, digits and '-' (<= 31), starting with a "
                f"letter; got {name!r}"
            )
        if not 0 < stop_grace_s <= 120:
            raise ServiceConfigError(f"ServiceSpec.stop_grace_s: expected 0 < s <= 120; got {stop_grace_s!r}")
        if not 0 < ready_timeout_s <= 600:
            raise ServiceConfigError(
                f"ServiceSpec.ready_timeout_s: expected 0 < s <= 600; got {ready_timeout_s!r}"
            )
        if ready_pattern is not None:
            try:
                re.compile(ready_pattern)
            except re.error as exc:
                raise ServiceConfigError(
                    f"ServiceSpec.ready_pattern: not a regular expression: {exc}"
                ) from exc
        env_pairs = _pairs(env, "env")
        for key, value in env_pairs:
            if not _ENV_NAME.match(key):
                raise ServiceConfigError(f"ServiceSpec.env: {key!r} is not an environment variable name")
            _placeholders(value, f"env[{key!r}]")
        property_pairs = _pairs(properties, "properties")
        for key, value in property_pairs:
            if not key or "=" in key or "\n" in key or "\n" in value:
                raise ServiceConfigError(f"ServiceSpec.properties: {key!r}={value!r} is not a property line")
            _placeholders(value, f"properties[{key!r}]")
        for topic_field, topic in (("input_topic", input_topic), ("group", group)):
            if topic is not None and not re.match(r"^[A-Za-z0-9._-]{1,200}$", topic):
                raise ServiceConfigError(f"ServiceSpec.{topic_field}: {topic!r} is not a valid Kafka name")
        if "{properties}" in "".join(v for _, v in env_pairs) and not property_pairs:
            raise ServiceConfigError(
                "ServiceSpec.env names {properties} but properties= is empty: give the properties to write"
            )
        setattr_(self, "command", tuple(command) if command is not None else None)
        setattr_(self, "image", image)
        setattr_(self, "cwd", Path(cwd) if cwd is not None else None)
        setattr_(self, "env", env_pairs)
        setattr_(self, "properties", property_pairs)
        setattr_(self, "instances", instances)
        setattr_(self, "id", id)
        setattr_(self, "input_topic", input_topic)
        setattr_(self, "group", group)
        setattr_(self, "name", name)
        setattr_(self, "stop_grace_s", float(stop_grace_s))
        setattr_(self, "ready_pattern", ready_pattern)
        setattr_(self, "ready_timeout_s", float(ready_timeout_s))

    @property
    def kind(self) -> Literal["process", "container"]:
        return "process" if self.command is not None else "container"

    def argv(self) -> list[str]:
        """``command`` with ``{python}`` filled (a literal brace is written twice)."""
        assert self.command is not None
        return [argument.format(python=sys.executable) for argument in self.command]

    def describe(self) -> str:
        how = " ".join(self.command) if self.command is not None else f"image {self.image}"
        return (
            f"{self.name}: {how} ({self.instances} instance{'s' if self.instances > 1 else ''}, id {self.id})"
        )


@dataclass(frozen=True)
class Binding:
    """The values the placeholders take for one run."""

    bootstrap: str
    input_topic: str
    output_topic: str
    group: str

    def fill(self, template: str, instance: int, properties: Path | None) -> str:
        return template.format(
            bootstrap=self.bootstrap,
            input_topic=self.input_topic,
            output_topic=self.output_topic,
            group=self.group,
            instance=instance,
            properties=str(properties) if properties is not None else "",
        )

    def environment(self, spec: ServiceSpec, instance: int, properties: Path | None) -> dict[str, str]:
        return {key: self.fill(value, instance, properties) for key, value in spec.env}

    def properties_text(self, spec: ServiceSpec, instance: int) -> str:
        lines = [f"{key}={self.fill(value, instance, None)}" for key, value in spec.properties]
        return "\n".join(lines) + "\n"
