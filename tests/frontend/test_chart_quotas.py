"""The quota and sharing charts: a ClusterQueue's quota per resource in its own
Kubernetes unit, usage over time stacked under the nominal quota, the borrowing
heatmap of lenders against borrowers, fair share over time, and the what-if
comparison of today against a proposed policy. Pure: no database; the rows and
``valid`` come from ``chart_support``."""

from __future__ import annotations

import pytest

from frontend import charts
from tests.frontend.chart_support import COMPARE, FAIR, QUOTA, USAGE, at, title, traces, valid


def test_queue_quota_has_a_row_per_resource_in_its_own_unit() -> None:
    chart = valid(charts.queue_quota(QUOTA))
    layout = chart.figure["layout"]
    # GPUs first, then cpu, then memory; each y axis titled in Kubernetes words.
    assert [title(layout[k]) for k in ("yaxis", "yaxis2", "yaxis3")] == [
        "GPUs",
        "CPU (cores)",
        "memory (GiB)",
    ]
    domains = [layout[k]["domain"] for k in ("yaxis", "yaxis2", "yaxis3")]
    assert all(lo < hi for lo, hi in domains)
    assert domains[0][0] > domains[1][1] and domains[1][0] > domains[2][1]  # no overlap
    data = chart.figure["data"]
    assert [t["name"] for t in data[:4]] == ["nominal", "usage", "borrowed", "lent"]
    assert [t["showlegend"] for t in data] == [True] * 4 + [False] * 8
    gpu_usage, cpu_usage, memory_usage = (t for t in data if t["name"] == "usage")
    assert (gpu_usage["yaxis"], cpu_usage["yaxis"], memory_usage["yaxis"]) == ("y", "y2", "y3")
    assert gpu_usage["x"] == ["h100-ondemand", "h100-spot"] and gpu_usage["y"] == [20, 0]
    assert cpu_usage["y"] == [12.5] and cpu_usage["customdata"] == [["12500m", "cpu"]]
    assert memory_usage["y"] == [96.0] and memory_usage["customdata"] == [["96Gi", "memory"]]
    assert "cores" in cpu_usage["hovertemplate"] and "GiB" in memory_usage["hovertemplate"]
    assert layout["xaxis2"]["categoryarray"] == ["h100-ondemand", "h100-spot"]
    assert chart.table.headers == ["flavor", "resource", "nominal", "usage", "borrowed", "lent"]
    assert chart.table.rows == [
        ["h100-ondemand", "nvidia.com/gpu", "16", "20", "4", "0"],
        ["h100-spot", "nvidia.com/gpu", "8", "0", "0", "8"],
        ["h100-ondemand", "cpu", "64", "12500m", "0", "0"],
        ["h100-ondemand", "memory", "512Gi", "96Gi", "0", "0"],
    ]


def test_usage_over_time_stacks_flavors_under_total_nominal_and_borrowed() -> None:
    chart = valid(charts.usage_over_time(USAGE))
    assert [t["name"] for t in chart.figure["data"]] == [
        "h100-ondemand",
        "h100-spot",
        "nominal quota",
        "borrowed",
    ]
    by_name = traces(chart)
    assert by_name["h100-ondemand"]["stackgroup"] == by_name["h100-spot"]["stackgroup"]
    assert by_name["h100-ondemand"]["y"] == [12, 13, 14]
    assert by_name["nominal quota"]["y"] == [24, 24, 24]
    assert by_name["nominal quota"]["line"]["dash"] == "dash"
    assert by_name["borrowed"]["y"] == [0, 1, 2]
    assert "stackgroup" not in by_name["borrowed"]
    assert all("GPUs" in t["hovertemplate"] for t in chart.figure["data"])
    assert title(chart.figure["layout"]["yaxis"]) == "GPUs"
    assert chart.table.headers[2:] == ["usage (GPUs)", "borrowed (GPUs)", "nominal (GPUs)"]
    assert chart.table.rows[0] == ["2026-11-30 12:00", "h100-ondemand", "12", "0", "16"]

    cpu_rows = [{"at": at(0), "flavor": "cpu-pool", "usage": 1500, "borrowed": 0, "nominal": 4000}]
    cpu = valid(charts.usage_over_time(cpu_rows, resource="cpu"))
    assert title(cpu.figure["layout"]["yaxis"]) == "CPU (cores)"
    assert traces(cpu)["cpu-pool"]["y"] == [1.5]
    assert cpu.table.rows == [["2026-11-30 12:00", "cpu-pool", "1500m", "0", "4"]]


def test_borrowing_heatmap_sorts_both_axes_and_lists_nonzero_pairs() -> None:
    chart = valid(
        charts.borrowing_heatmap(
            lenders=["team-vision", "team-eval"],
            borrowers=["team-llm", "team-eval"],
            gpu_hours=[[12.5, 3.0], [0.0, None]],
        )
    )
    (heat,) = chart.figure["data"]
    assert heat["x"] == ["team-eval", "team-vision"]
    assert heat["y"] == ["team-eval", "team-llm"]
    assert heat["z"] == [[None, 0.0], [3.0, 12.5]]
    assert heat["text"] == [["", ""], ["3", "12.5"]]
    assert "GPU-hours" in heat["hovertemplate"]
    layout = chart.figure["layout"]
    assert title(layout["xaxis"]) == "lender" and title(layout["yaxis"]) == "borrower"
    assert chart.table.rows == [["team-llm", "team-vision", "12.5"], ["team-llm", "team-eval", "3"]]
    assert charts.borrowing_heatmap([], ["a"], [[]]).empty
    assert valid(charts.borrowing_heatmap([], [], [])).empty


def test_borrowing_heatmap_refuses_a_matrix_of_the_wrong_shape() -> None:
    with pytest.raises(ValueError, match="one row per borrower"):
        charts.borrowing_heatmap(["a", "b"], ["c"], [[1.0]])
    with pytest.raises(ValueError, match="must not repeat"):
        charts.borrowing_heatmap(["a", "a"], ["c"], [[1.0, 2.0]])


def test_fair_share_over_time_draws_a_line_per_queue() -> None:
    chart = valid(charts.fair_share_over_time(FAIR))
    assert [t["name"] for t in chart.figure["data"]] == ["team-eval", "team-llm"]
    llm = traces(chart)["team-llm"]
    assert llm["y"] == [0.42, 0.43, 0.44] and ".3f" in llm["hovertemplate"]
    assert title(chart.figure["layout"]["yaxis"]) == "weighted dominant resource share"
    assert chart.table.rows[0] == ["2026-11-30 12:00", "team-eval", "0.100"]


def test_comparison_sets_today_against_the_proposal() -> None:
    chart = valid(charts.comparison(COMPARE, "p95 wait (min)", unit="min"))
    today, proposal = chart.figure["data"]
    assert (today["name"], proposal["name"]) == ("today", "proposal")
    assert today["x"] == ["team-eval", "team-llm", "team-new"]
    assert today["y"] == [10.0, 120.0, None] and proposal["y"] == [12.5, 45.0, 3.0]
    assert today["hovertemplate"].endswith(" min<extra></extra>")
    assert chart.figure["layout"]["barmode"] == "group"
    assert title(chart.figure["layout"]["yaxis"]) == "p95 wait (min)"
    assert chart.table.headers == [
        "ClusterQueue",
        "today: p95 wait (min)",
        "proposal: p95 wait (min)",
        "change",
    ]
    assert chart.table.rows == [
        ["team-eval", "10", "12.50", "+2.50 (+25%)"],
        ["team-llm", "120", "45", "-75 (-62%)"],
        ["team-new", "—", "3", "—"],
    ]
