"""The job timeline: a job's lifecycle events become dated bars for its phases
(submitting, waiting, reserved, running, stopping, inactive) and markers for
its events, ending at a terminal event or at ``now``, with reasons escaped for
plotly; and ``phases``, which reads those phases from the events. Pure: no
database; the events and ``valid`` come from ``chart_support``."""

from __future__ import annotations

import itertools

from frontend import charts
from frontend.charts.timeline import phases
from tests.frontend.chart_support import EVENTS, at, traces, valid


def test_job_timeline_draws_phases_as_dated_bars_and_events_as_markers() -> None:
    chart = valid(charts.job_timeline(EVENTS, at(130)))
    by_name = traces(chart)
    # Quota reserved and admitted at one instant: no zero-length "reserved" bar.
    assert list(by_name) == [
        "submitting",
        "waiting",
        "running",
        "stopping",
        "steps",
        "evicted or preempted",
        "requeued",
    ]
    waiting = by_name["waiting"]
    assert waiting["orientation"] == "h" and waiting["type"] == "bar"
    # The first wait (created → quota reserved) and the wait after the requeue.
    assert waiting["base"] == ["2026-11-30T12:00:02Z", "2026-11-30T13:11:00Z"]
    assert waiting["x"] == [(10 * 60 - 2) * 1000, 29 * 60 * 1000]
    running = by_name["running"]
    assert running["base"] == ["2026-11-30T12:10:00Z", "2026-11-30T13:40:00Z"]
    assert running["x"] == [60 * 60 * 1000, 30 * 60 * 1000]
    assert running["customdata"][-1][1] == "now"  # still running at `now`
    stopping = by_name["stopping"]
    assert stopping["x"] == [60 * 1000]
    assert stopping["customdata"][0][3] == "<br>InCohortReclamation"
    assert chart.figure["layout"]["xaxis"]["type"] == "date"
    preempted = by_name["evicted or preempted"]
    assert preempted["mode"] == "markers"
    assert [c[0] for c in preempted["customdata"]] == ["preempted", "evicted"]
    assert preempted["customdata"][0][2] == "<br>InCohortReclamation"
    phase_rows = [r for r in chart.table.rows if r[1] != "—"]
    assert [(r[2], r[3]) for r in phase_rows] == [
        ("submitting", "2 s"),
        ("waiting", "9 min 58 s"),
        ("running", "1 h"),
        ("stopping", "1 min"),
        ("waiting", "29 min"),
        ("running", "30 min"),
    ]
    assert chart.table.rows[0] == ["2026-11-30 12:00:00", "—", "submitted", "—", ""]


def test_job_timeline_ends_at_a_terminal_event_and_escapes_reasons() -> None:
    events = [
        {"type": "created", "at": at(0), "reason": ""},
        {"type": "quota-reserved", "at": at(5), "reason": ""},
        {"type": "check-state", "at": at(6), "reason": "urgent-release: Pending"},
        {"type": "admitted", "at": at(9), "reason": ""},
        {"type": "finished", "at": at(60), "reason": "Succeeded <ok>"},
        {"type": "deleted", "at": at(90), "reason": ""},
        {"type": "something-new", "at": at(95), "reason": "future Kueue"},
    ]
    chart = valid(charts.job_timeline(events, at(500)))
    by_name = traces(chart)
    assert by_name["reserved"]["x"] == [4 * 60 * 1000]
    assert by_name["running"]["x"] == [51 * 60 * 1000]  # to `finished`, not to now
    assert all(cd[1] != "now" for t in chart.figure["data"] if t["type"] == "bar"
               for cd in t["customdata"])  # fmt: skip
    assert by_name["finished"]["marker"]["symbol"] == "star"
    assert by_name["finished"]["customdata"] == [
        ["finished", "2026-11-30 13:00:00", "<br>Succeeded &lt;ok&gt;"]
    ]
    steps = [c[0] for c in by_name["steps"]["customdata"]]
    assert steps == ["created", "quota-reserved", "check-state", "admitted", "something-new"]
    assert ["2026-11-30 13:00:00", "—", "finished", "—", "Succeeded <ok>"] in chart.table.rows


def test_job_timeline_phases_follow_the_lifecycle() -> None:
    items = [(e["at"], e["type"], e["reason"]) for e in EVENTS]
    found = phases(items, at(130))
    assert [p.kind for p in found] == [
        "submitting",
        "waiting",
        "running",
        "stopping",
        "waiting",
        "running",
    ]
    assert all(a.end == b.start for a, b in itertools.pairwise(found))
    assert [p.ongoing for p in found] == [False] * 5 + [True]
    # A clock behind the last event: the open phase has no length, so no bar.
    behind = phases(items, at(50))
    assert behind[-1].kind == "waiting" and not any(p.ongoing for p in behind)
    deactivated = phases([(at(0), "created", ""), (at(5), "deactivated", "")], at(20))
    assert [(p.kind, p.ongoing) for p in deactivated] == [("waiting", False), ("inactive", True)]
