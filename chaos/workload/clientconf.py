"""librdkafka's own check of a client configuration: about a millisecond, no broker contacted.

:func:`construct` builds a ``confluent_kafka.Producer`` / ``Consumer`` from the settings plus a dummy
``bootstrap.servers`` and drops it unused (librdkafka connects only when a client is used), returning
librdkafka's refusal — an unknown key, an invalid value, a refused combination — and its CONFWARN lines.
:func:`refusals` pins a refusal on the keys at fault. Two callers share them: the gate's lint
(:mod:`chaos.gate.lint`, which explains each refusal) and the workload, where :func:`check_client_config`
refuses a scenario variant's settings when the scenario is defined and every configuration the run builds
for a client before that client starts (:mod:`chaos.workload.configs`): a misspelled key fails at once,
named, instead of as a timeout 30 s into the run.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from chaos.errors import ConfigError

Side = Literal["producer", "consumer"]


def librdkafka_value(value: object) -> str:
    """A TOML or Python value in librdkafka's string form (``True`` -> ``"true"``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise TypeError(f"expected a str, int, float or bool; got {value!r}")


DUMMY_BOOTSTRAP: Final = "127.0.0.1:9"
"""Never contacted: librdkafka connects only when a client is used, and the checked clients are not."""
CHECK_GROUP: Final = "chaos-config-check"
UNKNOWN_PROPERTY: Final = "No such configuration property"
COMBINATION: Final = "Failed to create"
"""How librdkafka starts a refusal of settings that are each valid but not together."""
OTHER_SIDE: Final = re.compile(r"property (\S+) is a (consumer|producer) property and will be ignored")

KNOWN_KEYS: Final = (
    "acks",
    "auto.commit.interval.ms",
    "auto.offset.reset",
    "batch.size",
    "bootstrap.servers",
    "client.id",
    "compression.type",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.idempotence",
    "fetch.min.bytes",
    "fetch.wait.max.ms",
    "group.id",
    "group.instance.id",
    "heartbeat.interval.ms",
    "isolation.level",
    "linger.ms",
    "max.in.flight.requests.per.connection",
    "max.partition.fetch.bytes",
    "max.poll.interval.ms",
    "message.timeout.ms",
    "partition.assignment.strategy",
    "partitioner",
    "reconnect.backoff.max.ms",
    "request.timeout.ms",
    "retries",
    "retry.backoff.max.ms",
    "retry.backoff.ms",
    "sasl.password",
    "sasl.username",
    "security.protocol",
    "session.timeout.ms",
    "socket.connection.setup.timeout.ms",
    "socket.timeout.ms",
    "ssl.ca.location",
    "transaction.timeout.ms",
    "transactional.id",
)
"""The settings a misspelled key is compared with (the lint adds librdkafka's aliases)."""


class ClientConfigError(ConfigError):
    """librdkafka refuses a client configuration; the message names each key and how to fix it."""


@dataclass(frozen=True)
class Refusals:
    """What librdkafka said about one side's settings.

    :param keys: each key refused on its own, with librdkafka's message (in the settings' order).
    :param combination: librdkafka's refusal of the other keys together, ``None`` when it accepts them.
    :param warnings: librdkafka's CONFWARN lines for the accepted keys.
    """

    keys: Mapping[str, str]
    combination: str | None
    warnings: tuple[str, ...]


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def construct(side: Side, conf: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """Build a client of ``side`` from ``conf``: librdkafka's refusal (None if accepted) and its CONFWARN
    lines. Nothing is contacted: the client is dropped without being used, flushed or closed."""
    from confluent_kafka import Consumer, KafkaException, Producer

    lines = _Lines()
    logger = logging.Logger("chaos.workload.clientconf")  # not registered: nothing reaches the root logger
    logger.addHandler(lines)
    full: dict[str, Any] = {**conf, "bootstrap.servers": DUMMY_BOOTSTRAP, "logger": logger}
    if side == "consumer":
        full.setdefault("group.id", CHECK_GROUP)
    client: Any
    try:
        client = Producer(full) if side == "producer" else Consumer(full)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        return (error.str() if hasattr(error, "str") else str(error)), []
    except (ValueError, TypeError) as exc:
        return str(exc), []
    client.poll(0)  # delivers the log lines of the construction
    del client
    return None, [line for line in lines.lines if line.startswith("CONFWARN")]


def librdkafka_refusal(side: Side, conf: Mapping[str, Any]) -> str | None:
    """librdkafka's message refusing ``conf`` for a client of ``side``; ``None`` when it accepts it."""
    return construct(side, conf)[0]


def _combination(message: str) -> bool:
    return message.startswith(COMBINATION)


def refusals(
    side: Side, conf: Mapping[str, Any], combination: Callable[[str], bool] = _combination
) -> Refusals:
    """Pin librdkafka's refusal of ``conf`` on its keys: one client for the whole; only when it is refused,
    one per key, then one for the keys accepted alone. A key refused alone with a message ``combination``
    recognises (e.g. ``max.poll.interval.ms`` below the default session timeout) is left to the
    combination: with the other keys it may be fine."""
    error, warnings = construct(side, conf)
    if error is None:
        return Refusals({}, None, tuple(warnings))
    bad: dict[str, str] = {}
    for key, value in conf.items():
        alone = librdkafka_refusal(side, {key: value})
        if alone is not None and not combination(alone):
            bad[key] = alone
    if bad:
        error, warnings = construct(side, {k: v for k, v in conf.items() if k not in bad})
    return Refusals(bad, error, tuple(warnings))


def suggestion(key: str, known: Iterable[str] = ()) -> str:
    """``"did you mean 'acks'? "`` for a near miss of a known setting, else ``""``."""
    close = difflib.get_close_matches(key, sorted({*KNOWN_KEYS, *known}), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def key_fix(key: str, message: str, known: Iterable[str] = ()) -> str:
    """What to do about ``key``, which librdkafka refused on its own with ``message``."""
    if UNKNOWN_PROPERTY in message:
        return (
            "librdkafka has no such setting (a typo, or a Java-only key): "
            f"{suggestion(key, known)}fix or remove it"
        )
    return "use a value librdkafka accepts (CONFIGURATION.md)"


def client_config_problems(side: Side, conf: Mapping[str, Any], *, combinations: bool = True) -> list[str]:
    """Every problem librdkafka finds in ``conf`` for a client of ``side``, each naming its key and the fix;
    ``[]`` when it accepts it. A key of the other side (which librdkafka would ignore) is a problem too.
    ``combinations=False`` leaves out refused combinations (settings that are each valid)."""
    found = refusals(side, conf)
    problems = [
        f"{side} setting {key}: librdkafka: {message}; {key_fix(key, message)}"  # no value: it may be secret
        for key, message in found.keys.items()
    ]
    if found.combination is not None and combinations:
        problems.append(f"{side} settings: librdkafka: {found.combination}; change the settings it names")
    for line in found.warnings:
        other = OTHER_SIDE.search(line)
        if other:
            key = _warned_key(side, conf, other.group(1))
            problems.append(
                f"{side} setting {key}: librdkafka: {line.split(']: ', 1)[-1]}; move it to the "
                f"{other.group(2)}'s settings, or remove it"
            )
    return problems


def _warned_key(side: Side, conf: Mapping[str, Any], name: str) -> str:
    """The key of ``conf`` a warning names as ``name`` (librdkafka names ``acks`` request.required.acks)."""
    if name in conf:
        return name
    said = f"property {name} is"
    return next((k for k, v in conf.items() if any(said in w for w in construct(side, {k: v})[1])), name)


def check_client_config(
    side: Side, conf: Mapping[str, Any], owner: str, *, combinations: bool = True
) -> None:
    """Raise :class:`ClientConfigError` (``owner: problem; problem``) unless librdkafka accepts ``conf``."""
    problems = client_config_problems(side, conf, combinations=combinations)
    if problems:
        raise ClientConfigError(f"{owner}: " + "; ".join(problems))
