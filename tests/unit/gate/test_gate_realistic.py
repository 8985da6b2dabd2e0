"""A team's real configuration (examples/gate-realistic.toml and its .properties files: brokers, SASL
credentials, client ids, compression, linger, batch size, delivery timeout, auto commit): the lint names
what breaks the claim, the full run adds the case that shows it, a claim the lint proves broken does not
pass, and the secret reaches none of the gate's outputs. No Docker: the cases' results are made up."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Final

import pytest

from chaos.gate import load_gate
from chaos.gate.cases import plan_cases
from chaos.gate.driver.session import GateSession
from chaos.gate.lint import derive
from chaos.gate.report import Attempt, CaseResult, ThresholdRow, read_gate, sentence, write_gate
from chaos.report.render import render_index
from chaos.scenario import discover

EXAMPLES: Final = Path(__file__).resolve().parents[3] / "examples"
GATE: Final = EXAMPLES / "gate-realistic.toml"
SECRET: Final = "pA55w0rd-realistic-7Qz9"
CATALOG: Final = tuple(s.case_id for s in discover())
LIST_REPR: Final = re.compile(r"\[\s*'")


def test_the_example_holds_what_a_teams_files_hold_and_the_secret() -> None:
    producer = (EXAMPLES / "producer-realistic.properties").read_text(encoding="utf-8")
    consumer = (EXAMPLES / "consumer-realistic.properties").read_text(encoding="utf-8")
    for key in (
        "bootstrap.servers",
        "client.id",
        "sasl.password",
        "compression.type",
        "linger.ms",
        "batch.size",
        "delivery.timeout.ms",
    ):
        assert f"{key}=" in producer, key
    assert "group.id=" in consumer
    assert f"sasl.password={SECRET}" in producer


def test_the_lint_names_commit_before_processing_and_its_case() -> None:
    gate = load_gate(GATE)
    lint = derive(gate)
    assert not lint.kept
    assert [f.rule.id for f in lint.violations] == ["commit_before_processing"]
    assert [f.rule.cases for f in lint.violations] == [("L6",)]
    assert lint.strongest == "at_most_once"
    assert all(SECRET not in s.shown for f in lint.findings for s in f.settings)


def test_the_full_run_adds_the_lints_case_and_an_explicit_set_lists_it_as_not_run() -> None:
    gate = load_gate(GATE)
    lint = derive(gate)
    plan = plan_cases(gate, CATALOG, lint)
    assert plan.run == ("PB1", "ISR2", "MPI1", "L2", "L6", "D1")
    assert (plan.chosen, plan.added_by_lint, plan.not_run) == ("default", ("L6",), ())
    assert plan.describe() == "the default set that applies, and added by the lint: L6"
    narrowed = plan_cases(gate, CATALOG, lint, ("L2",))
    assert (narrowed.run, narrowed.chosen, narrowed.added_by_lint) == (("L2",), "--cases", ())
    assert narrowed.not_run == (("L6", "left out by --cases"),)
    assert plan_cases(gate, CATALOG, lint, ("L6", "L2")).run == ("L2", "L6")  # catalog order
    # a claim the lint finds kept adds nothing
    kept = plan_cases(gate, CATALOG, derive(load_gate(EXAMPLES / "gate-strong.toml")))
    assert kept.added_by_lint == ()
    assert kept.not_run == ()


def _case(case: str, *attempts: Attempt) -> CaseResult:
    return CaseResult(
        case, f"{case.lower()}_scenario", f"scenarios/x.py::test_{case.lower()}[gate]", "remediated", attempts
    )


def _pass(run_id: str) -> Attempt:
    row = ThresholdRow("longest_outage_s", 30.0, 12.5, True, "s", "whole run")
    return Attempt(run_id, "pass", thresholds=(row,), report=f"tests/{run_id}/report.html", seconds=20.0)


def _session(tmp_path: Path, *, advisory: bool = False) -> GateSession:
    session = GateSession.load(
        GATE, tmp_path, junit=None, calibrate=False, allow_flaky=False, lint_advisory=advisory
    )
    session.select(CATALOG)
    return session


@pytest.mark.parametrize("advisory", [False, True])
def test_every_case_passed_yet_the_lints_proof_fails_the_gate_unless_advisory(
    tmp_path: Path, advisory: bool
) -> None:
    session = _session(tmp_path, advisory=advisory)
    for case in session.selected or ():
        session.record(_case(case, _pass(f"{case.lower()}-remediated-1")))
    report = session.report()
    assert report.counts()["pass"] == 6
    assert (report.verdict, report.exit_code) == (("pass", 0) if advisory else ("fail", 1))
    md = report.markdown()
    assert "at_least_once **NOT KEPT by the configuration (lint)** — the run did not reproduce it" in md
    assert "Cases: the default set that applies, and added by the lint: L6" in md
    assert "added by the lint: L6" in report.headline()
    if advisory:
        assert "advisory (`--lint-advisory`): the cases alone decide" in md
    else:
        assert "this alone fails the gate (exit 1)" in md
        assert "- **lint**: lint: at_least_once NOT KEPT by the configuration" in md
        junit = report.junit_xml()
        assert '<testcase classname="chaos.gate.gate-realistic" name="lint"' in junit
        assert 'type="lint"' in junit


def test_a_reproduced_lint_finding_says_so(tmp_path: Path) -> None:
    session = _session(tmp_path)
    lost = Attempt(
        "l6-remediated-1", "fail", ("lost_acked",), {"lost_acked": 12}, report="tests/l6/report.html"
    )
    session.record(_case("L6", lost, lost))
    report = session.report()
    assert report.reproduced() == ("L6",)
    assert "the run did reproduce it (L6 failed)" in report.lint_line()


def test_the_secret_reaches_no_output_and_reasons_read_as_sentences(tmp_path: Path) -> None:
    session = _session(tmp_path)
    ids = [f"l2-remediated-4f1c2a:producer-0:{n}" for n in range(12, 73)]
    reason = (
        "precondition not met: the cut held: no write to L's partitions acknowledged (acks=all) while the "
        f"followers were cut (61 acks on partitions 0 between the cuts + 0.5 s and the crash: {ids[:5]!r})"
    )
    session.record(
        _case("L2", Attempt("l2-remediated-1", "unknown", reasons=(reason,), report="tests/l2/report.html"))
    )
    session.record(_case("L6", _pass("l6-remediated-1")))
    session.record(_case("PB1", Attempt("-", None, error=f"ScenarioError: broker said {ids[:2]}")))
    report = session.report()
    written = write_gate(tmp_path, report)
    index = render_index(tmp_path)
    outputs = {p.name: p.read_text(encoding="utf-8") for p in (*written, index)}
    assert set(outputs) == {"gate.json", "gate.md", "junit.xml", "index.html"}
    for name, text in outputs.items():
        assert SECRET not in text, name
        assert "sasl.password" not in text or "***" in text, name
    configuration = read_gate(tmp_path)
    assert configuration is not None
    assert configuration.configuration["producer"]["sasl.password"] == "***"
    assert configuration.configuration["consumer"]["sasl.password"] == "***"
    for name in ("gate.md", "junit.xml", "index.html"):
        assert not LIST_REPR.search(html.unescape(outputs[name])), name
    md = outputs["gate.md"]
    assert "values producer-0:12, producer-0:13, producer-0:14 and 2 more" in md
    banner = html.unescape(outputs["index.html"])
    assert (
        "lint: at_least_once NOT KEPT by the configuration (commit_before_processing; shown by L6)" in banner
    )
    assert "cases: the default set that applies, and added by the lint: L6" in banner


def test_sentence_rewrites_python_lists_only() -> None:
    assert (
        sentence("acks ['r-1:producer-0:1', 'r-1:producer-0:2']") == "acks values producer-0:1, producer-0:2"
    )
    assert sentence("members ['a', 'b'] left") == "members a, b left"
    assert sentence("leader 2 timeline [(2, 0.5, 3)]") == "leader 2 timeline [(2, 0.5, 3)]"
    assert sentence("no list here") == "no list here"
