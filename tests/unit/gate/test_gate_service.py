"""A gate file's ``[service]`` table: the team's own service, checked when the file is read, run by the
service cases, and judged by the lint on the topic's settings only."""

from __future__ import annotations

import sys
from pathlib import Path
from textwrap import dedent
from typing import Final

import pytest

from chaos.gate.cases import SERVICE_CASES, default_cases, gate_cases, outage_cases, plan_cases
from chaos.gate.gatefile import GateFile, GateFileError, load_gate
from chaos.gate.lint import RULES, derive, lint_gate, rules_for
from chaos.service import ServiceSpec
from chaos.service.spec import ServiceConfigError
from tests.unit.gate.test_gate_file import problems, write

EXAMPLES: Final = Path(__file__).resolve().parents[3] / "examples"
CATALOG: Final = ("PB1", "ISR2", "L2", "L6", "D1", "MPI1", "O6", "SV1")


def service_gate(tmp_path: Path, more: str) -> GateFile:
    """A gate file claiming at_least_once whose service is ``{python} app.py``, then ``more``."""
    head = 'guarantee = "at_least_once"\n[service]\ncommand = ["{python}", "app.py"]\n'
    return load_gate(write(tmp_path, head + dedent(more).lstrip()))


def test_the_streams_example_is_a_service_gate_without_a_producer() -> None:
    gate = load_gate(EXAMPLES / "gate-service.toml")
    assert gate.service is not None
    spec = gate.service.spec
    assert spec.command == ("{python}", "-m", "chaos.service.examples", "run", "streams")
    assert spec.argv()[0] == sys.executable
    assert (spec.instances, spec.name, spec.ready_pattern) == (2, "streams", "-> RUNNING")
    assert dict(spec.env)["PROCESSING_GUARANTEE"] == "exactly_once_v2"
    assert gate.producer.settings == ()
    assert default_cases(gate) == SERVICE_CASES
    assert gate_cases(gate, CATALOG) == ("SV1",)
    # the service's transactions are inside it: no producer rule judges exactly_once by the empty [producer]
    _, result = lint_gate(gate)
    assert result.kept, [f.rule.id for f in result.violations]
    assert gate.service.to_dict()["env"][:3] == ["BOOTSTRAP_SERVERS", "INPUT_TOPIC", "OUTPUT_TOPIC"]


def test_with_a_service_the_lint_keeps_only_the_topics_rules(tmp_path: Path) -> None:
    gate = service_gate(
        tmp_path,
        """
        [producer.settings]
        acks = "1"
        [topic]
        replication_factor = 3
        "min.insync.replicas" = 2
        "unclean.leader.election.enable" = true
        "retention.ms" = 2000
        """,
    )
    kept = {rule.id for rule in rules_for(gate)}
    assert kept == {
        "unclean_election",
        "retention_shorter_than_outage",
        "compaction_latest_value_only",
        "no_spare_replica",
    }
    assert len(kept) < len(RULES)
    found = {f.rule.id for f in derive(gate).findings}
    assert found == {"unclean_election", "retention_shorter_than_outage"}  # acks=1 is the harness's writer
    assert outage_cases(gate) == ("SV1",)  # the service case's outage is what retention is judged against
    retention = next(f for f in derive(gate).findings if f.rule.id == "retention_shorter_than_outage")
    assert retention.rule.cases == ("SV1",)


def test_a_service_case_needs_a_service_table() -> None:
    gate = load_gate(EXAMPLES / "gate-strong.toml")
    assert "SV1" not in gate_cases(gate, CATALOG)
    plan = plan_cases(gate, CATALOG, cases=("PB1",))
    assert plan.run == ("PB1",)
    with pytest.raises(GateFileError, match=r"SV1 needs the team's service \(\[service\]\)"):
        plan_cases(gate, CATALOG, cases=("SV1",))


def test_the_cwd_is_relative_to_the_gate_file(tmp_path: Path) -> None:
    (tmp_path / "svc").mkdir()
    gate = service_gate(
        tmp_path,
        """
        cwd = "svc"
        instances = 3
        id = "value"
        stop_grace_s = 5
        [service.env]
        KAFKA = "{bootstrap}"
        RETRIES = 3
        """,
    )
    assert gate.service is not None
    assert gate.service.spec.cwd == tmp_path / "svc"
    assert gate.service.spec.env == (("KAFKA", "{bootstrap}"), ("RETRIES", "3"))
    assert (gate.service.spec.instances, gate.service.spec.id, gate.service.spec.stop_grace_s) == (
        3,
        "value",
        5.0,
    )


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('command = ["app"]\nimage = "our/app:ci"', "give exactly one of command"),
        ('command = ["app"]\ninstances = 4', "service.instances: expected 1..3"),
        ('command = "java -jar app.jar"', "command: expected a list of arguments"),
        ('command = ["{java}", "app.jar"]', "unknown placeholder {java}"),
        ('command = ["app"]\ncwd = "nowhere"', "is not a directory"),
        ('command = ["app"]\nenv = { KAFKA = "{brokers}" }', "unknown placeholder {brokers}"),
        ('command = ["app"]\nready_timeout_s = "90"', "ready_timeout_s: expected seconds"),
        ('command = ["app"]\nreplicas = 2', "replicas"),
    ],
)
def test_a_bad_service_table_names_its_line_and_the_fix(tmp_path: Path, table: str, expected: str) -> None:
    path = write(tmp_path, f'guarantee = "at_least_once"\n[service]\n{table}\n')
    text = problems(path)
    assert expected in text
    assert f"{path}:2" in text or f"{path}:3" in text or f"{path}:4" in text


def test_a_gate_file_needs_a_producer_or_a_service(tmp_path: Path) -> None:
    text = problems(write(tmp_path, 'guarantee = "at_least_once"\n'))
    assert "producer: missing; give the producer's settings under [producer.settings] or a file" in text
    assert "or the team's service under [service]" in text


def test_python_in_a_command_is_the_harness_interpreter_and_nothing_else_is_filled() -> None:
    spec = ServiceSpec(["{python}", "-c", "print('{{x}}')"])
    assert spec.argv() == [sys.executable, "-c", "print('{x}')"]
    with pytest.raises(ServiceConfigError, match=r"command\[1\]: unknown placeholder \{bootstrap\}"):
        ServiceSpec(["app", "{bootstrap}"])
