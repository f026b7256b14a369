"""``berth plan capacity`` and ``berth plan show`` against a real Berth over
HTTP (pytest-django's live server, tasks run in-process): the answer per
flavor and the waits at each capacity, formatted; bad targets exit 2 naming
the field and rule; members are refused."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from berth_cli import plan as plan_cli
from tests.cli.test_cli import Berth, alice, berth, config, one_line, secret_for
from tests.jobs.conftest import Org
from tests.whatif.test_capacity_plan import steady
from whatif.models import CapacityPlan

__all__ = ["alice", "berth", "config", "steady"]


@pytest.fixture
def admin(
    transactional_db: Any,
    org: Org,
    live_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    berth: Berth,
) -> Berth:
    monkeypatch.setenv("BERTH_URL", live_server.url)
    monkeypatch.setenv("BERTH_TOKEN", secret_for(org, "admin"))
    monkeypatch.setattr(plan_cli, "POLL_SECONDS", 0.05)
    return berth


def test_plan_capacity_waits_and_prints_the_answer_per_flavor(
    admin: Berth, steady: dict[str, datetime]
) -> None:
    code, out, err = admin(
        "plan",
        "capacity",
        "--target",
        "training-large:p90:1h",
        "--flavor",
        "h100",
        "--seeds",
        "1",
    )
    assert code == 0, err
    plan = CapacityPlan.objects.get()
    lines = out.splitlines()
    assert lines[0].startswith(f"Plan #{plan.pk} (succeeded): 144 workloads, 1 seed(s), growth ×1")
    answer = plan.result["flavors"][0]["answers"][0]
    row = next(line for line in lines if line.startswith("h100 "))
    assert row.split()[:2] == ["h100", "48"]
    assert "training-large p90 ≤ 1h" in row
    assert f" {answer['gpus']} " in row and f"+{answer['gpus'] - 48}" in row
    assert "h100: waits at each capacity replayed (median of seeds)" in out
    # Waits read as durations, never raw seconds.
    curve = lines[lines.index("h100: waits at each capacity replayed (median of seeds)") + 1 :]
    assert "GPUS" in curve[0] and "training-large p90" in curve[0]
    assert any("≥ " in line for line in curve)
    assert not any("." in cell for line in curve[1:] for cell in line.split()[1:2])

    code, shown, err = admin("plan", "show", str(plan.pk))
    assert code == 0 and shown == out
    code, raw, err = admin("plan", "show", str(plan.pk), "-o", "json")
    assert json.loads(raw)["result"]["flavors"][0]["answers"][0]["gpus"] == answer["gpus"]


def test_no_wait_prints_the_plan_and_returns(admin: Berth, steady: dict[str, datetime]) -> None:
    code, out, err = admin(
        "plan", "capacity", "--target", "research:2h", "--seeds", "1", "--no-wait", "-o", "json"
    )
    assert code == 0, err
    assert json.loads(out)["targets"] == [
        {"queue": "research", "percentile": 90.0, "max_wait": 7200.0}
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--target", "training-large"], "is not QUEUE:WAIT or QUEUE:pNN:WAIT"),
        (["--target", "training-large:pxx:1h"], "'xx' is not a percentile"),
    ],
)
def test_a_target_the_cli_cannot_read_exits_2(admin: Berth, argv: list[str], message: str) -> None:
    code, _out, err = admin("plan", "capacity", *argv)
    assert code == 2 and message in one_line(err)
    assert CapacityPlan.objects.count() == 0


def test_a_target_the_server_refuses_exits_2_naming_the_field(
    admin: Berth, steady: dict[str, datetime]
) -> None:
    code, _out, err = admin("plan", "capacity", "--target", "nope:p90:1h")
    assert code == 2
    assert "targets[0].queue" in err and "unknown-queue" in err
    assert CapacityPlan.objects.count() == 0


def test_a_member_is_refused(alice: Berth, steady: dict[str, datetime]) -> None:
    code, _out, err = alice("plan", "capacity", "--target", "research:1h")
    assert code != 0 and "admin" in err.lower()
    assert CapacityPlan.objects.count() == 0
