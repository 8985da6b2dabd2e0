"""Evidence for the page: expected symptoms looked up in the history and the broker logs, and broker log
excerpts around each fault.

Broker logs are the files ``<run_dir>/<log_dir>/*.log.gz`` that :meth:`KafkaCluster.capture_logs` writes
(``*.log`` from older runs; :mod:`chaos.cluster.logs` lists and reads both): each line starts with Docker's
RFC 3339 UTC timestamp (``2026-11-25T21:57:17.801952109Z``), then the broker's own log4j line
(``[2026-11-25 21:57:17,796] INFO …``). A line's time is the Docker timestamp, else the log4j one read as
UTC; a line without either (a stack-trace line) takes the time of the line before. A team's service writes
``<name>-<n>.log`` beside them (:mod:`chaos.service`), each line stamped the same way: its lines are read
with the brokers'.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]

from chaos.cluster.logs import read_log_lines
from chaos.report.inputs import ExpectedSymptom
from chaos.report.timeline import FaultSpan, rows

EXCERPT_RADIUS_S: Final = 5.0
MAX_EXCERPT_LINES: Final = 20
"""Per log file and fault edge."""
MAX_MATCH_LINES: Final = 5
MAX_LINE_CHARS: Final = 600

_DOCKER_TS: Final = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d+))?(?:Z|[+-]00:?00)\s?")
_LOG4J_TS: Final = re.compile(r"^\[(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:[,.](\d+))?\]")


@dataclass(frozen=True)
class LogLine:
    """One line of a log file with its time (``None`` when no line up to it had a timestamp)."""

    file: str
    lineno: int
    ts: float | None
    text: str


@dataclass(frozen=True)
class SymptomMatch:
    """An expected symptom and what the run showed of it. ``searched`` is false when its source was
    missing (no history, or no broker logs), so "not observed" cannot be claimed."""

    symptom: ExpectedSymptom
    searched: bool
    count: int
    first_ts: float | None
    examples: tuple[str, ...]

    @property
    def observed(self) -> bool:
        return self.count > 0


@dataclass(frozen=True)
class Excerpt:
    """Log lines of every file within ``EXCERPT_RADIUS_S`` of one fault's inject or heal, in time order;
    ``truncated`` lines were left out (more than ``MAX_EXCERPT_LINES`` in one file)."""

    fault: str
    edge: str
    at_ts: float
    lines: tuple[LogLine, ...]
    truncated: int


def _epoch(day: str, clock: str, fraction: str | None) -> float:
    seconds = calendar.timegm(time.strptime(f"{day} {clock}", "%Y-%m-%d %H:%M:%S"))
    return seconds + (float(f"0.{fraction}") if fraction else 0.0)


def parse_line(raw: str) -> tuple[float | None, str]:
    """A log line's UTC epoch time (or ``None``) and its text without the Docker timestamp prefix."""
    m = _DOCKER_TS.match(raw)
    if m:
        return _epoch(m.group(1), m.group(2), m.group(3)), raw[m.end() :]
    m = _LOG4J_TS.match(raw)
    if m:
        return _epoch(m.group(1), m.group(2), m.group(3)), raw
    return None, raw


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + " …"


def scan_logs(
    files: Sequence[Path],
    symptoms: Sequence[ExpectedSymptom],
    spans: Sequence[FaultSpan],
    since: float | None = None,
) -> tuple[list[SymptomMatch], list[Excerpt]]:
    """One pass over each log file (:func:`chaos.cluster.logs.log_files`): matches of the ``broker_log``
    symptoms, and excerpts of the lines within ``EXCERPT_RADIUS_S`` of every fault inject and heal.

    ``since`` (the run's start): a symptom is only matched by a line of the run itself — the captured
    logs begin a margin earlier, where a line the previous run on the same cluster caused may stand."""
    wanted = [s for s in symptoms if s.kind == "broker_log"]
    edges: list[tuple[str, str, float]] = []
    for span in spans:
        edges.append((span.label, "inject", span.inject_ts))
        if span.heal_ts is not None:
            edges.append((span.label, "heal", span.heal_ts))
    found: dict[int, list[LogLine]] = {i: [] for i in range(len(wanted))}
    counts = [0] * len(wanted)
    merged: list[list[LogLine]] = [[] for _ in edges]
    extra = [0] * len(edges)
    for path in files:
        picked: list[list[LogLine]] = [[] for _ in edges]
        last_ts: float | None = None
        for lineno, raw in enumerate(read_log_lines(path), start=1):
            ts, text = parse_line(raw)
            if ts is None:
                ts = last_ts
            else:
                last_ts = ts
            line: LogLine | None = None
            in_run = since is None or (ts is not None and ts >= since)
            for i, symptom in enumerate(wanted):
                if in_run and symptom.matches(text):
                    counts[i] += 1
                    line = line or LogLine(path.name, lineno, ts, _clip(text))
                    found[i].append(line)
            if ts is None:
                continue
            for j, (_, _, at) in enumerate(edges):
                if abs(ts - at) <= EXCERPT_RADIUS_S:
                    if len(picked[j]) < MAX_EXCERPT_LINES:
                        picked[j].append(line or LogLine(path.name, lineno, ts, _clip(text)))
                    else:
                        extra[j] += 1
        for j, lines in enumerate(picked):
            merged[j] += lines
    excerpts = [
        Excerpt(
            label,
            edge,
            at,
            tuple(sorted(merged[j], key=lambda ln: (ln.ts or 0.0, ln.file, ln.lineno))),
            extra[j],
        )
        for j, (label, edge, at) in enumerate(edges)
        if merged[j]
    ]
    matches = []
    for i, symptom in enumerate(wanted):
        lines = sorted(found[i], key=lambda ln: (ln.ts is None, ln.ts or 0.0, ln.file, ln.lineno))
        first = next((ln.ts for ln in lines if ln.ts is not None), None)
        examples = tuple(f"{ln.file}:{ln.lineno}: {ln.text}" for ln in lines[:MAX_MATCH_LINES])
        matches.append(SymptomMatch(symptom, bool(files), counts[i], first, examples))
    excerpts.sort(key=lambda e: (e.at_ts, e.edge))
    return matches, excerpts


def history_symptoms(
    table: pa.Table | None, symptoms: Sequence[ExpectedSymptom], t0: float | None
) -> list[SymptomMatch]:
    """Matches of the ``error_code`` and ``client_log`` symptoms in the history's events."""
    out = []
    for symptom in symptoms:
        if symptom.kind == "broker_log":
            continue
        if table is None:
            out.append(SymptomMatch(symptom, False, 0, None, ()))
            continue
        hits: list[dict[str, Any]]
        if symptom.kind == "error_code" and not symptom.regex:
            picked = table.filter(pc.equal(table["error"], symptom.pattern))
            hits = picked.select(["ts", "kind", "process", "error", "message"]).to_pylist()
        elif symptom.kind == "error_code":
            columns = table.select(["ts", "kind", "process", "error", "message"]).to_pylist()
            hits = [e for e in columns if e["error"] and symptom.matches(e["error"])]
        else:
            hits = [
                e
                for e in rows(table, "client_log", ["ts", "kind", "process", "error", "message", "facility"])
                if symptom.matches(e["message"] or "")
            ]
        hits.sort(key=lambda e: e["ts"])
        first = hits[0]["ts"] if hits else None
        examples = tuple(
            _clip(
                f"t+{e['ts'] - (t0 or e['ts']):.3f}s {e['kind']} {e['process']}"
                + (f" [{e['facility']}]" if e.get("facility") else "")
                + (f" {e['error']}" if e["error"] else "")
                + (f": {e['message']}" if e["message"] else "")
            )
            for e in hits[:MAX_MATCH_LINES]
        )
        out.append(SymptomMatch(symptom, True, len(hits), first, examples))
    return out
