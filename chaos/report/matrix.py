"""The catalog across configurations: report trees side by side (one per Kafka version, protocol or client),
one row per case variant, each cell the run's verdict and the figures the cases are about — acknowledged
records lost, records the group never read, duplicates, the longest produce outage and the longest consume
gap. Markdown, for docs/matrix.md and a team's notes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from chaos.audit.auditfile import read_audit
from chaos.audit.facts import AuditFacts
from chaos.errors import ChaosError, ConfigError
from chaos.report.render import find_runs, load_summary
from chaos.run.manifest import read_scenario

DUPLICATES = ("duplicate_in_log", "duplicate_delivery_after_rebalance", "duplicate_delivery_other")


@dataclass(frozen=True)
class Cell:
    """One run of one case variant in one column."""

    verdict: str
    lost: int | None
    unseen: int | None
    duplicates: int | None
    outage_s: float | None
    gap_s: float | None
    kafka_version: str | None
    started_ts: float | None

    def text(self) -> str:
        figures = [self.verdict]
        if self.lost is not None:
            figures.append(f"lost {self.lost}")
        if self.unseen:
            figures.append(f"unseen {self.unseen}")
        if self.duplicates:
            figures.append(f"dup {self.duplicates}")
        if self.outage_s is not None:
            figures.append(f"outage {self.outage_s:.1f} s")
        if self.gap_s is not None:
            figures.append(f"consume gap {self.gap_s:.1f} s")
        return " · ".join(figures)


def _longest_gap(facts: AuditFacts | None) -> float | None:
    gap = facts.availability.consumer.longest_gap() if facts is not None else None
    return gap.gap_s if gap is not None else None


Row = tuple[str, str]
"""(case id, scenario id with its ``[variant]``)."""


def collect(root: Path) -> dict[Row, Cell]:
    """Every run under ``root`` (a ``make chaos`` or gate report tree) by case variant; of several runs of
    one variant (reruns, retries), the latest."""
    cells: dict[Row, Cell] = {}
    for run in find_runs(root):
        summary = load_summary(run)
        try:
            audit = read_audit(run)
            info = read_scenario(run)
        except ChaosError:
            audit, info = None, None
        facts = audit.facts if audit is not None else None
        cell = Cell(
            verdict=summary.verdict,
            lost=facts.anomaly("lost_acked").count if facts else None,
            unseen=facts.anomaly("unseen_by_group").count if facts else None,
            duplicates=sum(facts.anomaly(name).count for name in DUPLICATES) if facts else None,
            outage_s=facts.availability.longest_outage_s if facts else None,
            gap_s=_longest_gap(facts),
            kafka_version=info.kafka_version if info else None,
            started_ts=summary.started_ts,
        )
        row = (summary.case_id or "-", summary.scenario_id)
        old = cells.get(row)
        if old is None or (cell.started_ts or 0.0) >= (old.started_ts or 0.0):
            cells[row] = cell
    return cells


def matrix_markdown(columns: Sequence[tuple[str, Path]]) -> str:
    """A Markdown table: a row per case variant found in any column, a column per ``(label, report tree)``;
    ``≠`` marks a row whose verdicts differ between columns, ``—`` a variant a column did not run."""
    found = [(label, collect(root)) for label, root in columns]
    rows = sorted({row for _, cells in found for row in cells})
    lines = [
        "| case | scenario | " + " | ".join(label for label, _ in found) + " |",
        "|---|---|" + "---|" * len(found),
    ]
    for case, scenario in rows:
        cells = [cells.get((case, scenario)) for _, cells in found]
        verdicts = {c.verdict for c in cells if c is not None}
        mark = " ≠" if len(verdicts) > 1 else ""
        texts = (c.text() if c is not None else "—" for c in cells)
        lines.append(f"| {case}{mark} | {scenario} | " + " | ".join(texts) + " |")
    return "\n".join(lines) + "\n"


def parse_columns(specs: Iterable[str]) -> list[tuple[str, Path]]:
    """``LABEL=REPORT_DIR`` pairs; a :class:`ConfigError` names a malformed one or a missing directory."""
    columns = []
    for spec in specs:
        label, sep, where = spec.partition("=")
        path = Path(where).expanduser()
        if not sep or not label or not where:
            raise ConfigError(f"column {spec!r}: expected LABEL=REPORT_DIR, e.g. kafka-3.9.2=reports-3.9.2")
        if not path.is_dir():
            raise ConfigError(f"column {spec!r}: {path} is not a directory (a report tree of `make chaos`)")
        columns.append((label, path))
    return columns
