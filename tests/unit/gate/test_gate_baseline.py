"""Regressions between gate runs (``--baseline OLD_GATE_JSON``, chaos.gate.baseline): the measures recorded
whether a threshold judges them or not, the rule (tolerance and min change), what is not compared and why,
a bad baseline file, and the whole path a CI takes — the pytest gate run (what ``chaos gate`` runs) failing
on a regression in its exit code, gate.json, gate.md and JUnit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Final

import pytest
from junitparser import Failure, JUnitXml, TestCase, TestSuite

from chaos.errors import ChaosError
from chaos.gate.baseline import MEASURES, CaseMeasures, Measure, compare_measure, observe
from chaos.gate.gatefile import Baseline
from chaos.gate.report import (
    Attempt,
    CaseResult,
    GateReport,
    GateReportError,
    ThresholdRow,
    read_gate,
    read_gate_file,
    write_gate,
)
from tests.unit.gate.test_gate_cli import EXAMPLES, chaos_gate
from tests.unit.gate.test_gate_run import CONFTEST
from tests.unit.gate.test_gate_thresholds import deliver, facts, send, window

RULE: Final = Baseline()  # tolerance 0.25, min_change_s 1.0
NO_FAULT: Final = (
    "does not apply: the case injects no fault (a client crash or a timing case): no fault window to judge"
)


def measures(
    outage: float | None = 4.0,
    p99: float | None = 800.0,
    ack: float | None = 3.0,
    delivery: float | None = 5.0,
    gap: float | None = 6.0,
    e2e: float | None = 900.0,
    handover: float | None = 7.0,
) -> tuple[Measure, ...]:
    values = dict(zip(MEASURES, (outage, p99, ack, delivery, gap, e2e, handover), strict=True))
    return tuple(
        Measure(name, value, "crash broker-1", "" if value is not None else "nothing was acknowledged")
        for name, value in values.items()
    )


def case(
    name: str, found: tuple[Measure, ...], *, verdict: str = "pass", timeline: str = "remediated"
) -> CaseResult:
    run = Attempt(f"{name.lower()}-run", verdict, report=f"tests/{name}/report.html", measures=found)
    return CaseResult(name, f"{name.lower()}_case", f"scenarios/t.py::test_{name.lower()}", timeline, (run,))


def gate(*cases: CaseResult, profile: str = "ci") -> GateReport:
    return GateReport("gate.toml", "idempotent", profile, cases, started_ts=1.8e9)


OLD: Final = gate(case("PB1", measures()), case("ISR2", measures(outage=20.0, p99=2400.0)))


# ---- the rule -------------------------------------------------------------------------------------------


def test_identical_runs_do_not_regress() -> None:
    new = gate(case("PB1", measures()), case("ISR2", measures(outage=20.0, p99=2400.0))).against(
        OLD, "old/gate.json", RULE
    )
    assert new.exit_code == 0
    assert new.baseline is not None
    assert new.baseline.regressed == ()
    isr2 = new.baseline.case("ISR2")
    assert isr2 is not None
    rows = {m.name: m for m in isr2.measures}
    assert set(rows) == set(MEASURES)
    assert all(m.compared and not m.regressed for m in rows.values())
    # allowed: the larger of old * 1.25 and old + 1 s (ms measures: + 1000 ms)
    assert rows["longest_outage_s"].limit == pytest.approx(25.0)
    assert rows["p99_ack_latency_ms"].limit == pytest.approx(3400.0)
    assert rows["heal_to_first_ack_s"].limit == pytest.approx(4.0)
    assert [c.outcome for c in new.cases] == ["pass", "pass"]


def test_slower_beyond_tolerance_and_min_change_is_a_regression_that_fails_the_gate(tmp_path: Path) -> None:
    slower = case("ISR2", measures(outage=20.0, p99=5200.0))
    new = gate(case("PB1", measures()), slower).against(OLD, "old/gate.json", RULE)
    assert (new.verdict, new.exit_code) == ("fail", 1)
    assert [c.outcome for c in new.cases] == ["pass", "fail"]
    assert new.headline().endswith("1 fail (ISR2); regressed against the baseline: ISR2")
    isr2 = new.cases[1]
    assert isr2.baseline is not None
    (regression,) = isr2.baseline.regressions
    assert (regression.name, regression.old, regression.new) == ("p99_ack_latency_ms", 2400.0, 5200.0)
    message = (
        "regressed against the baseline: p99_ack_latency_ms 5200 ms > 3400 ms allowed (baseline 2400 ms)"
    )
    assert message in isr2.problems()

    write_gate(tmp_path, new)
    data = json.loads((tmp_path / "gate.json").read_text(encoding="utf-8"))
    assert (data["verdict"], data["exit_code"]) == ("fail", 1)
    assert data["baseline"]["file"] == "old/gate.json"
    assert data["baseline"]["regressed"] == ["ISR2"]
    assert (data["baseline"]["tolerance"], data["baseline"]["min_change_s"]) == (0.25, 1.0)
    by_case = {c["case"]: c for c in data["cases"]}
    assert by_case["PB1"]["baseline"]["regressed"] is False
    p99 = next(m for m in by_case["ISR2"]["baseline"]["measures"] if m["name"] == "p99_ack_latency_ms")
    assert p99 == {
        "name": "p99_ack_latency_ms",
        "unit": "ms",
        "old": 2400.0,
        "new": 5200.0,
        "limit": 3400.0,
        "regressed": True,
        "compared": True,
        "note": "",
    }
    back = read_gate(tmp_path)
    assert back is not None
    assert back.to_dict() == new.to_dict()
    assert back.exit_code == 1

    md = (tmp_path / "gate.md").read_text(encoding="utf-8")
    assert "### Against the baseline" in md
    assert "| case | measure | old | new | allowed | regressed |" in md
    assert "| ISR2 | p99_ack_latency_ms | 2400 ms | 5200 ms | 3400 ms | **yes** |" in md
    assert "| PB1 | longest_outage_s | 4 s | 4 s | 5 s | no |" in md
    assert "**1 case(s) regressed** (ISR2)" in md
    assert f"- **ISR2** (fail): {message}" in md

    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "junit.xml"))))
    assert isinstance(suite, TestSuite)
    cases = {c.name: c for c in suite if isinstance(c, TestCase)}
    (failure,) = cases["ISR2"].result
    assert isinstance(failure, Failure)
    assert message in (failure.message or "")
    assert "report: tests/ISR2/report.html" in (failure.message or "")
    assert not cases["PB1"].result


def test_slower_within_the_tolerance_passes() -> None:
    old = Measure("longest_outage_s", 10.0)
    within = compare_measure("longest_outage_s", old, Measure("longest_outage_s", 12.4), RULE)
    assert (within.limit, within.regressed) == (12.5, False)
    edge = compare_measure("longest_outage_s", old, Measure("longest_outage_s", 12.5), RULE)
    assert not edge.regressed  # at the limit is allowed
    beyond = compare_measure("longest_outage_s", old, Measure("longest_outage_s", 12.6), RULE)
    assert beyond.regressed
    assert beyond.describe() == "longest_outage_s 12.6 s > 12.5 s allowed (baseline 10 s)"
    loose = Baseline(tolerance=0.5, min_change_s=0.0)
    assert not compare_measure("longest_outage_s", old, Measure("longest_outage_s", 14.9), loose).regressed
    new = gate(case("PB1", measures(outage=4.9)), case("ISR2", measures(outage=24.0, p99=3000.0)))
    assert new.against(OLD, "old/gate.json", RULE).exit_code == 0


def test_a_small_absolute_change_on_tiny_values_passes() -> None:
    old, new = Measure("heal_to_first_ack_s", 0.2), Measure("heal_to_first_ack_s", 0.9)
    tiny = compare_measure("heal_to_first_ack_s", old, new, RULE)
    assert tiny.limit == pytest.approx(1.2)
    assert not tiny.regressed  # +350 %, but only 0.7 s
    fast = Measure("p99_ack_latency_ms", 40.0)
    assert not compare_measure(
        "p99_ack_latency_ms", fast, Measure("p99_ack_latency_ms", 900.0), RULE
    ).regressed
    assert compare_measure("p99_ack_latency_ms", fast, Measure("p99_ack_latency_ms", 1100.0), RULE).regressed
    strict = Baseline(tolerance=0.25, min_change_s=0.1)
    assert compare_measure("heal_to_first_ack_s", old, new, strict).regressed


def test_a_longer_consumer_stall_or_handover_is_a_regression() -> None:
    new = gate(
        case("PB1", measures()), case("ISR2", measures(outage=20.0, p99=2400.0, gap=9.0, handover=7.5))
    )
    result = new.against(OLD, "old/gate.json", RULE)
    assert result.exit_code == 1
    isr2 = result.cases[1]
    assert isr2.baseline is not None
    # the stall: 9 s > max(6 * 1.25, 6 + 1) = 7.5 s; the handover: 7.5 s <= max(8.75, 8) s
    assert [(r.name, r.old, r.new, r.limit) for r in isr2.baseline.regressions] == [
        ("max_consume_gap_s", 6.0, 9.0, 7.5)
    ]


def test_a_missing_case_or_measure_is_not_compared_with_the_reason_never_a_regression() -> None:
    old = gate(
        case("PB1", measures(ack=None)),
        case("ISR2", measures()[:2]),  # an old gate.json without the recovery measures
        case("L2", measures()),
    )
    never_acked = measures(outage=4.0, p99=None)
    new = gate(case("PB1", never_acked), case("ISR2", measures(outage=400.0)), case("D1", measures()))
    result = new.against(old, "old/gate.json", RULE)
    baseline = result.baseline
    assert baseline is not None
    pb1, isr2, d1, l2 = baseline.cases
    rows = {m.name: m for m in pb1.measures}
    assert not rows["p99_ack_latency_ms"].compared
    assert rows["p99_ack_latency_ms"].note == "this run: nothing was acknowledged"
    assert rows["heal_to_first_ack_s"].note == "the baseline: nothing was acknowledged"
    assert rows["longest_outage_s"].compared
    assert {m.name: m.note for m in isr2.measures if not m.compared} == {
        name: "the baseline: no value recorded" for name in MEASURES[2:]
    }
    assert [m.name for m in isr2.regressions] == ["longest_outage_s"]  # what is compared still counts
    assert (d1.case, d1.measures, d1.note) == ("D1", (), "not in the baseline: nothing to compare")
    assert (l2.case, l2.note) == ("L2", "in the baseline only: not run in this gate")
    assert not any(c.regressed for c in (pb1, d1, l2))
    md = result.markdown()
    assert (
        "| PB1 | p99_ack_latency_ms | 800 ms | — | — | not compared: this run: nothing was acknowledged |"
        in md
    )
    assert "| D1 | — | — | — | — | not compared: not in the baseline: nothing to compare |" in md
    assert "| L2 | — | — | — | — | not compared: in the baseline only: not run in this gate |" in md
    # nothing compared is not a regression: the gate's verdict is the cases' own
    quiet = gate(case("PB1", never_acked), case("D1", measures())).against(old, "old/gate.json", RULE)
    assert quiet.exit_code == 0


def test_another_time_profile_or_timeline_is_not_compared() -> None:
    faithful = gate(case("ISR2", measures(outage=200.0)), profile="faithful").against(OLD, "o.json", RULE)
    assert faithful.exit_code == 0
    assert faithful.baseline is not None
    (isr2, _) = faithful.baseline.cases
    assert isr2.note == "the baseline ran time profile ci, this run faithful: not comparable"
    o6 = gate(case("ISR2", measures(outage=200.0), timeline="vulnerable")).against(OLD, "o.json", RULE)
    assert o6.baseline is not None
    assert o6.baseline.cases[0].note == (
        "the baseline replayed the remediated timeline, this run vulnerable: not comparable"
    )


def test_a_regression_fails_a_case_whatever_else_it_was() -> None:
    flaky_pass = Attempt("r2", "pass", measures=measures(outage=60.0))
    flaky = CaseResult(
        "PB1", "pb1", "n", "remediated", (Attempt("r1", "fail", failed_by=("lost_acked",)), flaky_pass)
    )
    report = GateReport("g.toml", "idempotent", "ci", (flaky,), allow_flaky=True)
    assert report.cases[0].outcome == "flaky"
    assert report.exit_code == 0
    against = report.against(OLD, "o.json", RULE)
    assert against.cases[0].outcome == "fail"
    assert against.exit_code == 1
    unknown = case("PB1", measures(outage=60.0), verdict="unknown")
    assert gate(unknown).against(OLD, "o.json", RULE).cases[0].outcome == "fail"


# ---- what gate.json records -----------------------------------------------------------------------------


def test_every_measure_is_observed_whether_a_threshold_judges_it_or_not() -> None:
    history = [*send(1.0, 0), *send(5.0, 1), *send(12.0, 2), deliver(12.5, 0)]
    crash = window("crash", 4.0, 10.0, p99=700.0, ack=2.0, delivery=2.5)
    found = {m.name: m for m in observe(facts([crash], outage=6.5), history)}
    assert [*found] == list(MEASURES)
    assert found["longest_outage_s"] == Measure("longest_outage_s", 6.5, "whole run")
    assert found["p99_ack_latency_ms"] == Measure("p99_ack_latency_ms", 700.0, "crash broker-1")
    assert found["heal_to_first_ack_s"].observed == 2.0
    assert found["heal_to_first_delivery_s"].observed == 2.5
    no_fault = {m.name: m for m in observe(facts(()), history)}
    assert no_fault["longest_outage_s"].observed == 2.0
    assert no_fault["p99_ack_latency_ms"] == Measure("p99_ack_latency_ms", None, None, NO_FAULT)
    unmeasured = window("crash", 4.0, 10.0, p99=700.0, ack=None, delivery=None)
    late = {m.name: m for m in observe(facts([unmeasured]), history)}
    assert late["heal_to_first_ack_s"].observed is None
    assert late["heal_to_first_ack_s"].note == "nothing was acknowledged after the heal before the run ended"


def test_gate_json_records_each_cases_measures_and_reads_old_files_without_them(tmp_path: Path) -> None:
    write_gate(tmp_path, gate(case("PB1", measures(p99=None))))
    data = json.loads((tmp_path / "gate.json").read_text(encoding="utf-8"))
    (pb1,) = data["cases"]
    assert pb1["thresholds"] == []  # no threshold configured, the measures are there all the same
    assert pb1["measures"]["longest_outage_s"] == {
        "observed": 4.0,
        "unit": "s",
        "window": "crash broker-1",
        "note": "",
    }
    assert pb1["measures"]["p99_ack_latency_ms"]["observed"] is None
    assert pb1["attempts"][0]["measures"] == pb1["measures"]
    assert pb1["baseline"] is None
    assert data["baseline"] is None
    back = read_gate_file(tmp_path / "gate.json")
    assert back.cases[0].measured() == CaseMeasures("remediated", measures(p99=None))
    # a gate.json written before measures were recorded: the thresholds' observed values are compared
    older = Attempt(
        "r", "pass", thresholds=(ThresholdRow("longest_outage_s", 20, 4.5, True, "s", "whole run"),)
    )
    assert older.observed() == (Measure("longest_outage_s", 4.5, "whole run"),)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "does not exist"),
        ("dir", "is a directory"),
        ("{not json", "not JSON"),
        ("[1, 2]", "not a gate.json (a JSON list)"),
        ('{"format": 99}', "format 99; this harness reads format 1"),
        ('{"format": 1, "cases": []}', "not a gate.json this harness wrote (KeyError: 'gate_file')"),
        ('{"format": 1, "gate_file": "g", "guarantee": "x", "cases": [{"case": "PB1"}]}', "KeyError"),
    ],
)
def test_a_bad_baseline_file_is_an_error_naming_the_path_and_the_fix(
    tmp_path: Path, content: str | None, problem: str
) -> None:
    path = tmp_path / "old.json"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(GateReportError) as info:
        read_gate_file(path)
    assert isinstance(info.value, ChaosError)
    text = str(info.value)
    assert text.startswith(f"{path}: ")
    assert problem in text
    assert text.endswith(
        "give the gate.json a `chaos gate` run wrote (in its --out directory, default reports/gate/)"
    )


# ---- the gate run: pytest's side (what `chaos gate` runs) and the CLI -----------------------------------

CASES: Final = """
import os

from chaos.scenario import Scenario, Variant, chaos_scenario


def scenario(case):
    return Scenario(
        scenario_id=f"case_{case.lower()}", case_id=case, title=f"case {case}", source="s", symptom="s",
        guarantee="at_least_once", expected_verdict="pass",
        variants=(Variant("vulnerable", "v", expected_verdict="fail"), Variant("remediated", "r")),
    )


@chaos_scenario(scenario("X1"))
def test_x1(run):
    run.outage = float(os.environ.get("X1_OUTAGE", "4.0"))


@chaos_scenario(scenario("X2"))
def test_x2(run):
    run.outage = 3.0
"""

GATE: Final = """
guarantee = "at_least_once"
cases = ["X1", "X2"]

[producer.settings]
acks = "all"
"enable.idempotence" = true

[thresholds]
longest_outage_s = 60

[baseline]
tolerance = 0.5
min_change_s = 2
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("CHAOS_REPORT_DIR", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cases=CASES)
    (pytester.path / "gate.toml").write_text(GATE, encoding="utf-8")
    return pytester


def run_gate(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-m", "chaos", "-p", "no:cacheprovider", "--chaos-gate", "gate.toml", *args)


def test_the_gate_run_passes_an_identical_run_and_fails_a_slower_one(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = project.path / "reports" / "gate"
    first = run_gate(project)
    assert first.ret == 0
    baseline = project.path / "release-1.json"
    shutil.copy(out / "gate.json", baseline)
    old = json.loads(baseline.read_text(encoding="utf-8"))
    assert {c["case"]: c["measures"]["longest_outage_s"]["observed"] for c in old["cases"]} == {
        "X1": 4.0,
        "X2": 3.0,
    }

    same = run_gate(project, "--chaos-gate-baseline", "release-1.json")
    assert same.ret == 0
    same.stdout.fnmatch_lines(["*chaos gate: against the baseline *release-1.json (2 case(s), pass)*"])
    data = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    assert data["baseline"]["regressed"] == []
    assert (data["baseline"]["tolerance"], data["baseline"]["min_change_s"]) == (0.5, 2)

    monkeypatch.setenv("X1_OUTAGE", "6.5")  # allowed: max(4 s * 1.5, 4 s + 2 s) = 6 s
    slower = run_gate(project, "--chaos-gate-baseline", "release-1.json")
    assert slower.ret == 1
    slower.assert_outcomes(passed=1, failed=1)
    regression = "regressed against the baseline: longest_outage_s 6.5 s > 6 s allowed (baseline 4 s)"
    slower.stdout.fnmatch_lines([f"*X1 gate: X1: fail — {regression}*", "gate FAILED (exit 1)*"])
    data = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    assert (data["verdict"], data["exit_code"]) == ("fail", 1)
    assert data["baseline"]["regressed"] == ["X1"]
    by_case = {c["case"]: c for c in data["cases"]}
    assert by_case["X1"]["thresholds"][0]["passed"]  # the threshold (60 s) passed: the baseline failed it
    assert "| X1 | longest_outage_s | 4 s | 6.5 s | 6 s | **yes** |" in (out / "gate.md").read_text(
        encoding="utf-8"
    )
    suite = next(iter(JUnitXml.fromfile(str(out / "junit.xml"))))
    assert isinstance(suite, TestSuite)
    x1 = next(c for c in suite if isinstance(c, TestCase) and c.name == "X1")
    (failure,) = x1.result
    assert isinstance(failure, Failure)
    assert regression in (failure.message or "")

    monkeypatch.setenv("X1_OUTAGE", "5.9")  # within the tolerance
    assert run_gate(project, "--chaos-gate-baseline", "release-1.json").ret == 0


def test_the_baseline_may_be_the_previous_gate_json_of_the_same_output_directory(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A previous gate's files are removed when a run starts: the baseline is read before."""
    assert run_gate(project).ret == 0
    monkeypatch.setenv("X1_OUTAGE", "30")
    result = run_gate(project, "--chaos-gate-baseline", "reports/gate/gate.json")
    assert result.ret == 1
    data = json.loads((project.path / "reports" / "gate" / "gate.json").read_text(encoding="utf-8"))
    assert data["baseline"]["regressed"] == ["X1"]


def test_a_bad_baseline_is_a_usage_error_before_anything_runs(project: pytest.Pytester) -> None:
    result = run_gate(project, "--chaos-gate-baseline", "nowhere.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*chaos: --chaos-gate-baseline nowhere.json: *nowhere.json: does not exist; give*"]
    )
    (project.path / "bad.json").write_text("{}", encoding="utf-8")
    result = run_gate(project, "--chaos-gate-baseline", "bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bad.json: gate.json: format None; this harness reads format 1*"])
    result = project.runpytest("-m", "chaos", "-p", "no:cacheprovider", "--chaos-gate-baseline", "bad.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--chaos-gate-baseline runs with a gate: add --chaos-gate GATE_FILE*"])
    assert not (project.path / "reports" / "gate" / "gate.json").exists()


def test_chaos_gate_hands_the_baseline_to_the_run_and_refuses_a_bad_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import chaos.cluster.engine
    from chaos.gate.driver.command import GateOptions, run_gate

    calls: list[list[str]] = []

    def fake_main(args: list[str]) -> int:
        calls.append(args)
        write_gate(Path(args[args.index("--chaos-report-dir") + 1]), OLD)
        return 0

    monkeypatch.setattr(chaos.cluster.engine, "docker_client", lambda: None)
    monkeypatch.setattr(pytest, "main", fake_main)
    monkeypatch.chdir(tmp_path)
    gate_file = str(EXAMPLES / "gate-strong.toml")
    run_gate(GateOptions(gate_file, "out", baseline="old.json"))
    (args,) = calls
    assert args[args.index("--chaos-gate-baseline") + 1] == str(tmp_path / "old.json")

    code, output, elapsed = chaos_gate(gate_file, "--baseline", "missing.json", "--out", "new", cwd=tmp_path)
    assert code == 2, output
    assert elapsed < 20
    assert "the gate cannot run (exit 2; nothing was judged, this is not a verdict)" in output
    assert "missing.json: does not exist; give the gate.json a `chaos gate` run wrote" in output
    assert not (tmp_path / "new").exists()


def test_a_measure_neither_run_has_says_why_once() -> None:
    why = "does not apply: the case injects no fault"
    missing = Measure("p99_ack_latency_ms", None, note=why)
    row = compare_measure("p99_ack_latency_ms", missing, missing, RULE)
    assert (row.compared, row.regressed, row.note) == (False, False, f"neither run: {why}")
