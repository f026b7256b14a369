"""``berth grants`` against a real Berth over HTTP (pytest-django's live
server), called in-process: request, list, show, approve, end, reject, and
the refusals (bad input exits 2 naming the field and rule; someone else's
decision; no right to decide)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from accounts.roles import APPROVERS_GROUP
from accounts.services import create_token
from berth_cli.grants import show_lines
from grants.models import GrantState, QuotaGrant
from tests.cli.test_cli import Berth, one_line
from tests.factories import user
from tests.grants.test_grant_lifecycle import nominal
from tests.jobs.conftest import Org

As = Callable[[str], Berth]


@pytest.fixture
def as_user(
    transactional_db: Any,
    org: Org,
    live_server: Any,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> As:
    """``as_user("carol")("grants", "list")``: berth with that person's token;
    carol is a global approver."""
    carol = user("carol")
    Group.objects.get_or_create(name=APPROVERS_GROUP)[0].user_set.add(carol)
    people = {**org.users, "carol": carol}
    monkeypatch.setenv("BERTH_CONFIG", str(tmp_path / "config.json"))
    monkeypatch.setenv("BERTH_URL", live_server.url)
    secrets = {name: create_token(user=who, name="cli").secret for name, who in people.items()}

    class Person(Berth):
        """Uses its person's token at each call, so two people can take turns."""

        def __init__(self, name: str) -> None:
            super().__init__(capsys)
            self.name = name

        def __call__(self, *argv: str) -> tuple[int, str, str]:
            monkeypatch.setenv("BERTH_TOKEN", secrets[self.name])
            return super().__call__(*argv)

    return Person


def request_args(**overrides: str) -> list[str]:
    values = {
        "--queue": "research",
        "--flavor": "h100",
        "--amount": "16",
        "--until": (timezone.now() + timedelta(days=3)).isoformat(),
        "--justification": "release candidate training",
        **overrides,
    }
    return ["grants", "request", *[part for pair in values.items() for part in pair]]


def test_request_approve_list_show_and_end(as_user: As) -> None:
    alice, carol = as_user("alice"), as_user("carol")
    code, out, err = alice(*request_args())
    assert code == 0, err
    grant = QuotaGrant.objects.get()
    assert out.startswith(f"Asked for grant #{grant.pk}: +16 h100 nvidia.com/gpu nominal quota")
    assert "Impact: research's nominal quota rises by 16 h100" in out

    code, out, err = carol("grants", "list")
    assert code == 0, err
    header, row = out.strip().splitlines()
    assert header.split() == [
        "ID", "STATE", "QUEUE", "TEAM", "AMOUNT", "KIND", "REQUESTER", "ENDS",
    ]  # fmt: skip
    assert row.split()[:8] == [str(grant.pk), "pending", "research", "research", "+16", "h100",
                               "nominal", "alice"]  # fmt: skip

    code, out, _ = carol("grants", "show", str(grant.pk))
    assert "State:" in out and "pending: you can decide it" in out
    assert "Lendable capacity:" in out and "serving" in out

    code, _, err = alice("grants", "approve", str(grant.pk))
    assert code == 1 and "requester-cannot-decide" in one_line(err)
    code, out, err = carol("grants", "approve", str(grant.pk), "--comment", "go")
    assert code == 0, err
    assert out.startswith(f"Approved and applied #{grant.pk}: +16 h100")
    assert nominal("research") == 32
    code, _, err = carol("grants", "approve", str(grant.pk))
    assert code == 1 and "already-decided" not in err and "decided by carol" in one_line(err)

    code, out, _ = alice("grants", "list", "-o", "json")
    [item] = json.loads(out)
    assert item["state"] == "active" and item["can_end"] is True
    code, out, err = alice("grants", "end", str(grant.pk), "--reason", "shipped")
    assert code == 0, err
    assert out.startswith(f"Ended and reverted #{grant.pk}")
    assert nominal("research") == 16
    code, out, _ = alice("grants", "list")
    assert out.strip() == "No open quota grants."
    code, out, _ = alice("grants", "list", "--all")
    assert " ended " in out.splitlines()[1]


def test_bad_input_exits_2_naming_the_field_and_rule(as_user: As) -> None:
    alice = as_user("alice")
    code, _, err = alice(*request_args(**{"--amount": "0"}))
    assert code == 2 and one_line(err) == "berth: amount: must be more than zero (positive)"
    code, _, err = alice(*request_args(**{"--until": "friday"}))
    assert code == 2 and "ends_at:" in one_line(err) and "(datetime)" in err
    code, _, err = alice(*request_args(**{"--kind": "loan"}))
    assert code == 2 and "lender: a loan names its lender" in one_line(err)
    code, _, err = alice("grants", "approve", "x1")
    assert code == 2 and "is not a grant id" in one_line(err)
    assert not QuotaGrant.objects.exists()


def test_reject_needs_a_reason_and_others_cannot_see_or_decide(as_user: As) -> None:
    code, _, err = as_user("alice")(*request_args())
    assert code == 0, err
    grant = QuotaGrant.objects.get()
    code, _, err = as_user("bob")("grants", "show", str(grant.pk))
    assert code == 1 and one_line(err) == f"berth: no quota grant #{grant.pk} that you can see"
    code, _, err = as_user("carol")("grants", "reject", str(grant.pk), "--reason", " ")
    assert code == 2 and "--reason" in one_line(err)
    code, out, err = as_user("carol")("grants", "reject", str(grant.pk), "--reason", "not now")
    assert code == 0, err
    assert out.startswith(f"Rejected #{grant.pk}")
    assert QuotaGrant.objects.get().state == GrantState.REJECTED


def test_show_lines_print_the_whatif_waits() -> None:
    grant = {
        "id": 7, "summary": "+16 h100 nvidia.com/gpu nominal quota for research", "state": "active",
        "ends_at": "2026-12-04T18:00:00Z",
        "whatif": {"run": 31, "state": "succeeded", "queues": [
            {"cluster_queue": "research", "granted": True, "p95_wait_today": 7200,
             "p95_wait_with_grant": 3600, "avg_wait_today": 3000, "avg_wait_with_grant": 1200},
            {"cluster_queue": "serving", "granted": False, "p95_wait_today": None,
             "p95_wait_with_grant": 600, "avg_wait_today": 0, "avg_wait_with_grant": 300},
        ]},
    }  # fmt: skip
    lines = show_lines(grant, datetime(2026, 12, 2, tzinfo=UTC))
    at = lines.index("Waits with the grant (what-if run #31, the last 24 h):")
    assert lines[at + 1].split() == ["QUEUE", "P95", "WAIT", "AVERAGE", "WAIT"]
    assert lines[at + 2].split() == ["research", "(granted)", "2h", "→", "1h", "50m", "→", "20m"]
    assert lines[at + 3].split() == ["serving", "-", "→", "10m", "0s", "→", "5m"]
