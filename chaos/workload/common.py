"""Shared pieces of the workload: the event sink, client error/log callbacks, group metadata parsing, the
payload a child-process worker reads."""

from __future__ import annotations

import json
import logging
import struct
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from confluent_kafka import KafkaError, KafkaException

from chaos.errors import WorkloadError
from chaos.run.context import RunContext
from chaos.run.context import Sink as Sink  # re-exported: where workload events go
from chaos.run.events import VALUE_ID_HEADER, ClientLog, parse_value_id, syslog_level

CLIENT_FATAL: Final = "CLIENT_FATAL"
"""The facility of the ``client_log`` line recording a client's fatal error and what the worker did."""
CLIENT_RESTART: Final = "CLIENT_RESTART"
"""The facility of the line recording a worker restarted after an error that is not a fatal one."""
_CGMD_MAGIC: Final = b"CGMDv2:"
_ID_PREFIX_MAX: Final = 300  # the longest value id: two names of 128, two colons, a sequence number
_SYSLOG_FROM_PY: Final = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


def generation_of(consumer: Any) -> int | None:
    """The consumer's current group generation, or ``None`` if unknown.

    confluent-kafka exposes no generation accessor, but ``consumer_group_metadata()`` returns librdkafka's
    serialised ``rd_kafka_consumer_group_metadata_write`` buffer: ``b"CGMDv2:"``, the generation id as a
    native-endian int32, then the group id, member id… (rdkafka_cgrp.c). A format change yields ``None``.
    """
    try:
        blob = consumer.consumer_group_metadata()
    except (KafkaException, RuntimeError):
        return None
    if not isinstance(blob, bytes) or not blob.startswith(_CGMD_MAGIC) or len(blob) < len(_CGMD_MAGIC) + 4:
        return None
    (generation,) = struct.unpack_from("=i", blob, len(_CGMD_MAGIC))
    return int(generation) if generation >= 0 else None


def member_id_of(consumer: Any) -> str | None:
    """The coordinator-assigned member id, or ``None`` before the first join."""
    try:
        member = consumer.memberid()
    except (KafkaException, RuntimeError):
        return None
    return member or None


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The :class:`KafkaError` a KafkaException carries, else ``None``."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def error_name(exc: BaseException) -> str:
    """The code name of a KafkaException (``_TIMED_OUT``…), else the exception class name."""
    err = kafka_error(exc)
    return err.name() if err is not None else type(exc).__name__


def error_text(exc: BaseException) -> str:
    err = kafka_error(exc)
    return err.str() if err is not None else str(exc)


class ClientLogBridge(logging.Handler):
    """Turns a client's ``error_cb`` reports and librdkafka log lines into :class:`ClientLog` events.

    Pass :meth:`callbacks` into the client configuration. librdkafka's log lines arrive through the
    ``logger`` setting as ``logger.log(level, "%s [%s] %s", facility, client_name, text)``, served from
    the client's poll calls.
    """

    def __init__(self, sink: Sink, run_id: str, process: str, *, min_level: int = logging.INFO) -> None:
        super().__init__(level=min_level)
        self._sink = sink
        self._run_id = run_id
        self._process = process
        self._logger = logging.getLogger(f"chaos.workload.client.{process}.{id(self):x}")
        self._logger.propagate = False
        self._logger.setLevel(min_level)
        self._logger.addHandler(self)
        self._lock = threading.Lock()
        self.errors = 0

    def callbacks(self) -> dict[str, Any]:
        """``error_cb`` and ``logger`` entries for a client configuration."""
        return {"error_cb": self.on_error, "logger": self._logger}

    def on_error(self, err: KafkaError) -> None:
        with self._lock:
            self.errors += 1
        self._sink(
            ClientLog(
                run_id=self._run_id,
                process=self._process,
                level="error",
                message=err.str(),
                facility="ERROR_CB",
                error=err.name(),
                retriable=err.retriable(),
                fatal=err.fatal(),
            )
        )

    def emit(self, record: logging.LogRecord) -> None:
        try:
            args = record.args
            if isinstance(args, tuple) and len(args) == 3:
                facility, text = str(args[0]), str(args[2])
            else:
                facility, text = None, record.getMessage()
            level = syslog_level(_SYSLOG_FROM_PY.get(record.levelno, 6))
            self._sink(
                ClientLog(
                    run_id=self._run_id, process=self._process, level=level, message=text, facility=facility
                )
            )
        except Exception:  # a log handler must never raise into librdkafka's callback
            self.handleError(record)

    def detach(self) -> None:
        """Stop forwarding (call after the client is closed)."""
        self._logger.removeHandler(self)


def payload_value_id(raw: bytes | None) -> str | None:
    """The value id a record's payload starts with — the whole payload, or the id then ``|`` or a space
    and anything (a padded value) — or None when the payload is not one of ours."""
    if raw is None:
        return None
    head = raw[: _ID_PREFIX_MAX + 1]
    end = len(head)
    for sep in (b"|", b" "):
        cut = head.find(sep)
        if 0 <= cut < end:
            end = cut
    if end > _ID_PREFIX_MAX:
        return None
    try:
        text = head[:end].decode("utf-8")
        parse_value_id(text)
    except (UnicodeDecodeError, ValueError):
        return None
    return text


def header_value_id(headers: Sequence[tuple[str, bytes | str | None]] | None) -> str | None:
    """The value id in a record's :data:`~chaos.run.events.VALUE_ID_HEADER` header, or None."""
    for name, raw in reversed(headers or ()):  # the last one wins, as Java's lastHeader()
        if name != VALUE_ID_HEADER or raw is None:
            continue
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        try:
            parse_value_id(text)
        except ValueError:
            return None
        return text
    return None


def record_value_id(
    value: bytes | None, headers: Sequence[tuple[str, bytes | str | None]] | None
) -> str | None:
    """A record's value id: from its value as :func:`payload_value_id` reads it, or — a tombstone, whose
    value is null, or a value a service rewrote (docs/your-service.md) — from its
    :data:`~chaos.run.events.VALUE_ID_HEADER` header."""
    found = payload_value_id(value) if value is not None else None
    return found if found is not None else header_value_id(headers)


def message_value_id(msg: Any) -> str | None:
    """:func:`record_value_id` of a consumed ``confluent_kafka.Message`` (its headers read only when its
    value names no id)."""
    value = msg.value()
    found = payload_value_id(value) if value is not None else None
    return found if found is not None else header_value_id(msg.headers())


def member_fields(run_id: str, process: str, group: str, consumer: Any) -> dict[str, Any]:
    """The fields every group-member event carries, read from the live consumer."""
    return {
        "run_id": run_id,
        "process": process,
        "group": group,
        "member": member_id_of(consumer),
        "generation": generation_of(consumer),
    }


def child_payload(context: RunContext, spec: Mapping[str, Any]) -> str:
    """The one JSON line a child-process worker reads on stdin: the run's context and its own spec."""
    return json.dumps({"context": context.to_data(), "spec": dict(spec)}, separators=(",", ":"))


def read_child_payload(line: str, sink: Sink) -> tuple[RunContext, dict[str, Any]]:
    """The context (with ``sink``, the child's pipe) and the spec data of a :func:`child_payload` line."""
    try:
        data = json.loads(line)
        return RunContext.from_data(data["context"], sink), dict(data["spec"])
    except (ValueError, KeyError, TypeError) as exc:
        raise WorkloadError(f"child payload: expected child_payload() JSON on stdin ({exc})") from None


def is_fatal(exc: BaseException) -> bool:
    """Whether ``exc`` is a client's fatal error: the instance can do nothing more and must be replaced."""
    err = kafka_error(exc)
    return err is not None and bool(err.fatal())


def record_replaced(sink: Sink, run_id: str, process: str, exc: BaseException, message: str) -> None:
    """Record that ``process``'s client instance ended by ``exc`` and what the worker did about it: a
    ``critical`` line with facility :data:`CLIENT_FATAL` for a fatal client error, else a ``warning`` with
    :data:`CLIENT_RESTART`."""
    fatal = is_fatal(exc)
    sink(
        ClientLog(
            run_id=run_id,
            process=process,
            level="critical" if fatal else "warning",
            facility=CLIENT_FATAL if fatal else CLIENT_RESTART,
            error=error_name(exc),
            fatal=fatal,
            message=message,
        )
    )


def notice(context: RunContext, process: str, facility: str, message: str) -> None:
    """Announce a worker's own deliberate act (a resume, an abort, a halt) as a ``notice`` client log line."""
    context.sink(
        ClientLog(run_id=context.run_id, process=process, level="notice", facility=facility, message=message)
    )
