"""A decision sent again with its Idempotency-Key (an answer lost on the way)
is answered as the first one was, and written once; another key, another
verdict or another approver still meets 409 already-decided."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from approvals.models import ApprovalAction, ApprovalEvent, ApprovalState
from tests.approvals.approval_support import approval_request, approvers
from tests.factories import token_client
from tests.jobs.conftest import Org

URL = "/api/v1/approvals/"


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    return {**org.users, **approvers()}


def post(client: APIClient, path: str, key: str | None, body: dict[str, str]) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(path, body, format="json", **headers)


def test_the_same_decision_sent_again_is_answered_as_the_first(people: dict[str, Any]) -> None:
    request = approval_request(people["alice"])
    carol = token_client(people["carol"])
    first = post(carol, f"{URL}{request.pk}/approve/", "k-1", {"comment": "go"})
    assert first.status_code == 200, first.content
    again = post(carol, f"{URL}{request.pk}/approve/", "k-1", {"comment": "go"})
    assert again.status_code == 200
    assert again.json()["state"] == first.json()["state"] == ApprovalState.APPROVED
    decided = ApprovalEvent.objects.filter(request=request, action=ApprovalAction.APPROVED)
    assert decided.count() == 1  # written once


@pytest.mark.parametrize(
    ("who", "verb", "key"),
    [
        ("carol", "approve", "k-2"),  # another key: another decision
        ("carol", "approve", None),  # no key: as before
        ("carol", "reject", "k-1"),  # the same key, another verdict
        ("erin", "approve", "k-1"),  # the same key, another approver
    ],
)
def test_anything_else_is_still_already_decided(
    people: dict[str, Any], who: str, verb: str, key: str | None
) -> None:
    request = approval_request(people["alice"])
    carol = token_client(people["carol"])
    assert post(carol, f"{URL}{request.pk}/approve/", "k-1", {}).status_code == 200
    body = {"reason": "not now"} if verb == "reject" else {}
    other = post(token_client(people[who]), f"{URL}{request.pk}/{verb}/", key, body)
    assert other.status_code == 409
    assert other.json()["rule"] == "already-decided"


def test_a_key_must_be_short_and_printable(people: dict[str, Any]) -> None:
    request = approval_request(people["alice"])
    carol = token_client(people["carol"])
    response = post(carol, f"{URL}{request.pk}/approve/", "x" * 65, {})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "Idempotency-Key"
    assert ApprovalEvent.objects.filter(request=request).count() == 0
