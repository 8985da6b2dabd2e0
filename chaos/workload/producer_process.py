"""A producer in a child process: killable (SIGKILL), freezable (SIGSTOP / SIGCONT) and restartable from
an application checkpoint.

The child runs the run's producer loop (:class:`~chaos.workload.producer.SendRecorder`, paced like
:class:`~chaos.workload.producer.ProducerWorker`) and keeps a checkpoint of what the *application*
considers sent — ``checkpoint="ack"``: the sequence after the highest acknowledged value, ``"send"``: the
sequence after the last ``produce()`` call — in ``<run dir>/checkpoints/<name>.json`` (written atomically:
a temporary file renamed over it). A producer started again under the same name resumes its sequence at
the checkpoint: values sent after it are sent again, with the same value ids, by a new producer session
(a new producer id: idempotence does not span sessions), so the history shows both sends and the audit
judges what reached the log twice — the case "the app crashed after the broker appended, restarted and
resent from its own checkpoint". ``count`` bounds the sequence, not one session's sends.

Its events come back over a pipe into the run's sink (:class:`~chaos.workload.consumer.ChildProcess`):
``crash()`` SIGKILLs it (what it wrote to the pipe before stays), ``pause()`` / ``resume()`` freeze and thaw
it, ``stop()`` ends it gracefully (flush, then exit). With ``transactional.id`` in ``overrides`` a restart
fences the previous session; a transactional profile belongs to :mod:`chaos.workload.txn_producer`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from chaos.errors import ConfigError
from chaos.run.context import RunContext
from chaos.workload.common import ClientLogBridge, child_payload, notice
from chaos.workload.consumer import ChildProcess
from chaos.workload.effective import ClientConfig, announce
from chaos.workload.member_child import serve
from chaos.workload.producer import Pacer, ProducerSpec, SendRecorder, produce_paced

Checkpoint = Literal["ack", "send"]
CHECKPOINTS: Final = ("ack", "send")


@dataclass(frozen=True)
class ProcessProducerSpec(ProducerSpec):
    """:class:`ProducerSpec`'s sends in a child process that checkpoints what it considers sent
    (``checkpoint``: ``"ack"`` or ``"send"``, see the module docstring) and resumes there when started
    again."""

    checkpoint: Checkpoint = "ack"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.checkpoint not in CHECKPOINTS:
            raise ConfigError(
                f"{type(self).__name__}.checkpoint: expected 'ack' (the last acknowledged value) or 'send' "
                f"(the last produce() call); got {self.checkpoint!r}"
            )

    def client_config(self, context: RunContext) -> ClientConfig:
        if context.client.transactional and "transactional.id" not in dict(self.overrides):
            raise ConfigError(
                f"{type(self).__name__} {self.name}: the client profile {context.client.name!r} is "
                "transactional, and this producer runs no transactions: use run.txn_producer "
                "(chaos.workload.txn_producer) for transactions"
            )
        return super().client_config(context)


def checkpoint_path(context: RunContext, name: str) -> Path:
    """Where producer ``name`` keeps its checkpoint in the run's directory."""
    if context.run_dir is None:
        raise ConfigError(
            f"producer {name}: a checkpointed producer needs the run's directory (RunContext.run_dir)"
        )
    return context.run_dir / "checkpoints" / f"{name}.json"


def read_checkpoint(path: Path) -> int:
    """The sequence a producer resumes at: 0 when it has no checkpoint yet."""
    try:
        return int(json.loads(path.read_text(encoding="utf-8"))["next_seq"])
    except FileNotFoundError:
        return 0
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"unreadable producer checkpoint {path}: {exc}; delete it to start at 0") from exc


class _Checkpointer:
    """Keeps ``next_seq`` — one past the highest value the application considers sent — on disk."""

    def __init__(self, path: Path, start: int) -> None:
        self.path = path
        self.next_seq = start
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)

    def passed(self, seq: int) -> None:
        with self._lock:
            if seq + 1 <= self.next_seq:
                return
            self.next_seq = seq + 1
            temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps({"next_seq": self.next_seq}), encoding="utf-8")
            os.replace(temporary, self.path)


def run_process_producer(context: RunContext, spec: ProcessProducerSpec, stop: threading.Event) -> None:
    """The child's loop: resume at the checkpoint, send until the sequence reaches ``count`` (or the
    duration passes, or ``stop``), checkpointing as ``spec.checkpoint`` says; announced by a client log line
    (facility ``RESUME``) naming where it resumed."""
    path = checkpoint_path(context, spec.name)
    start = read_checkpoint(path)
    keeper = _Checkpointer(path, start)
    logs = ClientLogBridge(context.sink, context.run_id, spec.name)
    on_ack = keeper.passed if spec.checkpoint == "ack" else None
    sends = SendRecorder(
        context, spec.name, spec.topic or context.topic, spec.keys, on_ack, spec.shape(context)
    )
    config = {**spec.client_config(context).settings, **logs.callbacks()}
    notice(context, spec.name, "RESUME", f"starting at sequence {start} (checkpoint: last {spec.checkpoint})")
    try:
        produce_paced(
            context,
            config,
            sends,
            Pacer(spec, stop, start=start),
            lambda: spec.flush_timeout_s,
            keeper.passed if spec.checkpoint == "send" else None,
        )
    finally:
        logs.detach()


class ProcessProducer(ChildProcess):
    """:func:`run_process_producer` in a child process. ``start()`` again after it ended (or was killed)
    runs a new session that resumes at the checkpoint. A spec that does not fit the context's profile
    raises here, in the parent."""

    module = "chaos.workload.producer_process"

    def __init__(self, context: RunContext, spec: ProcessProducerSpec) -> None:
        checkpoint_path(context, spec.name)  # refused here without a run directory
        announce(context, spec.client_config(context))
        super().__init__(spec.name, child_payload(context, spec.to_data()), context.sink)
        self.spec = spec
        self.context = context

    def checkpoint(self) -> int:
        """The sequence the next session resumes at (0 before any)."""
        return read_checkpoint(checkpoint_path(self.context, self.spec.name))


def main() -> int:
    return serve(
        lambda context, spec, stop: run_process_producer(context, ProcessProducerSpec.from_data(spec), stop)
    )


if __name__ == "__main__":
    sys.exit(main())
