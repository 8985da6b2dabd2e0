"""Timeline charts of one run's history, as Plotly figure dicts (``{"data": [...], "layout": {...}}``).

Time on every chart is seconds since the run's first event (wall clock, ``ts``); fault windows (inject to
heal, from the history's ``fault`` events) are shaded on every chart, and so are the consume stalls the audit
measured (``audit.json``: each partition's longest, when at least :data:`STALL_SHADE_S`), named whether a
fault was active or not. Nothing here judges the run: it counts what the history holds and draws what the
audit found (the stalls, the consumer-lag series). Every string from the run goes through :func:`plot_text`,
because Plotly interprets a small HTML subset in trace names, hover texts and annotations.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]

from chaos.audit.facts import ConsumeGap, Consumption
from chaos.faults.base import NOT_MEASURED
from chaos.history.reader import events_from_table, filter_kinds
from chaos.history.windows import fault_windows
from chaos.run.events import FaultEvent

MAX_BUCKETS: Final = 1800
"""At most this many time buckets per chart: 1 s buckets up to 30 minutes, wider beyond."""
MAX_PARTITION_TRACES: Final = 24
ERROR_LEVELS: Final = frozenset({"emergency", "alert", "critical", "error", "warning"})

STALL_SHADE_S: Final = 1.0
"""Consume stalls at least this long are shaded and named; shorter ones are the group's ordinary polling."""

_FAULT_FILL: Final = "rgba(214, 39, 40, 0.13)"
_STALL_FILL: Final = "rgba(31, 119, 180, 0.14)"
_STALL_COLOR: Final = "#1f77b4"
_STALL_TEXT: Final = "#1f4e99"
FAULT_COLORS: Final = ("#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f")
"""A fault kind's colour in every chart's window lane, by the kind's rank among the run's fault kinds."""
PARTITION_COLORS: Final = (
    "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f",
    "#d62728",
)  # fmt: skip
"""A partition's colour, the same in the ISR and the leader chart."""
FONT_FAMILY: Final = '"Noto Sans", "Noto Sans CJK SC", "DejaVu Sans", Arial, sans-serif'
"""The charts' font: Latin first, then a CJK font, so a run's CJK text never draws as boxes."""

LANE_ROW_PX: Final = 16
"""The window lane above each chart: one row of this height per level of labels that would overlap."""
LANE_MAX_ROWS: Final = 6
LANE_ASSUMED_PLOT_PX: Final = 1000.0
"""The plot width the lane packs its labels for (a 1280 px page draws ~1100 px; a narrower one hides the
labels that would touch, in the page's script, and keeps them as hover text)."""
LANE_CHAR_PX: Final = 6.2
"""The width of one character of a 10 px label, generously (DejaVu Sans averages ~5.8 px)."""
_COLORS: Final = {"ok": "#2ca02c", "fail": "#d62728", "info": "#ff7f0e"}
_REBALANCE_SYMBOLS: Final = {"assign": "circle", "revoke": "triangle-down", "lost": "x"}


def plot_text(value: object) -> str:
    """A run-provided string made inert for Plotly's text renderer: ``&``, ``<``, ``>`` become entities,
    which Plotly shows literally (so ``<script>`` reads as text, never as markup)."""
    return str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass(frozen=True)
class FaultSpan:
    """One fault window from its inject event to its heal (:func:`fault_spans`)."""

    fault: str
    target: str
    inject_ts: float
    heal_ts: float | None
    inject_mono: float
    heal_mono: float | None
    params: str
    errors: tuple[str, ...] = ()
    effect: str = ""
    """The fault's proof that it landed, from its heal event (``landed: …`` / ``no effect: …``); empty
    when its kind measures none (docs/faults.md, "Proof that a fault landed")."""

    @property
    def label(self) -> str:
        return f"{self.fault} {self.target}"


@dataclass(frozen=True)
class StallSpan:
    """One partition's longest consume stall (the audit's ``availability.consumer.gaps``), on the run's
    clock, with the fault windows it overlaps (``during``: their labels; empty: no fault active)."""

    gap: ConsumeGap
    during: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``consume stall chaos-1 12.3 s (no fault active)``."""
        g = self.gap
        where = "during " + ", ".join(self.during) if self.during else "no fault active"
        return (
            f"consume stall {g.topic}-{g.partition} {g.gap_s:.1f} s ({where}"
            + ("" if g.resumed else "; never resumed")
            + ")"
        )


def stall_spans(consumer: Consumption | None, faults: Sequence[FaultSpan]) -> tuple[StallSpan, ...]:
    """The stalls worth shading: each partition's longest, when at least :data:`STALL_SHADE_S`, in time
    order, each with the fault windows it overlaps."""
    if consumer is None:
        return ()
    spans = []
    for g in sorted(consumer.gaps, key=lambda g: (g.start_mono, g.topic, g.partition)):
        if g.gap_s < STALL_SHADE_S:
            continue
        during = faults_during(faults, g.start_mono, g.end_mono)
        spans.append(StallSpan(g, during))
    return tuple(spans)


def faults_during(faults: Sequence[FaultSpan], start_mono: float, end_mono: float) -> tuple[str, ...]:
    """The labels of the fault windows that overlap ``[start_mono, end_mono]`` (an open one runs on)."""
    return tuple(
        f.label
        for f in faults
        if f.inject_mono <= end_mono and (f.heal_mono is None or f.heal_mono >= start_mono)
    )


@dataclass(frozen=True)
class Chart:
    """One chart: its DOM id, title, a caption, and the figure (``None``: nothing to draw, see ``empty``)."""

    id: str
    title: str
    caption: str
    figure: dict[str, Any] | None
    empty: str = ""


@dataclass(frozen=True)
class Timeline:
    """What the charts and the rest of the page need from the history."""

    t0: float | None
    t_end: float | None
    mono0: float | None
    faults: tuple[FaultSpan, ...]
    charts: tuple[Chart, ...]
    kind_counts: dict[str, int] = field(default_factory=dict)
    stalls: tuple[StallSpan, ...] = ()

    @property
    def duration_s(self) -> float | None:
        return None if self.t0 is None or self.t_end is None else self.t_end - self.t0

    def rel(self, ts: float | None) -> float | None:
        """Seconds since the first event for a wall-clock time."""
        return None if ts is None or self.t0 is None else ts - self.t0

    def rel_mono(self, mono: float | None) -> float | None:
        """Seconds since the first event for a ``time.monotonic()`` time (the audit's clock)."""
        return None if mono is None or self.mono0 is None else mono - self.mono0


def rows(table: pa.Table, kind: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    """The given columns of the events of one kind, as dicts, in record order."""
    picked = table.filter(pc.equal(table["kind"], kind)).select(list(columns))
    return list(picked.to_pylist())


def fault_spans(table: pa.Table) -> tuple[FaultSpan, ...]:
    """Fault windows, one per inject, paired with their heals by
    :func:`chaos.history.windows.fault_windows`; a failed heal, or a heal after a failed inject, adds its
    error."""
    events = [e for e in events_from_table(filter_kinds(table, "fault")) if isinstance(e, FaultEvent)]
    spans = []
    for pair in fault_windows(events):
        inject, heal = pair.inject, pair.heal
        edges = (inject, heal) if heal is not None else (inject,)
        said = ((e.action, " ".join(t for t in (e.error, e.message) if t)) for e in edges)
        errors = tuple(f"{action}: {text}" for action, text in said if text)
        spans.append(
            FaultSpan(
                inject.fault,
                inject.target,
                inject.ts,
                heal.ts if heal is not None else None,
                inject.mono,
                heal.mono if heal is not None else None,
                inject.params or "{}",
                errors,
                _effect_text(heal.params if heal is not None else None),
            )
        )
    return tuple(spans)


def _effect_text(heal_params: str | None) -> str:
    """The fault table's "landed?" cell: the heal's measured effect, else why none was measured."""
    try:
        params = json.loads(heal_params or "{}")
        effect, notes = params.get("effect"), params.get("notes")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(effect, dict):
        notes = notes if isinstance(notes, list) else []
        return "; ".join(n for n in notes if isinstance(n, str) and n.startswith(NOT_MEASURED))
    return f"{'landed' if effect.get('observed') else 'no effect'}: {effect.get('evidence', '')}"


class _Axis:
    """Time buckets from the first to the last event."""

    def __init__(self, t0: float, t_end: float) -> None:
        self.t0 = t0
        self.duration = max(t_end - t0, 0.0)
        self.width = max(1, math.ceil(self.duration / MAX_BUCKETS)) if self.duration > 0 else 1
        self.n = int(self.duration // self.width) + 1
        self.x = [i * self.width for i in range(self.n)]

    def bucket(self, ts: float) -> int:
        return min(max(int((ts - self.t0) // self.width), 0), self.n - 1)

    def rates(self, times: Iterable[float]) -> list[float]:
        counts = [0] * self.n
        for ts in times:
            counts[self.bucket(ts)] += 1
        return [c / self.width for c in counts]


def _nearest_rank(values: list[float], percentile: int) -> float:
    values.sort()
    rank = (percentile * len(values) + 99) // 100
    return values[max(rank, 1) - 1]


def _band(x0: float, x1: float, fill: str, top: float = 1.0) -> dict[str, Any]:
    """A shaded band over the plot area (up to ``top``, in paper units) from ``x0`` to ``x1`` (at least
    0.05 s wide), below the traces."""
    return {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": x0,
        "x1": max(x1, x0 + 0.05),
        "y0": 0,
        "y1": top,
        "fillcolor": fill,
        "line": {"width": 0},
        "layer": "below",
    }


def _layout(
    axis: _Axis, spans: Sequence[FaultSpan], t0: float, yaxis: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    shapes = []
    for s in spans:
        x0 = s.inject_ts - t0
        x1 = (s.heal_ts if s.heal_ts is not None else t0 + axis.duration) - t0
        shapes.append(_band(x0, x1, _FAULT_FILL))
    layout: dict[str, Any] = {
        "height": 280,
        "margin": {"l": 60, "r": 20, "t": 28, "b": 40},
        "xaxis": {"range": [0, max(axis.duration, 1.0)], "ticksuffix": " s", "zeroline": False},
        "yaxis": yaxis,
        "shapes": shapes,
        "annotations": [],
        "font": {"family": FONT_FAMILY},
        "legend": {"orientation": "h", "y": -0.12, "yanchor": "top"},
        "hovermode": "closest",
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
    }
    layout.update(extra)
    return layout


def _figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    return {"data": data, "layout": layout}


def build_timeline(table: pa.Table, consumer: Consumption | None = None) -> Timeline:
    """Compute every chart of the page from a history table (any size; one pass per kind) and, when the
    audit's consumer side is given (``audit.json``), its stalls (shaded) and lag series (a chart)."""
    counts_raw = pc.value_counts(table["kind"]).to_pylist() if table.num_rows else []
    kind_counts = {item["values"]: item["counts"] for item in counts_raw}
    if table.num_rows == 0:
        empty = "the history holds no events"
        return Timeline(
            None, None, None, (), tuple(Chart(i, t, c, None, empty) for i, t, c in _CHARTS), kind_counts
        )
    first = int(pc.index(table["ts"], pc.min(table["ts"])).as_py())
    t0 = float(table["ts"][first].as_py())
    mono0 = float(table["mono"][first].as_py())
    t_end = float(pc.max(table["ts"]).as_py())
    axis = _Axis(t0, t_end)
    spans = fault_spans(table)
    builders = {
        "chart-produce": _produce,
        "chart-latency": _latency,
        "chart-consume": _consume,
        "chart-isr": _isr,
        "chart-leader": _leader,
        "chart-group": _group,
        "chart-errors": _errors,
    }
    stalls = stall_spans(consumer, spans)
    lane = lane_items(spans, stalls, t0, mono0, axis.duration)
    charts = []
    for chart_id, title, caption in _CHARTS:
        if chart_id == "chart-lag":
            figure, empty = _lag(consumer, axis, spans, t0, mono0)
        else:
            figure, empty = builders[chart_id](table, axis, spans, t0)
        if figure is not None:
            _shade_stalls(figure["layout"], stalls, mono0)
            add_lane(figure, lane, axis.duration)
        charts.append(Chart(chart_id, title, caption, figure, empty))
    return Timeline(t0, t_end, mono0, spans, tuple(charts), kind_counts, stalls)


def _shade_stalls(layout: dict[str, Any], stalls: Sequence[StallSpan], mono0: float) -> None:
    """Add each consume stall to a chart's layout as a shaded band (its name is in the window lane)."""
    for stall in stalls:
        x0, x1 = stall.gap.start_mono - mono0, stall.gap.end_mono - mono0
        layout["shapes"].append(_band(x0, x1, _STALL_FILL))


@dataclass(frozen=True)
class LaneItem:
    """One window in the lane above a chart: a fault window or a consume stall, its row (labels in one
    row never overlap at :data:`LANE_ASSUMED_PLOT_PX`), its colour, and whether its label is drawn (a
    window beyond :data:`LANE_MAX_ROWS` rows is named by its hover text only)."""

    x0: float
    x1: float
    label: str
    kind: str
    color: str
    row: int
    labelled: bool = True


def _rgba(color: str, alpha: float) -> str:
    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha})"


def lane_items(
    faults: Sequence[FaultSpan],
    stalls: Sequence[StallSpan],
    t0: float,
    mono0: float,
    duration: float,
) -> tuple[LaneItem, ...]:
    """The fault windows, then the consume stalls, packed into rows: an item goes into the first row where
    it begins after the previous item's bar and label end (label width estimated at
    :data:`LANE_CHAR_PX` per character on a plot of :data:`LANE_ASSUMED_PLOT_PX`). A fault kind has the
    same colour on every chart (:data:`FAULT_COLORS`), stalls theirs."""
    kinds = sorted({f.fault for f in faults})
    colors = {k: FAULT_COLORS[i % len(FAULT_COLORS)] for i, k in enumerate(kinds)}
    raw: list[tuple[float, float, str, str, str]] = []
    for f in faults:
        x1 = (f.heal_ts if f.heal_ts is not None else t0 + duration) - t0
        label = f.label + ("" if f.heal_ts is not None else " (never healed)")
        raw.append((f.inject_ts - t0, x1, label, "fault", colors[f.fault]))
    for st in stalls:
        raw.append((st.gap.start_mono - mono0, st.gap.end_mono - mono0, st.label, "stall", _STALL_COLOR))
    per_px = max(duration, 1.0) / LANE_ASSUMED_PLOT_PX
    ends: list[float] = []
    items = []
    for x0, x1, label, kind, color in sorted(raw, key=lambda r: (r[3] != "fault", r[0])):
        reach = max(x1, x0 + (len(label) * LANE_CHAR_PX + 8) * per_px)
        row = next((i for i, end in enumerate(ends) if x0 >= end), None)
        labelled = True
        if row is None and len(ends) < LANE_MAX_ROWS:
            row = len(ends)
            ends.append(reach)
        elif row is None:  # every row is taken here: the bar goes where it ends first, named on hover
            row = min(range(len(ends)), key=lambda i: ends[i])
            labelled = False
            ends[row] = max(ends[row], x1)
        else:
            ends[row] = reach
        items.append(LaneItem(x0, max(x1, x0 + 0.05), label, kind, color, row, labelled))
    order = {(r[0], r[2]): i for i, r in enumerate(raw)}  # faults first, each in the run's order
    return tuple(sorted(items, key=lambda it: order[(it.x0, it.label)]))


def add_lane(figure: dict[str, Any], items: Sequence[LaneItem], duration: float) -> None:
    """Draw ``items`` in a lane of their own above the plot area (its own hidden y axis, ``yaxis9``): a
    coloured bar per window with its name on hover, and its label beside the bar in its row."""
    if not items:
        return
    layout = figure["layout"]
    rows = max(it.row for it in items) + 1
    lane_px = rows * LANE_ROW_PX + 6
    margin = layout["margin"]
    plot_px = layout["height"] - margin["t"] - margin["b"]
    layout["height"] += lane_px
    top = plot_px / (plot_px + lane_px)
    layout["yaxis"]["domain"] = [0, top]
    for shape in layout["shapes"]:
        shape["y1"] = top
    layout["yaxis9"] = {
        "domain": [top + 0.01, 1],
        "range": [rows, 0],
        "visible": False,
        "fixedrange": True,
    }
    for it in items:
        y0, y1 = it.row + 0.15, it.row + 0.85
        figure["data"].append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": [it.x0, it.x1, it.x1, it.x0, it.x0],
                "y": [y0, y0, y1, y1, y0],
                "yaxis": "y9",
                "fill": "toself",
                "fillcolor": _rgba(it.color, 0.35),
                "line": {"width": 1, "color": it.color},
                "hoveron": "fills",
                "hoverinfo": "text",
                "text": plot_text(f"{it.label}: t+{it.x0:.1f}–{it.x1:.1f} s"),
                "name": plot_text(it.label),
                "showlegend": False,
            }
        )
        if it.labelled:
            layout["annotations"].append(
                {
                    "x": max(it.x0, 0.0),
                    "y": it.row + 0.5,
                    "xref": "x",
                    "yref": "y9",
                    "text": plot_text(it.label),
                    "showarrow": False,
                    "xanchor": "left",
                    "yanchor": "middle",
                    "xshift": 2,
                    "font": {"size": 10, "color": "#a61c1c" if it.kind == "fault" else _STALL_TEXT},
                    "captureevents": False,
                }
            )


_CHARTS: Final = (
    (
        "chart-produce",
        "Produce: acknowledgements and errors per second",
        "Outcome of each send by the time its delivery report arrived: ok (acknowledged), fail (definitely "
        "not written), info (outcome unknown).",
    ),
    (
        "chart-latency",
        "Ack latency p50 / p99",
        "Invoke-to-acknowledgement time of the ok sends, nearest-rank percentiles per time bucket.",
    ),
    (
        "chart-consume",
        "Consume rate",
        "Records delivered to the consumer group per second; the final drain's reads shown apart.",
    ),
    (
        "chart-lag",
        "Consumer lag",
        "The group's offset lag as the audit measured it (audit.json): per partition it delivered from, the "
        "highest readable offset minus the highest delivered one, summed over its partitions; "
        "120 points from its first delivery to its last event.",
    ),
    (
        "chart-isr",
        "ISR size per partition",
        "In-sync replicas of each partition in the cluster-state samples; a break is a failed sample.",
    ),
    (
        "chart-leader",
        "Leader per partition",
        "Leader broker id of each partition in the cluster-state samples; 0 means no leader.",
    ),
    (
        "chart-group",
        "Group membership and rebalances",
        "Members of the consumer group in the cluster-state samples (left axis) and every assign / revoke / "
        "lost callback by member (right axis).",
    ),
    (
        "chart-errors",
        "Client error codes over time",
        "Error codes in the history (send outcomes, commits, probes, samples, client errors) and librdkafka "
        "warnings by facility; marker size grows with the count per time bucket.",
    ),
)

Built = tuple[dict[str, Any] | None, str]


def _produce(table: pa.Table, axis: _Axis, spans: Sequence[FaultSpan], t0: float) -> Built:
    outcomes = rows(table, "send_outcome", ["ts", "outcome"])
    if not outcomes:
        return None, "no send_outcome events in the history"
    by: dict[str, list[float]] = {"ok": [], "fail": [], "info": []}
    for ev in outcomes:
        by.setdefault(ev["outcome"], []).append(ev["ts"])
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{name} /s",
            "x": axis.x,
            "y": axis.rates(times),
            "line": {"color": _COLORS.get(name), "width": 1.5, "shape": "hv"},
        }
        for name, times in by.items()
    ]
    return _figure(
        data, _layout(axis, spans, t0, {"title": {"text": "sends / s"}, "rangemode": "tozero"})
    ), ""


def _latency(table: pa.Table, axis: _Axis, spans: Sequence[FaultSpan], t0: float) -> Built:
    outcomes = [
        e
        for e in rows(table, "send_outcome", ["ts", "outcome", "latency_ms"])
        if e["outcome"] == "ok" and e["latency_ms"] is not None
    ]
    if not outcomes:
        return None, "no acknowledged send with a latency in the history"
    buckets: dict[int, list[float]] = defaultdict(list)
    for ev in outcomes:
        buckets[axis.bucket(ev["ts"])].append(float(ev["latency_ms"]))
    p50: list[float | None] = [None] * axis.n
    p99: list[float | None] = [None] * axis.n
    for b, values in buckets.items():
        p50[b] = _nearest_rank(values, 50)
        p99[b] = _nearest_rank(values, 99)
    low = min(v for v in p50 if v is not None)
    high = max(v for v in p99 if v is not None)
    log_scale = low > 0 and high / low > 100
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "p50",
            "x": axis.x,
            "y": p50,
            "marker": {"size": 3},
            "line": {"width": 1.5, "color": "#1f77b4"},
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "p99",
            "x": axis.x,
            "y": p99,
            "marker": {"size": 3},
            "line": {"width": 1.5, "color": "#9467bd"},
        },
    ]
    yaxis = {"title": {"text": "ms"}, "type": "log" if log_scale else "linear"}
    if not log_scale:
        yaxis["rangemode"] = "tozero"
    return _figure(data, _layout(axis, spans, t0, yaxis)), ""


def _consume(table: pa.Table, axis: _Axis, spans: Sequence[FaultSpan], t0: float) -> Built:
    deliveries = rows(table, "delivery", ["ts", "group"])
    drains = rows(table, "drain_read", ["ts"])
    commits = [c for c in rows(table, "commit", ["ts", "outcome"]) if c["outcome"] != "ok"]
    if not deliveries and not drains:
        return None, "no delivery or drain_read events in the history"
    data: list[dict[str, Any]] = []
    groups: dict[str, list[float]] = defaultdict(list)
    for ev in deliveries:
        groups[ev["group"]].append(ev["ts"])
    for group, times in sorted(groups.items()):
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": plot_text(f"delivered /s ({group})"),
                "x": axis.x,
                "y": axis.rates(times),
                "line": {"width": 1.5, "shape": "hv"},
            }
        )
    if drains:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "final drain reads /s (right axis)",
                "yaxis": "y2",
                "x": axis.x,
                "y": axis.rates(e["ts"] for e in drains),
                "line": {"width": 1, "dash": "dot", "color": "#7f7f7f", "shape": "hv"},
            }
        )
    if commits:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "failed/unknown commits /s",
                "x": axis.x,
                "y": axis.rates(e["ts"] for e in commits),
                "line": {"width": 1, "color": "#d62728"},
            }
        )
    extra: dict[str, Any] = {}
    if drains:
        extra["yaxis2"] = {
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "showgrid": False,
            "title": {"text": "drain reads / s"},
        }
        extra["margin"] = {"l": 60, "r": 70, "t": 28, "b": 40}
    layout = _layout(axis, spans, t0, {"title": {"text": "records / s"}, "rangemode": "tozero"}, **extra)
    return _figure(data, layout), ""


def _lag(
    consumer: Consumption | None, axis: _Axis, spans: Sequence[FaultSpan], t0: float, mono0: float
) -> Built:
    if consumer is None:
        return None, "no audit result (audit.json): the lag is the audit's"
    if not consumer.lag:
        return None, "the group delivered nothing (or audit.json predates the consumer-side figures)"
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "offsets behind",
            "x": [p.mono - mono0 for p in consumer.lag],
            "y": [p.lag for p in consumer.lag],
            "line": {"width": 1.5, "color": "#1f77b4"},
        }
    ]
    yaxis = {"title": {"text": "offsets"}, "rangemode": "tozero"}
    return _figure(data, _layout(axis, spans, t0, yaxis)), ""


def _samples(table: pa.Table) -> list[dict[str, Any]]:
    return rows(
        table,
        "cluster_state",
        [
            "ts",
            "partition_states",
            "group",
            "group_state",
            "group_members",
            "error",
            "message",
            "offline_partitions",
            "under_replicated",
        ],
    )


def _partition_series(
    samples: list[dict[str, Any]], t0: float, value: str
) -> tuple[list[dict[str, Any]], int]:
    keys: list[tuple[str, int]] = []
    for s in samples:
        for p in s["partition_states"] or ():
            key = (p["topic"], p["partition"])
            if key not in keys:
                keys.append(key)
    keys.sort()
    shown = keys[:MAX_PARTITION_TRACES]
    series: dict[tuple[str, int], dict[str, list[Any]]] = {k: {"x": [], "y": [], "text": []} for k in shown}
    for s in samples:
        x = s["ts"] - t0
        states = {(p["topic"], p["partition"]): p for p in s["partition_states"] or ()}
        for key in shown:
            p = states.get(key)
            out = series[key]
            out["x"].append(x)
            if s["error"] is not None or p is None:
                out["y"].append(None)
                out["text"].append(plot_text(f"sample failed: {s['error'] or 'partition missing'}"))
                continue
            isr = list(p["isr"] or ())
            out["y"].append(len(isr) if value == "isr" else (p["leader"] if p["leader"] is not None else 0))
            out["text"].append(
                plot_text(
                    f"{key[0]}-{key[1]}: leader {p['leader']}, ISR {isr}, replicas "
                    f"{list(p['replicas'] or ())}" + (f", {p['error']}" if p["error"] else "")
                )
            )
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": plot_text(f"{topic}-{part}"),
            "x": v["x"],
            "y": v["y"],
            "text": v["text"],
            "hoverinfo": "x+text",
            "line": {"shape": "hv", "width": 1.5, "color": PARTITION_COLORS[i % len(PARTITION_COLORS)]},
            "marker": {"size": 3, "color": PARTITION_COLORS[i % len(PARTITION_COLORS)]},
        }
        for i, ((topic, part), v) in enumerate(series.items())
    ]
    return traces, len(keys) - len(shown)


def _isr(table: pa.Table, axis: _Axis, spans: Sequence[FaultSpan], t0: float) -> Built:
    samples = _samples(table)
    if not samples:
        return None, "no cluster_state samples in the history"
    traces, hidden = _partition_series(samples, t0, "isr")
    if not traces:
        return None, "the cluster_state samples hold no partition states"
    under = [(s["ts"] - t0, s["under_replicated"]) for s in samples if s["under_replicated"] is not None]
    if under:
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "under-replicated partitions",
                "x": [u[0] for u in under],
                "y": [u[1] for u in under],
                "line": {"dash": "dot", "color": "#d62728", "shape": "hv"},
            }
        )
    title = "ISR size" + (f" (first {MAX_PARTITION_TRACES} partitions; {hidden} more)" if hidden else "")
    yaxis = {"title": {"text": title}, "rangemode": "tozero", "dtick": 1}
    return _figure(traces, _layout(axis, spans, t0, yaxis)), ""


def _leader(table: pa.Table, axis: _Axis, spans: Sequence[FaultSpan], t0: float) -> Built:
    samples = _samples(table)
    if not samples:
        return None, "no cluster_state samples in the history"
    traces, hidden = _partition_series(samples, t0, "leader")
    if not traces:
        return None, "the cluster_state samples hold no partition states"
    title = "leader id" + (f" (first {MAX_PARTITION_TRACES}; {hidden} more)" if hidden else "")
    yaxis = {"title": {"text": title}, "rangemode": "tozero", "dtick": 1}
    return _figure(traces, _layout(axis, spans, t0, yaxis)), ""


def _group(table: pa.Table, axis: _Axis, spans: Sequence[FaultSpan], t0: float) -> Built:
    samples = [s for s in _samples(table) if s["group"] is not None]
    rebalances = rows(table, "rebalance", ["ts", "process", "action", "member", "generation", "partitions"])
    if not samples and not rebalances:
        return None, "no group samples and no rebalance events in the history"
    data: list[dict[str, Any]] = []
    if samples:
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "members (sampled)",
                "x": [s["ts"] - t0 for s in samples],
                "y": [None if s["error"] else len(s["group_members"] or ()) for s in samples],
                "text": [
                    plot_text(
                        f"{s['group']}: {s['group_state']}, {len(s['group_members'] or ())} members"
                        if not s["error"]
                        else f"sample failed: {s['error']}"
                    )
                    for s in samples
                ],
                "hoverinfo": "x+text",
                "line": {"shape": "hv", "width": 1.5, "color": "#1f77b4"},
                "marker": {"size": 3},
            }
        )
    by_action: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in rebalances:
        by_action[ev["action"]].append(ev)
    for action, events in sorted(by_action.items()):
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"{action} callback",
                "yaxis": "y2",
                "x": [e["ts"] - t0 for e in events],
                "y": [plot_text(e["process"]) for e in events],
                "text": [
                    plot_text(
                        f"{e['process']} {action} gen {e['generation']} member {e['member']}: "
                        + ", ".join(f"{p['topic']}-{p['partition']}" for p in e["partitions"] or ())
                    )
                    for e in events
                ],
                "hoverinfo": "x+text",
                "marker": {"size": 9, "symbol": _REBALANCE_SYMBOLS.get(action, "diamond")},
            }
        )
    yaxis = {"title": {"text": "members"}, "rangemode": "tozero", "dtick": 1}
    extra: dict[str, Any] = {}
    if rebalances:
        extra["yaxis2"] = {
            "overlaying": "y",
            "side": "right",
            "type": "category",
            "title": {"text": "member"},
            "showgrid": False,
        }
        extra["margin"] = {"l": 60, "r": 110, "t": 28, "b": 40}
    return _figure(data, _layout(axis, spans, t0, yaxis, **extra)), ""


def _errors(table: pa.Table, axis: _Axis, spans: Sequence[FaultSpan], t0: float) -> Built:
    picked = table.filter(pc.invert(pc.is_null(table["error"])))
    errors = picked.select(["ts", "kind", "error"]).to_pylist()
    logs = [
        e
        for e in rows(table, "client_log", ["ts", "level", "facility", "error"])
        if e["error"] is None and e["level"] in ERROR_LEVELS
    ]
    if not errors and not logs:
        return None, "no error codes and no client warnings in the history"
    cells: Counter[tuple[str, int]] = Counter()
    kinds: dict[tuple[str, int], set[str]] = defaultdict(set)
    for ev in errors:
        key = (ev["error"], axis.bucket(ev["ts"]))
        cells[key] += 1
        kinds[key].add(ev["kind"])
    for ev in logs:
        key = (f"log:{ev['facility'] or ev['level']}", axis.bucket(ev["ts"]))
        cells[key] += 1
        kinds[key].add("client_log")
    codes = sorted({code for code, _ in cells})
    data = []
    for code in codes:
        points = sorted((b, n) for (c, b), n in cells.items() if c == code)
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": plot_text(code),
                "x": [axis.x[b] for b, _ in points],
                "y": [plot_text(code)] * len(points),
                "text": [
                    plot_text(f"{n} × {code} ({', '.join(sorted(kinds[(code, b)]))})") for b, n in points
                ],
                "hoverinfo": "x+text",
                "marker": {"size": [min(6 + 3 * math.log2(n), 22) for _, n in points]},
            }
        )
    height = max(220, 90 + 26 * len(codes))
    yaxis = {"type": "category", "automargin": True}
    return _figure(data, _layout(axis, spans, t0, yaxis, height=height, showlegend=False)), ""


def figures_json(charts: Iterable[Chart]) -> str:
    """The figures as JSON safe to embed in an HTML ``<script type="application/json">`` element: ``<``,
    ``>``, ``&`` and the JS line separators are escaped, so no string can close the element."""
    payload = {c.id: c.figure for c in charts if c.figure is not None}
    return safe_json(payload)


def safe_json(value: object) -> str:
    """JSON text that cannot end a ``<script>`` element or start a comment in it."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
