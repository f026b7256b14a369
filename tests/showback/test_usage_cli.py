"""``berth usage`` against a real Berth over HTTP (pytest-django's live
server), called in-process, over October 2026 (tests/showback/scenario.py):
the table with its totals, JSON, the API's CSV, one team's view, and a bad
month or grouping named with its rule (exit 2)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from accounts.services import create_token
from tests.cli.test_cli import Berth
from tests.jobs.conftest import Org
from tests.showback.scenario import MONTH, October

As = Callable[[str], Berth]


@pytest.fixture
def as_user(
    transactional_db: Any,
    org: Org,
    october: October,
    live_server: Any,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> As:
    monkeypatch.setenv("BERTH_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("BERTH_URL", live_server.url)
    secrets = {name: create_token(user=who, name="cli").secret for name, who in org.users.items()}

    def pick(name: str) -> Berth:
        monkeypatch.setenv("BERTH_TOKEN", secrets[name])
        return Berth(capsys)

    return pick


def test_the_table_has_each_group_its_figures_and_the_total(as_user: As) -> None:
    code, out, err = as_user("admin")("usage", "--month", MONTH, "--group-by", "team,type")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:2] == ["TEAM", "TYPE"]
    assert "COST USD" in lines[0]
    rows = {tuple(line.split()[:2]): line.split() for line in lines[1:4]}
    assert rows[("research", "evaluation")][2:7] == ["18.7", "-", "2.7", "16.29", "2.33"]
    assert rows[("research", "training")][2] == "32.0"
    assert rows[("serving", "training")][2:7] == ["64.0", "-", "0.0", "175.68", "-"]
    assert lines[4].split()[:2] == ["TOTAL", "114.7"]
    assert "275.73" in lines[4]
    assert "2026-10 (UTC). Cost in USD" in out
    assert "Borrowing is a queue's" in out


def test_by_team_it_says_who_borrowed_from_whom(as_user: As) -> None:
    code, out, _ = as_user("alice")("usage", "--month", MONTH)
    assert code == 0
    research = next(line for line in out.splitlines() if line.startswith("research"))
    assert "serving 6.0" in research and "100.05" in research


def test_a_member_sees_only_their_team(as_user: As) -> None:
    code, out, _ = as_user("bob")("usage", "--month", MONTH, "--group-by", "team")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:3]] == ["serving", "TOTAL"]
    code, _, err = as_user("bob")("usage", "--month", MONTH, "--team", "research")
    assert code == 2
    assert err.strip() == (
        "berth: team: you are not a member of a team named 'research' (unknown-team)"
    )


def test_json_is_the_api_answer_and_csv_the_api_file(as_user: As) -> None:
    code, out, _ = as_user("alice")("usage", "--month", MONTH, "-o", "json")
    assert code == 0
    answer = json.loads(out)
    assert [row["team"] for row in answer["rows"]] == ["research"]
    assert answer["totals"]["cost"] == "100.05"
    code, out, _ = as_user("alice")("usage", "--month", MONTH, "--group-by", "flavor", "--csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["flavor"], r["cost"]) for r in rows] == [("h100", "83.76"), ("h100-spot", "16.29")]


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["--month", "2026-13"],
            "berth: month: '2026-13' is not a calendar month: the month is 01 to 12, the year "
            "1970 or later (month-range)",
        ),
        (["--month", "October"], "(month-format)"),
        (["--group-by", "team,owner"], "(unknown-dimension)"),
        (["--group-by", "team,team"], "(repeated-dimension)"),
    ],
)
def test_a_bad_month_or_grouping_is_named_with_its_rule(
    as_user: As, argv: list[str], line: str
) -> None:
    code, out, err = as_user("alice")("usage", *argv)
    assert code == 2 and out == ""
    assert err.startswith("berth: ") and line in err
    field = "group_by" if "--group-by" in argv else "month"
    assert err.startswith(f"berth: {field}: ")


def test_an_empty_month_says_so(as_user: As) -> None:
    code, out, _ = as_user("alice")("usage", "--month", "2026-09")
    assert code == 0 and out.strip() == "No GPU time recorded in 2026-09."
