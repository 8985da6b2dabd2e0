"""The service spec's validation, and the service faults on a real child process (``sleep``, no Kafka)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from chaos.faults.base import FaultLog
from chaos.report.symptoms import parse_line
from chaos.service import (
    Binding,
    ServiceConfigError,
    ServiceCrash,
    ServiceInstance,
    ServicePause,
    ServiceSpec,
    ServiceStop,
    input_client,
)

BINDING = Binding("127.0.0.1:1", "in-t", "t", "g")
SLEEPER = [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"]


class FakeCluster:
    run_id = "c0"


def instance(tmp_path: Path, **spec: Any) -> ServiceInstance:
    made = ServiceSpec(SLEEPER, ready_pattern="ready", **spec)
    return ServiceInstance(made, 0, BINDING, tmp_path / "logs", FakeCluster(), "run-abcdef")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of command"),
        ({"command": ["x"], "image": "i"}, "exactly one of command"),
        ({"command": "python app.py"}, "list of arguments"),
        ({"command": ["x"], "instances": 4}, "1..3"),
        ({"command": ["x"], "id": "key"}, "header:chaos-id, value"),
        ({"command": ["x"], "env": {"A": "{bootstrap_servers}"}}, "unknown placeholder {bootstrap_servers}"),
        ({"command": ["x"], "env": {"1A": "x"}}, "not an environment variable name"),
        ({"command": ["x"], "env": {"CONFIG": "{properties}"}}, "properties= is empty"),
        ({"command": ["x"], "ready_pattern": "("}, "not a regular expression"),
        ({"image": "i", "cwd": "/"}, "drop cwd"),
        ({"command": ["x"], "name": "Bad Name"}, "lower-case"),
    ],
)
def test_spec_refuses(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ServiceConfigError, match=message.replace("{", r"\{").replace("(", r"\(")):
        ServiceSpec(**kwargs)


def test_spec_fills_its_placeholders(tmp_path: Path) -> None:
    spec = ServiceSpec(
        ["app"],
        env={
            "B": "{bootstrap}",
            "IO": "{input_topic}>{output_topic}",
            "G": "{group}-{instance}",
            "P": "{properties}",
        },
        properties={"bootstrap.servers": "{bootstrap}", "application.id": "{group}"},
    )
    assert spec == ServiceSpec(
        ["app"],
        env=[("B", "{bootstrap}"), ("IO", "{input_topic}>{output_topic}"), ("G", "{group}-{instance}"),
             ("P", "{properties}")],
        properties=[("bootstrap.servers", "{bootstrap}"), ("application.id", "{group}")],
    )  # fmt: skip
    env = BINDING.environment(spec, 2, tmp_path / "p.properties")
    assert env == {"B": "127.0.0.1:1", "IO": "in-t>t", "G": "g-2", "P": str(tmp_path / "p.properties")}
    assert BINDING.properties_text(spec, 0) == "bootstrap.servers=127.0.0.1:1\napplication.id=g\n"


def test_input_client_refuses_exactly_once() -> None:
    assert input_client("at_least_once").guarantee == "at_least_once"
    with pytest.raises(ServiceConfigError, match="judge"):
        input_client("exactly_once")


def test_crash_is_proven_and_healed_by_a_restart(tmp_path: Path) -> None:
    inst = instance(tmp_path).start()
    log = FaultLog()
    fault = ServiceCrash(FakeCluster(), inst, log=log)  # type: ignore[arg-type]
    first = inst.pid
    with fault:
        assert inst.state().status == "exited"
    assert fault.record is not None
    assert fault.record.effect is not None
    assert fault.record.effect.observed, fault.record.effect.evidence
    assert fault.record.target == "service-0"
    assert fault.record.brokers == ()
    assert inst.running
    assert inst.pid != first
    assert inst.starts == 2
    inst.close()
    assert inst.state().status == "exited"
    assert inst.log_path.read_text().count("ready") == 2


def test_pause_freezes_the_process_until_the_heal(tmp_path: Path) -> None:
    inst = instance(tmp_path).start()
    fault = ServicePause(FakeCluster(), inst, log=FaultLog())  # type: ignore[arg-type]
    with fault:
        assert inst.state().status == "stopped"
    assert fault.record is not None
    assert fault.record.effect is not None
    assert fault.record.effect.observed
    assert inst.state().status == "running"
    inst.close()


def test_stop_without_restart_leaves_it_down(tmp_path: Path) -> None:
    inst = instance(tmp_path).start()
    fault = ServiceStop(FakeCluster(), inst, grace_s=5, log=FaultLog(), restart=False)  # type: ignore[arg-type]
    with fault:
        pass
    assert fault.exit_code == -15
    assert fault.record is not None
    assert fault.record.effect is not None
    assert fault.record.effect.observed
    assert not inst.running


def test_each_output_line_is_stamped_with_its_time_as_a_brokers_line_is(tmp_path: Path) -> None:
    """The report reads a service's log beside the brokers' (its lines within seconds of a fault): each
    line carries its UTC time, Docker's format, which the log reader parses."""
    before = time.time()
    inst = instance(tmp_path).start()
    inst.close()
    after = time.time()
    lines = [line for line in inst.log_path.read_text().splitlines() if not line.startswith("---")]
    assert lines
    assert lines[0].endswith(" ready")
    stamped = [parse_line(line) for line in lines]
    assert all(ts is not None and before - 1 <= ts <= after + 1 for ts, _ in stamped), lines
    assert stamped[0][1] == "ready"
    assert "ready" in inst.output()  # the ready pattern still reads the stamped lines
