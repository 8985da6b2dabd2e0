"""Report pages rendered from synthetic run directories (a recorded history, scenario.json, audit.json,
evidence.json and broker logs; no Kafka): the banner, the tables, symptom matching and the run's checks,
hostile strings escaped, crashed runs, inconclusive runs."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from chaos.report import find_runs, render_index, render_run, render_tree
from chaos.report.assets import plotly_js, plotly_path
from chaos.report.render import build_page, load_summary, run_verdict
from chaos.run.evidence import Check, Evidence
from tests.report_sample import HOSTILE, sample_evidence, write_sample_run

SECONDS, RATE = 40, 10


class _Scripts(HTMLParser):
    """Counts script elements the way a browser's tokenizer sees them, and keeps the JSON data block."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict[str, str | None]] = []
        self.data: dict[str, str] = {}
        self._current: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts.append(dict(attrs))
            self._current = dict(attrs).get("id") or f"script-{len(self.scripts)}"
            self.data[self._current] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._current = None

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self.data[self._current] += data


def _section(html: str, start: str, end: str) -> str:
    return html[html.index(start) : html.index(end)]


def _banner(html: str) -> str:
    return _section(html, 'id="verdict"', "</section>")


def _text(html: str) -> str:
    """The page's visible text, roughly: tags dropped, entities kept (they are what escaping produces)."""
    without_scripts = re.sub(r"<script.*?</script>", "", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", without_scripts))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    write_sample_run(root / "plain", seconds=SECONDS, rate=RATE)
    write_sample_run(root / "hostile", hostile=True, seconds=SECONDS, rate=RATE)
    write_sample_run(root / "crashed", crashed=True, seconds=SECONDS, rate=RATE)
    return root


@pytest.fixture(scope="module")
def plain_html(runs: Path) -> str:
    rendered = render_run(runs / "plain")
    assert rendered.page == runs / "plain" / "report.html"
    return rendered.page.read_text(encoding="utf-8")


def test_banner_names_verdict_guarantee_and_what_failed(plain_html: str) -> None:
    banner = plain_html[plain_html.index('id="verdict"') : plain_html.index("</section>")]
    assert 'class="banner fail"' in plain_html
    assert ">fail<" in banner
    assert "<strong>at_least_once</strong>" in banner
    assert "anomaly lost_acked: 2" in banner
    assert "lost_indeterminate, duplicate_delivery_after_rebalance" in banner  # accepted, not failing
    assert "test failed" in banner
    assert "The system broke the guarantee it claims: <strong>at_least_once</strong>" in banner
    assert "Expected for this variant" in banner  # the sample's variant expects fail
    assert '<span class="mono">vulnerable</span> expects fail' in banner


def test_the_story_comes_first_and_examples_are_grouped_by_context(plain_html: str) -> None:
    story = _text(_section(plain_html, 'id="story"', 'id="scenario"'))
    assert "The audit found 2 acknowledged writes lost (lost_acked), which at_least_once forbids." in story
    assert "Both are on chaos-sample-1, offsets 340–341, acknowledged t+21.0–21.1 s." in story
    assert "They fall during network_cut broker-2 (t+20.0–32.0 s)." in story
    assert "broker 1 shrank the ISR from [1,2,3] to [1,3]" in story
    assert "Remove the dead node from bootstrap.servers" in story  # what to change
    assert plain_html.index('id="story"') < plain_html.index('id="scenario"')
    examples = _section(plain_html, 'id="examples-lost_acked"', 'id="examples-lost_indeterminate"')
    assert examples.count('class="example-group"') == 1  # one partition, one fault, the same broker lines
    assert examples.count("Shrinking ISR from 1,2,3 to 1,3") == 1  # shown once for both values
    assert "offsets 340–341" in examples
    assert '<blockquote class="symptom" lang="zh">' in plain_html
    assert 'lang="en"' in plain_html


def test_scenario_section_quotes_symptom_and_configuration(plain_html: str) -> None:
    text = _text(plain_html)
    assert "PB1" in text
    assert "pb1_cut_one_broker_then_start_client" in text
    assert "通过加日志，发现错误都是发生在endOffsets这里" in text
    for setting in (
        "acks",
        "enable.idempotence",
        "isolation.level",
        "min.insync.replicas",
        "replica.lag.time.max.ms",
        "unclean.leader.election.enable",
    ):
        assert f'<th class="mono">{setting}</th>' in plain_html
    assert "network_cut" in text
    assert "4242" in text
    assert "longest_outage_s" in text


def test_anomaly_tables_hold_examples_explanations_and_availability(plain_html: str) -> None:
    examples = plain_html[plain_html.index('id="examples-lost_acked"') :]
    examples = examples[: examples.index("</table>")]
    assert "sample-run:producer-0:1004" in examples
    assert '<td class="num">341</td>' in examples
    assert "2026-01-15 12:00:21.080 UTC" in examples
    assert "A write the broker acknowledged is not in the topic" in plain_html
    assert '<span class="tag fails">fails</span>' in plain_html
    assert "… and 4 more" in plain_html  # 14 duplicates, 10 examples kept
    availability = _text(plain_html[plain_html.index('id="availability"') :])
    assert "Longest time without a successful acknowledgement: 7.500 s (from t+20.000 s to t+27.500 s)" in (
        availability
    )
    assert "8.0 / 609.0" in availability


def test_symptoms_marked_observed_or_not_with_first_time_and_lines(plain_html: str) -> None:
    section = plain_html[plain_html.index('id="symptoms"') : plain_html.index('id="remediation"')]
    rows = {re.sub(r"<[^>]+>", "", r.split("</td>")[0]).strip(): r for r in section.split("<tr>")[2:]}
    shrink = next(v for k, v in rows.items() if k.startswith("Shrinking ISR"))
    assert "observed" in shrink
    assert "t+26.200 s" in shrink
    assert "broker-1.log.gz:" in shrink
    assert "Shrinking ISR from 1,2,3 to 1,3" in shrink
    elect = next(v for k, v in rows.items() if k.startswith("Failed to elect leader"))
    assert "not observed" in elect
    nerr = next(v for k, v in rows.items() if k.startswith("NOT_ENOUGH_REPLICAS"))
    assert '"tag yes">observed' in nerr
    assert "t+20.700 s" in nerr
    timed_out = next(v for k, v in rows.items() if k.startswith("_MSG_TIMED_OUT"))
    assert "not observed" in timed_out
    client = next(v for k, v in rows.items() if k.startswith("Timed out ProduceRequest"))
    assert '"tag yes">observed' in client
    assert "REQTMOUT" in client


def test_remediation_log_excerpts_and_reproduce_command(plain_html: str) -> None:
    text = _text(plain_html)
    assert "Remove the dead node from bootstrap.servers" in text
    assert "Use acks=all with min.insync.replicas &gt;= 2" in text  # generic hint for lost_acked
    logs = plain_html[plain_html.index('id="logs"') : plain_html.index('id="reproduce"')]
    assert "network_cut broker-2 — inject at t+20.000 s" in logs
    assert "network_cut broker-2 — heal at t+32.000 s" in logs
    assert "broker-3.log.gz  [2026-01-15 12:00:24,250] INFO [BrokerServer id=3]" in logs
    assert "t+16.250 s" in logs
    assert "t+14.250 s" not in logs
    assert (
        "'scenarios/test_partitioned.py::test_pb1[ci]' --chaos-seed=4242 --chaos-profile=ci --chaos-brokers=3"
    ) in plain_html.replace("&#39;", "'")


def test_page_loads_plotly_from_the_trees_copy_and_nothing_from_the_network(
    runs: Path, plain_html: str
) -> None:
    parser = _Scripts()
    parser.feed(plain_html)
    assert [s.get("src") for s in parser.scripts] == [None, plotly_path(Path(".")).as_posix(), None]
    assert plotly_path(runs / "plain").read_text(encoding="utf-8") == plotly_js()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", plain_html)
    figures = json.loads(parser.data["chaos-figures"])
    assert set(figures) == {
        "chart-produce",
        "chart-latency",
        "chart-consume",
        "chart-isr",
        "chart-leader",
        "chart-group",
        "chart-errors",
    }
    shapes = figures["chart-produce"]["layout"]["shapes"]
    assert [(s["x0"], s["x1"]) for s in shapes] == [(20.0, 32.0)]  # the fault window, shaded
    assert "@media print" in plain_html


def test_hostile_strings_render_as_text_everywhere(runs: Path) -> None:
    html = render_run(runs / "hostile").page.read_text(encoding="utf-8")
    assert HOSTILE not in html
    assert "<script>alert" not in html
    parser = _Scripts()
    parser.feed(html)
    assert len(parser.scripts) == 3  # nothing the run wrote opened a script element
    escaped = "&lt;/script&gt;&lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt;"
    text = _text(html)
    for where in (
        "Partitioned broker: network cut of one broker",
        "(the errors all happen in endOffsets",
        "sample-run:producer-0:",
        "chaos-sample",
        "WARN client said",
    ):
        assert f"{where}" in text
    assert text.count(escaped) >= 10  # title, symptom, settings, examples, fault, logs, remediation…
    raw = parser.data["chaos-figures"]
    assert "<" not in raw
    assert ">" not in raw
    figures = json.loads(raw)
    consume = figures["chart-consume"]["data"][0]["name"]
    assert consume == "delivered /s (group &lt;/script&gt;&lt;script&gt;alert('xss')&lt;/script&gt;)"
    annotation = figures["chart-produce"]["layout"]["annotations"][0]["text"]
    assert annotation.startswith("network_cut broker-2 &lt;/script&gt;")
    assert any(
        name.startswith("log:REQTMOUT &lt;/script&gt;")
        for name in (t["name"] for t in figures["chart-errors"]["data"])
    )


def test_crashed_run_renders_what_it_holds_and_says_what_is_missing(runs: Path) -> None:
    html, summary = build_page(runs / "crashed")
    assert summary.verdict == "unknown"
    assert 'class="banner unknown"' in html
    text = _text(html)
    assert "This report is incomplete" in text
    assert "no audit result (audit.json)" in text
    assert "JSONL segments only, no events.parquet" in text
    assert "did not record its end" in text
    assert "no final drain in the history" in text
    assert "Run error: KafkaException: _TIMED_OUT" in text
    assert 'id="chart-produce"' in html  # the history it holds is still charted
    assert "No audit result" in text


def test_directory_without_history_or_scenario_still_renders(tmp_path: Path) -> None:
    run = tmp_path / "bare"
    run.mkdir()
    (run / "scenario.json").write_text(json.dumps({"scenario_id": "only-metadata"}), encoding="utf-8")
    html, summary = build_page(run)
    assert summary.scenario_id == "only-metadata"
    assert summary.verdict == "unknown"
    text = _text(html)
    assert "no readable history" in text
    assert "No history to chart." in text
    assert "no broker logs in logs/" in text
    assert "-k only-metadata" in text


def test_broken_scenario_json_is_reported_not_raised(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "run", seconds=SECONDS, rate=RATE)
    (run / "scenario.json").write_text('{"scenario_id": "x", "colour": "blue"}', encoding="utf-8")
    html, _ = build_page(run)
    assert "scenario.json is unreadable" in html
    assert "unknown keys [&#39;colour&#39;]" in html


def test_index_lists_runs_with_verdict_duration_and_links(runs: Path, tmp_path: Path) -> None:
    rendered, index = render_tree(runs)
    assert index == runs / "index.html"
    assert {r.page.parent.name for r in rendered} == {"plain", "hostile", "crashed"}
    html = index.read_text(encoding="utf-8")
    assert HOSTILE not in html
    for name in ("plain", "hostile", "crashed"):
        assert f'href="{name}/report.html"' in html
    assert '<span class="tag fail">fail</span>' in html
    assert '<span class="tag unknown">unknown</span>' in html
    assert "43.0 s" in html  # scenario start to end of the complete runs
    assert "incomplete" in html

    # a run nobody rendered yet is listed from its JSON inputs, without a link
    write_sample_run(runs / "later", seconds=SECONDS, rate=RATE)
    html = render_index(runs).read_text(encoding="utf-8")
    assert "later/report.html" not in html
    assert "later" in html
    assert sorted(p.name for p in find_runs(runs)) == ["crashed", "hostile", "later", "plain"]


def test_render_tree_on_one_run_writes_only_its_page(runs: Path) -> None:
    rendered, index = render_tree(runs / "plain")
    assert index is None
    assert [r.page.name for r in rendered] == ["report.html"]
    summary = json.loads((runs / "plain" / "report.json").read_text())
    assert summary["verdict"] == "fail"
    assert summary["scenario_id"] == "pb1_cut_one_broker_then_start_client"


# ---- evidence: symptoms and preconditions ---------------------------------------------------------------


def test_a_run_without_evidence_says_so_and_keeps_the_audits_verdict(plain_html: str) -> None:
    evidence = _text(_section(plain_html, 'id="evidence"', 'id="symptoms"'))
    assert "No evidence recorded (no evidence.json" in evidence
    assert "Inconclusive" not in _banner(plain_html)
    assert "Evidence:" not in _banner(plain_html)
    symptoms = _section(plain_html, 'id="symptoms"', 'id="remediation"')
    assert "<th>run's check</th>" in symptoms
    assert symptoms.count('<span class="muted">report only</span>') == 2  # the two broker_log symptoms


def test_a_precondition_that_did_not_hold_makes_a_passing_run_unknown(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = write_sample_run(
        root / "missed",
        seconds=SECONDS,
        rate=RATE,
        clean_audit=True,
        evidence=sample_evidence(cut_landed=False),
    )
    rendered = render_run(run)
    html = rendered.page.read_text(encoding="utf-8")
    reason = (
        "precondition not met: the cut isolated broker 2 (its followers left the ISR) (the ISR never shrank)"
    )
    assert rendered.summary.verdict == "unknown"
    assert rendered.summary.reasons == (reason,)
    assert 'class="banner unknown"' in html
    assert "UNKNOWN · " in html  # the page title
    banner = _text(_banner(html))
    assert "Inconclusive: the run did not show the case, so the audit's verdict (pass) does not stand" in (
        banner.replace("&#39;", "'")
    )
    assert reason in banner
    assert "The audit found no anomaly that the guarantee forbids" in banner
    assert "2 of 3 symptom(s) observed · 0 of 1 precondition(s) held · strict symptoms off" in banner
    checks = _section(html, 'id="evidence"', 'id="symptoms"')
    row = next(r for r in checks.split("<tr>") if "the cut isolated broker 2" in r)
    assert "<td>precondition</td>" in row
    assert '<span class="tag no">did not hold</span>' in row
    assert "the ISR never shrank" in row
    # the index and report.json say the same
    assert json.loads((run / "report.json").read_text())["reasons"] == [reason]
    assert load_summary(run).verdict == "unknown"
    index = render_index(root).read_text(encoding="utf-8")
    assert '<span class="tag unknown">unknown</span>' in index
    assert '<span class="tag pass">' not in index.split("<table")[1]
    assert "inconclusive" in index
    assert "the ISR never shrank" in index


def test_the_same_run_passes_when_its_precondition_held(tmp_path: Path) -> None:
    run = write_sample_run(
        tmp_path / "held",
        seconds=SECONDS,
        rate=RATE,
        clean_audit=True,
        evidence=sample_evidence(cut_landed=True),
    )
    html, summary = build_page(run)
    assert (summary.verdict, summary.reasons) == ("pass", ())
    assert 'class="banner pass"' in html
    assert "Inconclusive" not in html
    row = next(r for r in _section(html, 'id="evidence"', 'id="symptoms"').split("<tr>") if "broker 2" in r)
    assert '<span class="tag yes">held</span>' in row


def test_symptom_checks_observed_or_not_render_once_each(tmp_path: Path) -> None:
    run = write_sample_run(
        tmp_path / "strict",
        seconds=SECONDS,
        rate=RATE,
        evidence=sample_evidence(cut_landed=True, strict=True),
    )
    html, summary = build_page(run)
    assert summary.verdict == "fail"  # the audit's: every precondition held
    assert "(the test fails on the symptoms not observed)" in _text(_banner(html))
    checks = _section(html, 'id="evidence"', 'id="symptoms"')
    assert "Strict symptoms: <strong>on</strong>" in checks
    own = next(r for r in checks.split("<tr>") if "the consumer stalled" in r)
    assert "<td>symptom</td>" in own
    assert '<span class="tag yes">observed</span>' in own
    assert "stalled 7.5 s" in own
    # the runner's checks of declared symptoms sit in those symptoms' rows, not in a row of their own
    assert "NOT_ENOUGH_REPLICAS" not in checks
    assert "_MSG_TIMED_OUT" not in checks
    symptoms = _section(html, 'id="symptoms"', 'id="remediation"')
    rows = {re.sub(r"<[^>]+>", "", r.split("</td>")[0]).strip(): r for r in symptoms.split("<tr>")[2:]}
    nerr = next(v for k, v in rows.items() if k.startswith("NOT_ENOUGH_REPLICAS"))
    assert nerr.count('<span class="tag yes">observed</span>') == 2  # the report's match and the run's check
    assert "70 events, first from producer-0" in nerr
    timed_out = next(v for k, v in rows.items() if k.startswith("_MSG_TIMED_OUT"))
    assert timed_out.count('<span class="tag no">not observed</span>') == 2
    assert "no such event in the history" in timed_out
    client = next(v for k, v in rows.items() if k.startswith("Timed out ProduceRequest"))
    assert client.split("<td>")[-1].startswith("—</td>")  # the run recorded no check of it


def test_hostile_checks_render_as_text(tmp_path: Path) -> None:
    evidence = Evidence(
        (Check("symptom", f"saw {HOSTILE}", True, HOSTILE), Check("precondition", HOSTILE, False, HOSTILE))
    )
    run = write_sample_run(tmp_path / "run", seconds=10, rate=RATE, evidence=evidence)
    html, summary = build_page(run)
    assert summary.verdict == "unknown"
    assert HOSTILE not in html
    assert _text(html).count("&lt;/script&gt;&lt;script&gt;alert(&#39;xss&#39;)&lt;/script&gt;") >= 5


def test_an_unreadable_evidence_file_makes_the_run_unknown_and_is_named(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "run", seconds=10, rate=RATE, clean_audit=True)
    (run / "evidence.json").write_text('{"format": 1, "checks": [{"kind": "rumour"}]}', encoding="utf-8")
    html, summary = build_page(run)
    assert summary.verdict == "unknown"
    assert summary.reasons == ("evidence.json is unreadable: the case's preconditions cannot be checked",)
    text = _text(html)
    assert "This report is incomplete" in text
    assert "evidence.json is unreadable (Check.kind: expected one of symptom, precondition" in text
    assert load_summary(run).verdict == "unknown"  # the index's light summary, before any page


def test_run_verdict_is_the_audits_unless_the_evidence_says_otherwise() -> None:
    held = Evidence((Check("precondition", "landed", True), Check("symptom", "seen", False)))
    unmet = Evidence((Check("precondition", "landed", False, "no"),))
    assert run_verdict(None, None) == ("unknown", ())
    assert run_verdict(None, held) == ("unknown", ())
    assert run_verdict(None, unmet) == ("unknown", ("precondition not met: landed (no)",))


# ---- the consumer side (audit.json's availability.consumer) ------------------------------------------


def _with_consumer(run: Path) -> None:
    """Give the sample run's audit a consumer side: a 12.3 s stall of partition 1 before the fault (no fault
    active), a 5 s one of partition 0 inside it, a short one of partition 2, a lag series, a handover."""
    import dataclasses

    from chaos.audit.auditfile import read_audit, write_audit
    from chaos.audit.facts import ConsumeGap, Consumption, Handover, LagPoint, LatencyStats
    from tests.report_sample import TOPIC

    mono0 = 1000.0
    result = read_audit(run)
    assert result is not None
    consumer = Consumption(
        gaps=(
            ConsumeGap(TOPIC, 0, 5.0, mono0 + 21.0, mono0 + 26.0, True),
            ConsumeGap(TOPIC, 1, 12.3, mono0 + 2.0, mono0 + 14.3, True),
            ConsumeGap(TOPIC, 2, 0.4, mono0 + 3.0, mono0 + 3.4, True),
        ),
        e2e=LatencyStats(100, 12.0, 12300.0),
        lag=tuple(LagPoint(mono0 + t, lag) for t, lag in ((0.0, 0), (5.0, 60), (15.0, 0), (30.0, 7))),
        handovers=(
            Handover(
                TOPIC, 1, "consumer-1", "m1", "consumer-0", "m0", mono0 + 1.9, mono0 + 14.3, 12.4, False
            ),
        ),
    )
    facts = result.facts
    availability = dataclasses.replace(facts.availability, consumer=consumer)
    write_audit(run, dataclasses.replace(result, facts=dataclasses.replace(facts, availability=availability)))


def test_consume_stalls_are_shaded_and_named_even_with_no_fault_active(tmp_path: Path) -> None:
    from tests.report_sample import TOPIC

    run = write_sample_run(tmp_path / "stalled", seconds=SECONDS, rate=RATE)
    _with_consumer(run)
    html = render_run(run).page.read_text(encoding="utf-8")
    parser = _Scripts()
    parser.feed(html)
    figures = json.loads(parser.data["chaos-figures"])
    for chart in ("chart-produce", "chart-consume", "chart-lag"):
        layout = figures[chart]["layout"]
        bands = [(s["x0"], s["x1"], s["fillcolor"]) for s in layout["shapes"]]
        assert [(x0, x1) for x0, x1, _ in bands] == [(20.0, 32.0), (2.0, pytest.approx(14.3)), (21.0, 26.0)]
        assert bands[1][2] != bands[0][2]  # a stall is not drawn as a fault
        names = [a["text"] for a in layout["annotations"]]
        assert f"consume stall {TOPIC}-1 12.3 s (no fault active)" in names
        assert f"consume stall {TOPIC}-0 5.0 s (during network_cut broker-2)" in names
        assert not any(f"{TOPIC}-2" in n for n in names)  # 0.4 s: ordinary polling, not shaded
    lag = figures["chart-lag"]["data"][0]
    assert (lag["x"], lag["y"]) == ([0.0, 5.0, 15.0, 30.0], [0, 60, 0, 7])
    stalls = html[html.index("<h3>Consume stalls</h3>") :]
    stalls = _text(stalls[: stalls.index("</table>")])
    assert f"{TOPIC}-1 t+2.000 s t+14.300 s 12.3 s no fault active" in stalls
    availability = _text(html[html.index('id="consumer-availability"') :])
    assert f"Longest consume stall — records readable, none delivered: 12.3 s on {TOPIC}-1" in availability
    assert "(from t+2.000 s to t+14.300 s; no fault active)" in availability
    assert "p50 / p99 12.0 / 12,300.0 (n=100) ms" in availability
    assert "Peak consumer lag: 60 offsets at t+5.000 s" in availability
    assert "12.4 s on chaos-sample-1 , consumer-1 → consumer-0 (from its last delivery at t+1.900 s)" in (
        availability
    )


def test_an_audit_without_the_consumer_side_says_so(plain_html: str) -> None:
    availability = _text(plain_html[plain_html.index('id="consumer-availability"') :])
    assert "No consumer-side figures" in availability
    assert "predates them" in availability  # the sample run's group delivered
    parser = _Scripts()
    parser.feed(plain_html)
    assert "chart-lag" not in json.loads(parser.data["chaos-figures"])
    assert "Consume stalls" not in plain_html


def test_a_failing_examples_faults_and_broker_lines_are_shown_beside_it(plain_html: str) -> None:
    """Attribution: the cut broker 2 held when the acknowledged writes of partition 1 were lost, and the
    partition's leader logged its ISR shrink soon after; an anomaly that does not fail gets no column."""
    examples = plain_html[plain_html.index('id="examples-lost_acked"') :]
    examples = _text(examples[: examples.index("</table>")])
    assert "around it: faults, and the brokers on its partition" in examples
    assert "during network_cut broker-2" in examples
    assert "broker-1.log.gz: [Partition chaos-sample-1 broker=1] Shrinking ISR from 1,2,3 to 1,3" in examples
    assert "heartbeat ok" not in examples  # only lines about the partition's history


def test_a_run_judged_per_stream_says_so_and_counts_each_producers_share(tmp_path: Path) -> None:
    """producer-0 claims at-most-once of its own: its two lost writes are its accepted price, the run
    passes, and the page says by which guarantee each producer was judged."""
    from dataclasses import replace

    from chaos.audit.facts import AnomalyReport
    from chaos.audit.verdict import AuditResult, judge

    run = tmp_path / "streams"
    write_sample_run(run, seconds=SECONDS, rate=RATE)
    saved = AuditResult.from_dict(json.loads((run / "audit.json").read_text(encoding="utf-8")))
    anomalies = tuple(
        (name, replace(report, by_producer=(("producer-0", report.count),)) if report.count else report)
        for name, report in saved.facts.anomalies
    )
    facts = replace(saved.facts, anomalies=anomalies)
    assert isinstance(facts.anomaly("lost_acked"), AnomalyReport)
    result = judge(facts, "at_least_once", "reference", {"producer-0": "at_most_once"})
    assert result.verdict == "pass"
    (run / "audit.json").write_text(result.to_json(), encoding="utf-8")
    (run / "evidence.json").unlink(missing_ok=True)
    html = render_run(run).page.read_text(encoding="utf-8")
    banner = _text(_banner(html))
    assert "Judged per stream: producer-0 's values by at_most_once ; every other value by at_least_once" in (
        banner
    )
    table = html[html.index('class="anomalies"') :]
    table = _text(table[: table.index("</table>")])
    assert "lost_acked 2 producer-0 2 expected" in table
    assert "--stream=producer-0=at_most_once" in html


def test_records_removed_by_the_log_policy_are_shown_with_their_cause(tmp_path: Path) -> None:
    run = write_sample_run(tmp_path / "expired", seconds=SECONDS, rate=RATE, clean_audit=True)
    audit_path = run / "audit.json"
    audit = json.loads(audit_path.read_text())
    facts = audit["facts"]
    facts["totals"]["expired"] = 40
    facts["anomalies"]["expired_unread"] = {"count": 25, "examples": [], "by_producer": {"producer-0": 25}}
    facts["removals"] = [
        {"topic": "chaos", "partition": 1, "cleanup_policy": "delete", "retention_ms": 2000,
         "retention_bytes": -1, "delete_retention_ms": 86400000, "log_start": 40, "deleted_to": None,
         "expired": 40, "compacted": 0, "expired_unread": 25},
    ]  # fmt: skip
    audit_path.write_text(json.dumps(audit))
    html = render_run(run).page.read_text(encoding="utf-8")
    text = _text(_section(html, 'id="audit"', 'class="anomalies"'))
    assert "Removed on purpose by the topics' log policy" in text
    assert (
        "25 acknowledged records expired before the group read them: chaos[1] 25 under retention.ms=2000."
        in text
    )
