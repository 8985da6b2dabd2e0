"""What the audit costs beside the runs it audits, over a report tree (``make chaos``'s ``reports/``).

Every finished run's ``scenario.json`` records ``timings``: ``history_s`` (the history open to closed:
the workload, the faults and the final drain) and ``audit_s`` (the audit, by the engine its ``audit.json``
names). This prints them per run, in the order the runs started, and their medians; the first audit of
the tree (a session's first pays the engine's start and its cold JIT) apart from the warm ones. The
ratio the audit is judged by is each run's ``audit_s / history_s``, its median over the warm audits.

    python benchmarks/run_costs.py reports/ [--engine spark] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from chaos.audit.auditfile import read_audit  # noqa: E402
from chaos.run.files import RunFileError  # noqa: E402
from chaos.run.manifest import read_scenario  # noqa: E402


@dataclass(frozen=True)
class RunCost:
    run: str
    engine: str
    started_ts: float
    history_s: float
    audit_s: float

    @property
    def ratio(self) -> float:
        return self.audit_s / self.history_s if self.history_s > 0 else float("inf")


def run_costs(tree: Path) -> list[RunCost]:
    """Every run under ``tree`` with both timings and an audit, in the order they started."""
    found = []
    for path in sorted(tree.rglob("scenario.json")):
        run_dir = path.parent
        try:
            info, audit = read_scenario(run_dir), read_audit(run_dir)
        except RunFileError as exc:
            print(f"skipped {run_dir}: {exc}", file=sys.stderr)
            continue
        if info is None or audit is None or info.started_ts is None:
            continue
        timings = info.timings
        if "history_s" in timings and "audit_s" in timings:
            found.append(
                RunCost(
                    str(run_dir.relative_to(tree)),
                    audit.engine,
                    info.started_ts,
                    timings["history_s"],
                    timings["audit_s"],
                )
            )
    return sorted(found, key=lambda c: c.started_ts)


def summary(costs: list[RunCost]) -> dict[str, object]:
    """The medians: every run's, and the warm audits' (all but the first)."""
    warm = costs[1:]
    return {
        "runs": len(costs),
        "first_audit_s": costs[0].audit_s if costs else None,
        "median_history_s": statistics.median(c.history_s for c in costs) if costs else None,
        "median_warm_audit_s": statistics.median(c.audit_s for c in warm) if warm else None,
        "median_warm_ratio": statistics.median(c.ratio for c in warm) if warm else None,
        "max_warm_ratio": max(c.ratio for c in warm) if warm else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("tree", type=Path, help="a report tree (reports/) or any directory holding runs")
    parser.add_argument("--engine", help="only the runs audited by this engine (spark, reference)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    costs = [c for c in run_costs(args.tree) if args.engine in (None, c.engine)]
    if not costs:
        print(f"{args.tree}: no finished run with its timings and an audit", file=sys.stderr)
        return 2
    totals = summary(costs)
    if args.json:
        print(json.dumps({"summary": totals, "runs": [asdict(c) for c in costs]}, indent=2))
        return 0
    for c in costs:
        print(f"{c.history_s:8.1f} s history {c.audit_s:7.1f} s audit ({c.engine}) {c.ratio:6.3f}x  {c.run}")
    print(f"# {totals['runs']} runs", *(f"{key} {value:.3f}" for key, value in totals.items() if key != "runs"
                                         and isinstance(value, float)), sep="; ")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
