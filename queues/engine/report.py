"""The simulation report: a summary table and plotly charts in one
self-contained HTML file (plotly.js inlined: clusters are often air-gapped).

Pure Python: no Django, no kubernetes client.
"""

from __future__ import annotations

import html
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.offline import get_plotlyjs

from queues.engine.simulator import SimulationResult


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def summary_rows(summary: dict[str, Any]) -> list[list[str]]:
    """One row per ClusterQueue: waits, usage ratio, borrowing, preemptions."""
    rows = []
    for name, queue in sorted(summary["cluster_queues"].items()):
        wait = queue["time_to_admission"]
        main = _main_resource(queue["resource_seconds"])
        figures = queue["resource_seconds"].get(main, {})
        ratio = figures.get("usage_ratio")
        rows.append(
            [
                name,
                str(queue["workloads"]),
                _fmt(wait["avg"]),
                _fmt(wait["p50"]),
                _fmt(wait["p95"]),
                _fmt(wait["max"]),
                f"{ratio:.0%}" if ratio is not None else "–",
                _fmt(figures.get("borrowed"), 0),
                _fmt(figures.get("lent"), 0),
                str(sum(queue["preemptions"].values())),
                _fmt(queue["lost_gpu_seconds"], 0),
            ]
        )
    return rows


HEADER = [
    "ClusterQueue",
    "workloads",
    "wait avg s",
    "p50",
    "p95",
    "max",
    "usage/nominal",
    "borrowed r·s",
    "lent r·s",
    "preemptions",
    "GPU·s lost",
]


def _main_resource(resources: dict[str, Any]) -> str:
    if "nvidia.com/gpu" in resources:
        return "nvidia.com/gpu"
    return "cpu" if "cpu" in resources else next(iter(resources), "cpu")


def wait_figure(result: SimulationResult, title: str) -> go.Figure:
    figure = go.Figure()
    classes = sorted({r.workload_class for r in result.records.values()})
    for name in classes:
        waits = [
            r.wait
            for r in result.records.values()
            if r.workload_class == name and r.wait is not None
        ]
        figure.add_trace(go.Box(y=waits, name=name, boxpoints=False))
    figure.update_layout(title=title, yaxis_title="time to admission (s)", showlegend=False)
    return figure


def series_figure(result: SimulationResult, key: str, title: str, axis: str) -> go.Figure:
    figure = go.Figure()
    series = result.series
    for name, values in sorted(series[key].items()):
        if any(values):
            figure.add_trace(
                go.Scatter(x=series["t"], y=values, name=name, mode="lines", line={"shape": "hv"})
            )
    figure.update_layout(title=title, xaxis_title="simulated time (s)", yaxis_title=axis)
    return figure


def preemption_figure(summary: dict[str, Any], title: str) -> go.Figure:
    reasons = summary["preemptions"]
    figure = go.Figure(go.Bar(x=list(reasons), y=list(reasons.values())))
    figure.update_layout(title=title, yaxis_title="preemptions")
    return figure


def figures(result: SimulationResult, summary: dict[str, Any], label: str) -> list[go.Figure]:
    unit = "GPUs" if result.series["resource"] == "nvidia.com/gpu" else "CPU cores"
    return [
        wait_figure(result, f"{label}: time to admission by workload class"),
        series_figure(result, "usage", f"{label}: usage over time", unit),
        series_figure(result, "borrowed", f"{label}: borrowing over time", f"{unit} above nominal"),
        series_figure(result, "pending", f"{label}: pending workloads", "workloads"),
        preemption_figure(summary, f"{label}: preemptions by reason"),
    ]


def _table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_report(
    runs: list[tuple[str, SimulationResult, dict[str, Any]]], deltas: list[list[str]] | None = None
) -> str:
    """``runs``: (label, result, summary) per policy; ``deltas``: compare rows."""
    sections = []
    for label, result, summary in runs:
        charts = "".join(
            pio.to_html(f, include_plotlyjs=False, full_html=False)
            for f in figures(result, summary, label)
        )
        overall = summary["time_to_admission"]
        sections.append(
            f"<section><h2>{html.escape(label)}</h2>"
            f"<p>{summary['workloads']} workloads, {summary['admissions']} admissions, "
            f"{summary['cycles']} scheduling cycles over {summary['simulated_seconds']:.0f} "
            f"simulated seconds; time to admission p50 {_fmt(overall['p50'])} s, "
            f"p95 {_fmt(overall['p95'])} s; {sum(summary['preemptions'].values())} preemptions, "
            f"{summary['lost_gpu_seconds']:.0f} GPU-seconds of work lost.</p>"
            f"{_table(summary_rows(summary))}{charts}</section>"
        )
    compare = ""
    if deltas:
        head = "".join(f"<th>{h}</th>" for h in ["metric", runs[0][0], runs[1][0], "change"])
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in deltas
        )
        compare = (
            f"<section><h2>Comparison</h2><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></section>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>Berth simulation</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2rem;color:#1d2430}"
        "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccd;"
        "padding:.25rem .6rem;text-align:right}td:first-child,th:first-child{text-align:left}"
        "</style>"
        f"<script>{get_plotlyjs()}</script></head><body><h1>Berth simulation</h1>"
        f"{compare}{''.join(sections)}</body></html>"
    )
