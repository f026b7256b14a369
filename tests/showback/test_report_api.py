"""``GET /api/v1/reports/usage/`` over October 2026 (tests/showback/scenario.py):
GPU-hours and cost to the cent, as the recorded workloads add up; the
groupings; who sees which rows; CSV; and bad parameters named with their rule."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from rest_framework.test import APIClient

from accounts.models import AccessDenial
from tests.jobs.conftest import Org
from tests.showback.scenario import MONTH, October

URL = "/api/v1/reports/usage/"


def report(client: APIClient, **query: str) -> dict[str, Any]:
    response = client.get(URL, {"month": MONTH, **query})
    assert response.status_code == 200, response.content
    return dict(response.json())


def by(rows: list[dict[str, Any]], *names: str) -> dict[tuple[str, ...], dict[str, Any]]:
    return {tuple(row[n] for n in names): row for row in rows}


def test_team_figures_add_up_to_the_recorded_workloads_to_the_cent(
    org: Org, october: October
) -> None:
    answer = report(org.admin, group_by="team")
    assert answer["currency"] == "USD" and answer["group_by"] == ["team"]
    rows = by(answer["rows"], "team")
    assert set(rows) == {("research",), ("serving",)}
    research, serving = rows[("research",)], rows[("serving",)]
    # A 24 + B 18.6667 + D 8 GPU-hours; 59.76 + 16.2867 + 24.00.
    assert research["allocated_gpu_hours"] == pytest.approx(50.6667, abs=1e-4)
    assert research["cost"] == "100.05"
    # B: preempted 3 h 40 min after its admission, hourly checkpoints: 40 min × 4 GPUs.
    assert research["lost_gpu_hours"] == pytest.approx(2.6667, abs=1e-4)
    assert research["lost_cost"] == "2.33"
    assert research["borrowed_gpu_hours"] == 6.0 and research["lent_gpu_hours"] == 0
    # C: 32 GPU-hours at 2.49 before noon of 10-15, 32 at 3.00 after.
    assert serving["allocated_gpu_hours"] == 64.0
    assert serving["cost"] == "175.68"
    assert serving["lost_gpu_hours"] == 0 and serving["lost_cost"] is None
    assert serving["lent_gpu_hours"] == 6.0
    # Whom from and to is listed for a few teams at a time, not for every team.
    assert research["borrowed_from"] is None and serving["lent_to"] is None
    totals = answer["totals"]
    assert totals["allocated_gpu_hours"] == pytest.approx(114.6667, abs=1e-4)
    assert totals["cost"] == "275.73"
    assert totals["unpriced_gpu_hours"] == 0


def test_borrowed_from_and_lent_to_whom_for_a_team(org: Org, october: October) -> None:
    research = report(org.admin, team="research")["rows"]
    assert [(r["team"], r["borrowed_from"], r["lent_to"]) for r in research] == [
        ("research", [{"team": "serving", "gpu_hours": 6.0}], [])
    ]
    [serving] = report(org.bob)["rows"]
    assert serving["lent_to"] == [{"team": "research", "gpu_hours": 6.0}]
    assert serving["borrowed_from"] == []
    by_flavor = by(report(org.alice, group_by="flavor")["rows"], "flavor")
    assert by_flavor[("h100",)]["borrowed_from"] == [{"team": "serving", "gpu_hours": 6.0}]
    assert by_flavor[("h100-spot",)]["borrowed_gpu_hours"] == 0


def test_busy_hours_are_the_measured_samples(org: Org, october: October) -> None:
    answer = report(org.admin, group_by="team")
    research = by(answer["rows"], "team")[("research",)]
    assert answer["busy_source"] == "simulated"
    assert research["measured_gpu_hours"] == 4.0  # two 30-minute samples of D's 4 GPUs
    assert research["busy_gpu_hours"] == pytest.approx(october.busy_d, abs=1e-4)
    assert by(answer["rows"], "team")[("serving",)]["busy_gpu_hours"] is None  # never measured


def test_grouped_by_team_and_type_and_by_flavor(org: Org, october: October) -> None:
    rows = by(report(org.admin, group_by="team,type")["rows"], "team", "type")
    assert set(rows) == {
        ("research", "training"),
        ("research", "evaluation"),
        ("serving", "training"),
    }
    assert rows[("research", "training")]["allocated_gpu_hours"] == 32.0  # A and D
    assert rows[("research", "training")]["cost"] == "83.76"
    assert rows[("research", "evaluation")]["cost"] == "16.29"
    assert rows[("research", "evaluation")]["lost_cost"] == "2.33"
    # Borrowing is a queue's, not a workload type's.
    assert rows[("research", "training")]["borrowed_gpu_hours"] is None
    flavors = by(report(org.admin, group_by="flavor")["rows"], "flavor")
    assert flavors[("h100",)]["allocated_gpu_hours"] == 96.0
    assert flavors[("h100",)]["cost"] == "259.44"
    assert flavors[("h100-spot",)]["allocated_gpu_hours"] == pytest.approx(18.6667, abs=1e-4)
    assert flavors[("h100-spot",)]["cost"] == "16.29"
    assert flavors[("h100",)]["borrowed_gpu_hours"] == 6.0
    assert flavors[("h100",)]["lent_gpu_hours"] == 6.0
    ordered = report(org.admin, group_by="type,team")
    assert [(r["type"], r["team"]) for r in ordered["rows"]] == [
        ("evaluation", "research"),
        ("training", "research"),
        ("training", "serving"),
    ]


def test_a_member_sees_only_their_team_and_asking_for_another_is_refused_and_logged(
    org: Org, october: October
) -> None:
    bob = report(org.bob, group_by="team,flavor")
    assert [(r["team"], r["flavor"]) for r in bob["rows"]] == [("serving", "h100")]
    assert bob["totals"]["cost"] == "175.68"
    alice = report(org.alice, group_by="type")
    assert {r["type"] for r in alice["rows"]} == {"training", "evaluation"}
    assert alice["totals"]["allocated_gpu_hours"] == pytest.approx(50.6667, abs=1e-4)
    before = AccessDenial.objects.count()
    refused = org.bob.get(URL, {"month": MONTH, "team": "research"})
    assert refused.status_code == 400
    assert [(e["field"], e["rule"]) for e in refused.json()["errors"]] == [("team", "unknown-team")]
    assert "research" not in str(refused.json()["detail"])
    assert AccessDenial.objects.count() == before + 1
    assert report(org.admin, team="research")["totals"]["cost"] == "100.05"


def test_anonymous_is_refused(org: Org, october: October) -> None:
    response = APIClient().get(URL, {"month": MONTH})
    assert response.status_code == 401
    assert AccessDenial.objects.filter(reason=AccessDenial.Reason.NOT_AUTHENTICATED).exists()


def test_csv_has_a_row_per_group_and_quotes_formulas(org: Org, october: October) -> None:
    response = org.admin.get(URL, {"month": MONTH, "group_by": "team,type", "format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="berth-usage-2026-10.csv"' in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["team"], r["type"], r["cost"]) for r in rows] == [
        ("research", "evaluation", "16.29"),
        ("research", "training", "83.76"),
        ("serving", "training", "175.68"),
    ]
    assert {r["month"] for r in rows} == {MONTH} and {r["currency"] for r in rows} == {"USD"}
    # A bad parameter asked for as CSV is answered in JSON, naming it.
    bad = org.admin.get(URL, {"month": "October", "format": "csv"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "month"


def test_a_formula_in_a_cell_is_quoted() -> None:
    from jobs.showback import write_csv

    answer = {
        "month": MONTH,
        "currency": "USD",
        "group_by": ["team"],
        "rows": [{"team": '=HYPERLINK("x")', "cost": "-1", "borrowed_from": None}],
    }
    out = io.StringIO()
    write_csv(answer, out)
    [row] = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert row["team"] == '\'=HYPERLINK("x")' and row["cost"] == "'-1"


@pytest.mark.parametrize(
    ("query", "field", "rule"),
    [
        ({"month": "2026-13"}, "month", "month-range"),
        ({"month": "1969-12"}, "month", "month-range"),
        ({"month": "26-10"}, "month", "month-format"),
        ({"month": "2026-1"}, "month", "month-format"),
        ({"month": "2026-10-01"}, "month", "month-format"),
        ({"month": "２０２６-10"}, "month", "month-format"),
        ({"month": ""}, "month", "month-format"),
        ({"group_by": "team,owner"}, "group_by", "unknown-dimension"),
        ({"group_by": "team,team"}, "group_by", "repeated-dimension"),
        ({"group_by": "team,"}, "group_by", "empty-dimension"),
        ({"group_by": ""}, "group_by", "empty-dimension"),
        ({"team": ""}, "team", "empty"),
        ({"team": "nobody"}, "team", "unknown-team"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it_and_its_rule(
    org: Org, query: dict[str, str], field: str, rule: str
) -> None:
    response = org.admin.get(URL, query)
    assert response.status_code == 400, response.content
    assert [(e["field"], e["rule"]) for e in response.json()["errors"]] == [(field, rule)]


def test_a_repeated_parameter_is_refused(org: Org) -> None:
    response = org.admin.get(f"{URL}?month=2026-10&month=2026-11")
    assert [(e["field"], e["rule"]) for e in response.json()["errors"]] == [("month", "repeated")]


def test_a_month_without_records_is_empty_not_an_error(org: Org) -> None:
    answer = report(org.alice)
    assert answer["rows"] == [] and answer["totals"]["cost"] is None
    assert answer["from"] == "2026-10-01T00:00:00Z" and answer["to"] == "2026-11-01T00:00:00Z"
