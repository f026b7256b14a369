"""The what-if pages on PostgreSQL: platform admins only (a member gets a 404,
a visitor the sign-in page); the form queues a run after the commit or says
which field is wrong and queues nothing; the run page shows progress, then
today's policy beside the proposal.

This module is also the test URLconf: the site's URLs plus the what-if pages."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import path

from controlplane import urls as site_urls
from frontend.views import whatif as views
from queues.display import duration
from tests.jobs.conftest import GPU, Org, org
from tests.whatif.test_whatif_task import SCENARIO, congested, raise_research, running_run
from whatif import service as whatif
from whatif.models import ReplayPart, ReplayPartState, WhatIfRun, WhatIfSource, WhatIfState
from whatif.runs import write_so_far
from whatif.scaleout import ENDED_WITH_THE_RUN

__all__ = ["congested", "org"]
HOUR = 3600

urlpatterns = [
    path("whatif/", views.whatif_page, name="whatif"),
    path("whatif/<int:run_id>/", views.whatif_run, name="whatif-run"),
    *site_urls.urlpatterns,
]
handler404 = site_urls.handler404
handler500 = site_urls.handler500


@pytest.fixture(autouse=True)
def whatif_urls(settings: Any) -> None:
    settings.ROOT_URLCONF = __name__


def browser(org: Org, who: str) -> Client:
    client = Client()
    client.force_login(org.users[who])
    return client


def html(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def form(changes: list[dict[str, str]], **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"source": "window", "rows": str(max(len(changes), 4)), "run": "1"}
    data.update(fields)
    for i, change in enumerate(changes):
        for key, value in change.items():
            data[f"change-{i}-{key}"] = value
    return data


@pytest.fixture
def finished_run(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> WhatIfRun:
    with django_capture_on_commit_callbacks(execute=True):
        run = whatif.create_run(
            org.users["admin"],
            source="window",
            window_start=congested["start"],
            changes=raise_research(),
        )
    run.refresh_from_db()
    assert run.state == WhatIfState.SUCCEEDED, run.error
    return run


def test_anonymous_visitors_are_sent_to_sign_in(org: Org) -> None:
    for url in ("/whatif/", "/whatif/1/"):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=")


def test_members_get_a_404(org: Org, finished_run: WhatIfRun) -> None:
    alice = browser(org, "alice")
    assert alice.get("/whatif/").status_code == 404
    assert alice.get(f"/whatif/{finished_run.pk}/").status_code == 404
    assert alice.post("/whatif/", form(raise_research())).status_code == 404
    assert WhatIfRun.objects.count() == 1


def test_the_form_offers_todays_queues_and_the_last_day(org: Org) -> None:
    page = html(browser(org, "admin").get("/whatif/"))
    assert "<h1>What-if</h1>" in page
    assert 'id="whatif-form"' in page and 'enctype="multipart/form-data"' in page
    assert '<option value="research">' in page and f'<option value="{GPU}">' in page
    assert 'type="datetime-local" name="window_start" value="20' in page
    assert 'data-queue="research"' in page  # today's quotas, to pick from
    assert "No runs yet" in page
    assert "data-live" in page


def test_a_good_form_queues_a_run_after_the_commit_and_shows_it(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    admin = browser(org, "admin")
    data = form(
        raise_research(),
        window_start=congested["start"].strftime("%Y-%m-%dT%H:%M"),
        window_end=congested["end"].strftime("%Y-%m-%dT%H:%M"),
    )
    with django_capture_on_commit_callbacks() as callbacks:
        response = admin.post("/whatif/", data)
    run = WhatIfRun.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/whatif/{run.pk}/"
    assert run.state == WhatIfState.QUEUED and run.created_by == org.users["admin"]
    assert run.changes == [{**raise_research()[0]}]
    assert len(callbacks) == 1
    queued = html(admin.get(f"/whatif/{run.pk}/"))
    assert "Waiting for a worker" in queued and "data-live-page" in queued  # it polls
    assert "research h100/nvidia.com/gpu: nominal quota → 48" in queued
    callbacks[0]()  # the worker's turn (eager here)
    done = html(admin.get(f"/whatif/{run.pk}/"))
    assert 'data-state="succeeded"' in done and "data-live-page" not in done
    card = done[done.index('<div class="card" data-queue="research">') :]
    card = card[: card.index("</table>")]
    assert '<span class="pill">changed</span>' in card
    p95 = card[card.index('data-metric="p95_wait"') :]
    p95 = p95[: p95.index("</tr>")]
    # The last of four waves is not admitted by the window's end (the form's
    # minute): the first of it, created 9 s in, waits at least until then; of
    # two waves, the second waits 1 h less the seconds between arrivals.
    run.refresh_from_db()
    censored = (run.window_end - congested["start"]).total_seconds() - 9
    assert f">≥ {duration(censored)}<" in p95 and ">59 min 53 s<" in p95
    shorter = censored - (HOUR - 7)
    # Shorter is better: the proposal's figure is exact, today's only a lower bound.
    assert f'class="num good">−{duration(shorter)} (−{shorter / censored:.0%})<' in p95
    assert "chart-whatif-p95" in done
    assert "No preemptions under either policy." in done  # no empty chart
    assert "data-figure=" in done and "/vendor/plotly-" in done
    assert "were still running" in done  # where runtimes came from
    listing = html(admin.get("/whatif/"))
    assert f'data-run="{run.pk}"' in listing and "succeeded" in listing


def test_a_bad_change_is_named_on_the_form_and_nothing_is_queued(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    changes = [*raise_research("-8"), {"cluster_queue": "nope", "field": "fair_sharing_weight",
                                        "value": "2"}]  # fmt: skip
    with django_capture_on_commit_callbacks() as callbacks:
        page = html(browser(org, "admin").post("/whatif/", form(changes)))
    assert not callbacks and not WhatIfRun.objects.exists()
    assert 'id="whatif-errors"' in page
    assert "changes[0].value" in page and "-8 is negative" in page
    assert "changes[1].cluster_queue" in page and "no ClusterQueue named" in page
    row = page[page.index('data-row="0"') :]
    row = row[: row.index("</tr>")]
    assert 'value="-8"' in row and "-8 is negative" in row  # kept, and named in place


def test_more_rows_keeps_what_was_typed(org: Org) -> None:
    page = html(browser(org, "admin").post("/whatif/", {**form(raise_research()), "add_rows": "1"}))
    assert 'data-row="7"' in page and 'name="change-0-value" value="48"' in page
    assert not WhatIfRun.objects.exists()


def test_an_uploaded_scenario_file_runs(org: Org, django_capture_on_commit_callbacks: Any) -> None:
    upload = SimpleUploadedFile("s.yaml", SCENARIO.read_bytes(), content_type="application/yaml")
    change = {"cluster_queue": "b", "field": "fair_sharing_weight", "value": "2"}
    with django_capture_on_commit_callbacks(execute=True):
        response = browser(org, "admin").post(
            "/whatif/",
            {**form([change]), "scenario_file": upload},  # the radio left on window
        )
    assert response.status_code == 302, response.content.decode()[:2000]
    run = WhatIfRun.objects.get()
    assert run.source == WhatIfSource.SCENARIO and "reclaimWithinCohort" in run.scenario
    page = html(browser(org, "admin").get(f"/whatif/{run.pk}/"))
    assert 'data-queue="a"' in page and 'data-queue="b"' in page
    assert 'id="whatif-scenario"' in page
    assert "fair-sharing weights change nothing" in page  # the scenario leaves it off


def test_a_scenario_that_does_not_parse_is_named(org: Org) -> None:
    change = {"cluster_queue": "a", "field": "fair_sharing_weight", "value": "2"}
    page = html(
        browser(org, "admin").post(
            "/whatif/", form([change], source="scenario", scenario="clusterQueues: 3")
        )
    )
    assert 'data-error="scenario"' in page and "clusterQueues: must be a list" in page
    assert "clusterQueues: 3</textarea>" in page  # kept for fixing
    assert not WhatIfRun.objects.exists()


def test_a_failed_run_says_why_and_runs_again_from_its_inputs(
    org: Org, finished_run: WhatIfRun
) -> None:
    WhatIfRun.objects.filter(pk=finished_run.pk).update(
        state=WhatIfState.FAILED, error="the simulation failed: boom", result={}
    )
    admin = browser(org, "admin")
    page = html(admin.get(f"/whatif/{finished_run.pk}/"))
    assert 'id="whatif-error"' in page and "boom" in page
    again = html(admin.get(f"/whatif/?from={finished_run.pk}"))
    assert 'name="change-0-cluster_queue" list="whatif-queues" value="research"' in again
    assert 'name="change-0-value" value="48"' in again


def test_a_missing_run_is_a_404(org: Org) -> None:
    assert browser(org, "admin").get("/whatif/999999/").status_code == 404


def test_preemptions_are_charted_when_there_are_any(
    org: Org, django_capture_on_commit_callbacks: Any
) -> None:
    document = yaml.safe_load(SCENARIO.read_text())
    for workload in document["workloads"]:
        workload["runtime"] = "1h"
    change = {"cluster_queue": "a", "field": "reclaim_within_cohort", "value": "Never"}
    with django_capture_on_commit_callbacks(execute=True):
        run = whatif.create_run(
            org.users["admin"], source="scenario", scenario=yaml.safe_dump(document),
            changes=[change],
        )  # fmt: skip
    page = html(browser(org, "admin").get(f"/whatif/{run.pk}/"))
    assert "chart-whatif-preemptions" in page
    table = page[page.index('id="chart-whatif-preemptions-table"') :]
    assert "<td>b</td><td>1</td><td>0</td>" in table[: table.index("</details>")]
    card = page[page.index('<div class="card" data-queue="b">') :]
    row = card[card.index('data-metric="preemptions"') :]
    assert 'class="num good">−1 (−100%)<' in row[: row.index("</tr>")]


def _side(p95: float, never: int, at_least: list[str] | None = None) -> dict[str, Any]:
    return {
        "workloads": 100,
        "never_admitted": never,
        "avg_wait": p95 / 3,
        "p50_wait": p95 / 4,
        "p95_wait": p95,
        "max_wait": p95 * 2,
        "waits_at_least": at_least or [],
        "nominal": "24",
    }


def test_a_proposal_that_leaves_more_workloads_unadmitted_is_never_a_win(org: Org) -> None:
    """The issue's case: a cut quota, p95 59 min → 2 min 27 s, while ten
    workloads were never admitted: no green, no shorter wait claimed, the
    reason instead, on the tables and the chart."""
    today = _side(59 * 60, 0)
    proposal = {**_side(147, 10, ["avg_wait", "max_wait"]), "nominal": "16"}
    run = WhatIfRun.objects.create(
        created_by=org.users["admin"],
        source=WhatIfSource.WINDOW,
        state=WhatIfState.SUCCEEDED,
        changes=[{"cluster_queue": "research", "field": "nominal_quota", "value": "16",
                  "flavor": "h100", "resource": GPU}],
        result={
            "resource": GPU,
            "queues": [{"cluster_queue": "research", "today": today, "proposal": proposal}],
            "totals": {"today": today, "proposal": proposal},
            "notes": [],
        },
    )  # fmt: skip
    rows = {row["key"]: row for row in views.comparison(run)["queues"][0]["rows"] if "key" in row}
    for key in ("p95_wait", "p50_wait", "max_wait", "avg_wait"):
        assert rows[key]["tone"] != "good", key
        assert rows[key]["change"] == "not better: 10 never admitted (baseline: 0)", key
    assert rows["never_admitted"]["tone"] == "bad" and rows["never_admitted"]["change"] == "+10"
    assert rows["max_wait"]["proposal"] == "≥ 4 min 54 s"  # censored: a lower bound
    page = html(browser(org, "admin").get(f"/whatif/{run.pk}/"))
    card = page[page.index('<div class="card" data-queue="research">') :]
    card = card[: card.index("</div>")]
    assert 'class="num good"' not in card and "−96%" not in card
    assert "data-starved>The proposal leaves 10 workload(s) never admitted" in card
    assert 'class="num warn">not better: 10 never admitted (baseline: 0)<' in card
    totals = page[page.index('id="whatif-totals"') :]
    assert "data-starved" in totals[: totals.index("</div>")]
    chart = page[page.index('id="chart-whatif-p95-table"') :]
    assert "not better: 10 never admitted (baseline: 0)" in chart[: chart.index("</details>")]


def test_waits_resting_on_a_lower_bound_claim_nothing(org: Org) -> None:
    # Today censored (≥), the proposal admits everything but its p95 is higher:
    # the true p95 today may be higher still.
    rows = {
        row["key"]: row
        for row in views.metric_rows(_side(600, 5, ["p95_wait"]), _side(900, 0), GPU)
        if "key" in row
    }
    assert rows["p95_wait"]["tone"] == "" and rows["p95_wait"]["change"].endswith(", uncertain")
    assert rows["p95_wait"]["today"] == "≥ 10 min"
    assert rows["never_admitted"]["tone"] == "good"
    # Exact on both sides: a shorter wait is a win.
    rows = {
        row["key"]: row
        for row in views.metric_rows(_side(600, 0), _side(300, 0), GPU)
        if "key" in row
    }
    assert rows["p95_wait"]["tone"] == "good" and rows["p95_wait"]["change"] == "−5 min (−50%)"


def test_a_cut_that_starves_research_is_worse_and_says_why(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    """research at 0 + 8 borrowed GPUs runs its 8-GPU jobs one at a time: of
    twelve, three get in within the 3 h window, against nine today."""
    with django_capture_on_commit_callbacks(execute=True):
        run = whatif.create_run(
            org.users["admin"], source="window", window_start=congested["start"],
            window_end=congested["end"], changes=raise_research("0"),
        )  # fmt: skip
    run.refresh_from_db()
    research = next(q for q in run.result["queues"] if q["cluster_queue"] == "research")
    assert (research["today"]["never_admitted"], research["proposal"]["never_admitted"]) == (3, 9)
    page = html(browser(org, "admin").get(f"/whatif/{run.pk}/"))
    card = page[page.index('<div class="card" data-queue="research">') :]
    card = card[: card.index("</div>")]
    assert "data-starved>The proposal leaves 9 workload(s) never admitted (today&#x27;s" in card
    assert 'class="num good"' not in card
    never = card[card.index('data-metric="never_admitted"') :]
    assert 'class="num bad">+6 (+200%)<' in never[: never.index("</tr>")]
    # The replay beside what happened: sync admitted each job as it came.
    fidelity = page[page.index('id="whatif-fidelity"') :]
    row = fidelity[fidelity.index('data-queue="research"') :]
    assert '<td data-side="recorded">p50 0 s · p95 0 s · 0 never admitted</td>' in row
    assert "3 never admitted</td>" in row[: row.index("</tr>")]


def test_a_change_too_small_to_show_is_the_same_and_no_ratio_from_a_zero_shown() -> None:
    today = {**_side(600, 0), "avg_wait": 0.2, "borrowed_hours": 0.011, "usage_percent": 40.2}
    proposal = {**_side(600, 0), "avg_wait": 0.4, "borrowed_hours": 0.7, "usage_percent": 40.4}
    rows = {row["key"]: row for row in views.metric_rows(today, proposal, GPU) if "key" in row}
    assert rows["avg_wait"]["change"] == "same"  # 0 s beside 0 s is no change
    assert rows["usage_percent"]["change"] == "same"
    # 0.0 GPU-hours today: +0.7, without a ratio to a figure that shows as zero.
    assert rows["borrowed_hours"]["today"] == "0.0"
    assert rows["borrowed_hours"]["change"] == "+0.7"


def test_a_window_without_a_whole_hour_says_why_the_dashboard_is_not_beside_it(org: Org) -> None:
    figures = {**_side(600, 0), "workloads": 3}
    run = WhatIfRun.objects.create(
        created_by=org.users["admin"],
        source=WhatIfSource.WINDOW,
        state=WhatIfState.SUCCEEDED,
        changes=[{"cluster_queue": "research", "field": "fair_sharing_weight", "value": "2"}],
        result={
            "resource": GPU,
            "queues": [{"cluster_queue": "research", "today": figures, "proposal": figures,
                        "recorded": figures, "dashboard": None}],
            "totals": {"today": figures, "proposal": figures},
            "dashboard_hours": None,
            "notes": [],
        },
    )  # fmt: skip
    page = html(browser(org, "admin").get(f"/whatif/{run.pk}/"))
    card = page[page.index('id="whatif-fidelity"') :]
    card = card[: card.index("</table>")]
    assert "The window holds no whole hour" in card
    assert "<th>Dashboard</th>" not in card and 'data-side="dashboard"' not in card
    assert 'data-side="recorded">p50 2 min 30 s · p95 10 min · 0 never admitted<' in card


def test_a_running_run_shows_its_figures_so_far_refined_until_the_answer(
    org: Org, congested: dict[str, datetime], django_capture_on_commit_callbacks: Any
) -> None:
    run = running_run(org, congested, django_capture_on_commit_callbacks)
    prepared = whatif.prepared_for(run)
    admin = browser(org, "admin")
    write = write_so_far(run.pk)
    pages: list[tuple[float, str]] = []

    def so_far(figures: dict[str, Any]) -> None:
        write(figures)  # as the task does
        page = html(admin.get(f"/whatif/{run.pk}/"))
        pages.append((figures["partial"]["simulated_seconds"], page))

    ticks = itertools.count()  # a wall clock a second on at every look: every slice is read
    final = whatif.compare(
        prepared.today,
        prepared.proposal,
        prepared.stream(),
        so_far=so_far,
        every=0.0,
        clock=lambda: float(next(ticks)),
    )
    hours = [h for h, _ in pages]  # simulated seconds, in fact
    assert len(hours) >= 2 and hours == sorted(hours) and hours[0] < hours[-1]
    first = pages[0][1]
    assert 'id="whatif-so-far"' in first and "So far, not the answer yet" in first
    assert f"replayed through the first {duration(hours[0])} of 3 h" in first
    assert ">not admitted yet<" in first and "never admitted<" not in first
    assert 'id="whatif-totals"' in first and 'data-queue="research"' in first
    assert 'data-metric="p95_wait"' in first and "data-live-page" in first  # it keeps polling
    assert 'id="whatif-fidelity"' not in first  # the recorded waits wait for the end
    # Reading as it goes changes no figure of the answer.
    assert final == whatif.compare(prepared.today, prepared.proposal, prepared.stream())
    assert "partial" not in final
    WhatIfRun.objects.filter(pk=run.pk).update(state=WhatIfState.SUCCEEDED, result=final)
    write({"partial": {"simulated_seconds": 1.0}})  # a late write: the run is closed
    assert WhatIfRun.objects.get(pk=run.pk).result == final
    done = html(admin.get(f"/whatif/{run.pk}/"))
    assert 'id="whatif-so-far"' not in done and "data-live-page" not in done


def test_a_shared_out_run_says_which_worker_replayed_which_trees(
    org: Org, finished_run: WhatIfRun
) -> None:
    ReplayPart.objects.bulk_create(
        [
            ReplayPart(
                run=finished_run,
                index=0,
                groups=["cohort-0", "cohort-3", "cohort-5", "cohort-8"],
                workloads=51_234,
                state=ReplayPartState.DONE,
                worker="celery@worker-a",
                seconds=44.3,
            ),
            ReplayPart(
                run=finished_run,
                index=1,
                groups=["serving"],
                workloads=812,
                state=ReplayPartState.RUNNING,
                worker="celery@worker-b",
                share=0.374,
            ),
            ReplayPart(
                run=finished_run,
                index=2,
                groups=["urgent"],
                workloads=3,
                state=ReplayPartState.FAILED,
                error=ENDED_WITH_THE_RUN,
            ),
        ]
    )
    page = html(browser(org, "admin").get(f"/whatif/{finished_run.pk}/"))
    assert "Shared out among the workers in 3 parts" in page
    assert (
        '<li data-part="1">Part 1, 4 cohort trees (cohort-0, cohort-3, cohort-5 and 1 more), '
        "51,234 workloads: replayed by celery@worker-a in 44 s</li>"
    ) in page
    assert (
        '<li data-part="2">Part 2, 1 cohort tree (serving), 812 workloads: '
        "celery@worker-b replaying, 37%</li>"
    ) in page
    assert (
        '<li data-part="3">Part 3, 1 cohort tree (urgent), 3 workloads: '
        "not replayed: the run ended first</li>"
    ) in page
