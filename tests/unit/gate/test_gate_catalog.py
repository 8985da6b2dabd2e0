"""The lint against the catalog's own configurations: every built-in variant's settings, judged by the lint,
give the variant's expected verdict — or the difference is listed, with its reason, in docs/gate.md.

A variant's configuration is its ``producer_config`` / ``consumer_config`` / ``topic_config`` and claimed
``guarantee``, plus what the scenario file sets in code (:data:`REPLICATION`, :func:`_application`): the
lint sees a configuration, not the test body.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest

from chaos.gate.cases import SERVICE_CASES
from chaos.gate.gatefile import ClientSettings, ConsumerSide, GateFile, Origin, Setting
from chaos.gate.lint import LintResult, derive
from chaos.scenario import Scenario, Variant, discover

DOC: Final = Path(__file__).resolve().parents[3] / "docs" / "gate.md"
DIFF_HEADING: Final = "## Where the lint and the catalog differ"

REPLICATION: Final[dict[tuple[str, str | None], int]] = {("ISR2", None): 2, ("ISR3", "vulnerable"): 2}
"""Replication factors the scenario files create their topics with (``run.create_topic``), where not 3."""


def _application(case: str, variant: Variant) -> tuple[str, bool, dict[str, str]]:
    """``(commit, transform, extra producer settings)`` of a variant's application, as its scenario runs it:
    group members commit after processing (``MemberSpec`` ``commit_after``, which sets
    ``enable.auto.commit=false``) unless the consumer settings turn on auto commit; O6 is a
    consume-transform-produce, transactional in ``remediated`` (the worker sets the transactional.id)."""
    if case == "O6":
        if variant.name == "remediated":
            return "transaction", True, {"transactional.id": "o6-transform"}
        return "after_processing", True, {}
    consumer = variant.consumer_config or {}
    auto = consumer.get("enable.auto.commit") is True
    store = consumer.get("enable.auto.offset.store", True) is True
    return ("auto" if auto and store else "after_processing"), False, {}


def variant_gate(scenario: Scenario, variant: Variant) -> GateFile:
    """The gate file a team with the variant's configuration would write."""
    where = Origin(f"{scenario.case_id}/{variant.name}")
    commit, transform, extra = _application(scenario.case_id, variant)
    consumer_settings = dict(variant.consumer_config or {})
    if commit != "auto":
        consumer_settings.setdefault("enable.auto.commit", False)
    rf = REPLICATION.get((scenario.case_id, variant.name), REPLICATION.get((scenario.case_id, None), 3))
    topic = {"replication_factor": rf, **(variant.topic_config or {})}
    assert variant.guarantee is not None
    return GateFile(
        guarantee=variant.guarantee,  # type: ignore[arg-type]  # validated by the Variant
        producer=ClientSettings.from_mapping("producer", {**(variant.producer_config or {}), **extra}, where),
        consumer=ConsumerSide(
            ClientSettings.from_mapping("consumer", consumer_settings, where),
            Setting("commit", commit, where),
            Setting("transform", "true" if transform else "false", where),
        ),
        topic=tuple(
            Setting(k, str(v).lower() if isinstance(v, bool) else str(v), where) for k, v in topic.items()
        ),
    )


NOT_BY_CONFIGURATION = {
    "CJ1": "a broker's clock stepped past the retention: retention.ms=1h is sound against every consumer "
    "outage the gate's cases have, and no setting tells the lint a clock will jump",
    "PL1": "every replica of a partition lost power at once: Kafka's default flush settings, which leave "
    "acknowledged writes in page caches and trust replication, are its recommended ones, so the lint does "
    "not fail a topic for them; flush.messages is the remedy's setting, not a gate file's",
}
"""Cases whose ``vulnerable`` variant fails by something no configuration the lint reads shows."""


def _judged() -> list[tuple[str, Variant, LintResult]]:
    """Every built-in variant of the catalog's cases, linted — but the service cases' (what fails their
    ``vulnerable`` variant is the service's code: it commits before it produces) and those of
    :data:`NOT_BY_CONFIGURATION`."""
    return [
        (scenario.case_id, variant, derive(variant_gate(scenario, variant)))
        for scenario in discover()
        if scenario.case_id not in SERVICE_CASES and scenario.case_id not in NOT_BY_CONFIGURATION
        for variant in scenario.variants
    ]


def documented_differences() -> set[str]:
    """``CASE/variant`` of every row of docs/gate.md's differences table."""
    text = DOC.read_text(encoding="utf-8")
    assert DIFF_HEADING in text, f"docs/gate.md has no section {DIFF_HEADING!r}"
    section = text.split(DIFF_HEADING, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([A-Z]+[0-9]+/[a-z0-9_]+)` \|", section, flags=re.MULTILINE))


def test_every_variant_is_judged_as_the_catalog_expects_or_documented() -> None:
    judged = _judged()
    assert len(judged) >= 30, "the catalog's variants were not discovered"
    differences = {
        f"{case}/{variant.name}"
        for case, variant, result in judged
        if ("pass" if result.kept else "fail") != variant.expected_verdict
    }
    documented = documented_differences()
    assert differences - documented == set(), (
        f"the lint and the catalog disagree on {sorted(differences - documented)}: fix the lint, or explain "
        f"each in docs/gate.md under {DIFF_HEADING!r}"
    )
    assert documented - differences == set(), (
        f"docs/gate.md lists differences that are gone: {documented - differences}"
    )


def test_a_fail_variant_is_flagged_by_a_rule_its_own_case_shows() -> None:
    """Not just flagged: one violated rule names the variant's case (the lint knows why it fails)."""
    for case, variant, result in _judged():
        if variant.expected_verdict != "fail":
            continue
        cases = {c for f in result.violations for c in f.rule.cases}
        assert case in cases, f"{case}/{variant.name}: violations {[f.rule.id for f in result.violations]}"


def test_each_documented_difference_is_shown_by_another_case() -> None:
    """A pass variant the lint flags is flagged by rules whose cases are others: the configuration can fail
    the claim, this case's fault does not provoke it (docs/gate.md explains each)."""
    for case, variant, result in _judged():
        if f"{case}/{variant.name}" not in documented_differences():
            continue
        assert variant.expected_verdict == "pass"
        for finding in result.violations:
            assert case not in finding.rule.cases, f"{case}/{variant.name}: {finding.rule.id}"


@pytest.mark.parametrize("name", ["vulnerable", "remediated"])
def test_the_isr2_variants_gate_file_carries_the_catalogs_settings(name: str) -> None:
    scenario = next(s for s in discover() if s.case_id == "ISR2")
    gate = variant_gate(scenario, scenario.variant(name))
    assert gate.topic_setting("replication_factor").value == "2"
    unclean = gate.topic_setting("unclean.leader.election.enable").value
    assert unclean == ("true" if name == "vulnerable" else "false")
