"""Refusals that look like something else are logged as what they are: a job
submitted into another team's team or namespace (answered like a missing one,
so the team's existence does not leak) and a form posted without a valid CSRF
token."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import AccessDenial
from jobs.models import JobRequest

JOB = {
    "name": "sneaky",
    "image": "registry.example.com/trainer:1",
    "nodes": 1,
    "gpus_per_node": 1,
    "queue": "training-large",
    "command": ["python", "train.py"],
}


def refusals() -> list[AccessDenial]:
    return list(AccessDenial.objects.filter(reason=AccessDenial.Reason.FORBIDDEN))


@pytest.mark.parametrize(
    ("target", "field", "rule"),
    [
        ({"team": "beta"}, "team", "unknown-team"),
        ({"namespace": "beta"}, "namespace", "unknown-namespace"),
    ],
)
def test_submitting_into_another_team_is_refused_like_a_missing_one_and_logged(
    clients: dict[str, APIClient], target: dict[str, str], field: str, rule: str
) -> None:
    for dry_run in ("?dry_run=true", ""):
        response = clients["member_a"].post(
            f"/api/v1/jobs/{dry_run}", {**JOB, **target}, format="json"
        )
        assert response.status_code == 400
        assert [(e["field"], e["rule"]) for e in response.json()["errors"]] == [(field, rule)]
    logged = refusals()
    assert len(logged) == 2 and all(r.username == "member-a" for r in logged)
    assert "beta" in logged[0].detail and "not a member" in logged[0].detail
    assert not JobRequest.objects.exists()


def test_a_team_that_does_not_exist_is_not_a_refusal(clients: dict[str, APIClient]) -> None:
    response = clients["member_a"].post("/api/v1/jobs/", {**JOB, "team": "nowhere"}, format="json")
    assert response.status_code == 400
    assert refusals() == []


def test_a_form_without_a_csrf_token_is_refused_and_logged(users: dict[str, Any]) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(users["admin"])
    response = browser.post("/policy/topology/new/", {"name": "racks", "action": "apply"})
    assert response.status_code == 403
    (logged,) = refusals()
    assert logged.username == "admin" and logged.detail.startswith("CSRF check failed")
    assert logged.path == "/policy/topology/new/"
