"""Personal API tokens: shown once, stored as a digest, revocable, expiring."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import AccessDenial, ApiToken
from accounts.services import create_token, digest

pytestmark = pytest.mark.django_db


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_create_shows_the_secret_once_and_stores_only_a_digest(
    clients: dict[str, APIClient], users: dict[str, Any]
) -> None:
    response = clients["member_a"].post(
        "/api/v1/tokens/", {"name": "laptop", "expires_in_days": 30}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    secret = body["token"]
    assert secret.startswith("berth_") and body["prefix"] == secret[:12]
    stored = ApiToken.objects.get(pk=body["id"])
    assert stored.digest == digest(secret) and secret not in stored.digest
    listed = clients["member_a"].get("/api/v1/tokens/").json()["results"]
    assert "token" not in listed[0]
    me = bearer(secret).get("/api/v1/me/")
    assert me.status_code == 200 and me.json()["username"] == "member-a"
    assert me.json()["teams"] == [{"team": "alpha", "role": "member"}]


def test_revoked_token_stops_working(users: dict[str, Any]) -> None:
    issued = create_token(user=users["member_a"], name="ci")
    client = bearer(issued.secret)
    assert client.get("/api/v1/teams/").status_code == 200
    assert client.delete(f"/api/v1/tokens/{issued.token.pk}/").status_code == 204
    refused = client.get("/api/v1/teams/")
    assert refused.status_code == 401
    assert "revoked" in refused.json()["detail"]
    assert AccessDenial.objects.filter(reason="bad-credentials").count() == 1


def test_expired_token_is_refused(users: dict[str, Any]) -> None:
    issued = create_token(user=users["member_a"], name="old", expires_in_days=1)
    ApiToken.objects.filter(pk=issued.token.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert bearer(issued.secret).get("/api/v1/teams/").status_code == 401


def test_tokens_of_others_do_not_exist_for_you(
    clients: dict[str, APIClient], users: dict[str, Any]
) -> None:
    theirs = create_token(user=users["member_b"], name="theirs").token
    for role in ("member_a", "admin"):
        assert clients[role].get(f"/api/v1/tokens/{theirs.pk}/").status_code == 404
        assert clients[role].delete(f"/api/v1/tokens/{theirs.pk}/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_inactive_user_token_is_refused(users: dict[str, Any]) -> None:
    issued = create_token(user=users["member_a"], name="x")
    users["member_a"].is_active = False
    users["member_a"].save()
    assert bearer(issued.secret).get("/api/v1/teams/").status_code == 401


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer not-a-token"])
def test_malformed_or_unknown_tokens(header: str, db: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/teams/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="berth"'


def test_token_name_is_required(clients: dict[str, APIClient]) -> None:
    response = clients["member_a"].post("/api/v1/tokens/", {"expires_in_days": 0}, format="json")
    assert response.status_code == 400
    assert {e["field"] for e in response.json()["errors"]} == {"name", "expires_in_days"}
    assert ApiToken.objects.filter(name="").count() == 0


def test_a_token_minted_with_a_token_never_outlives_it(users: dict[str, Any]) -> None:
    parent = create_token(user=users["member_a"], name="ci", expires_in_days=1)
    minted = bearer(parent.secret).post(
        "/api/v1/tokens/", {"name": "child", "expires_in_days": 365}, format="json"
    )
    assert minted.status_code == 201, minted.content
    child = ApiToken.objects.get(name="child")
    assert child.parent == parent.token
    assert child.expires_at == parent.token.expires_at  # capped at its parent's expiry
    # A parent without expiry does not cap; a child without expiry takes the parent's.
    forever = create_token(user=users["member_a"], name="forever")
    unbounded = bearer(forever.secret).post("/api/v1/tokens/", {"name": "c2"}, format="json")
    assert unbounded.json()["expires_at"] is None


def test_revoking_a_token_revokes_what_was_minted_with_it(users: dict[str, Any]) -> None:
    parent = create_token(user=users["member_a"], name="ci")
    child_secret = (
        bearer(parent.secret)
        .post("/api/v1/tokens/", {"name": "child"}, format="json")
        .json()["token"]
    )
    grandchild_secret = (
        bearer(child_secret)
        .post("/api/v1/tokens/", {"name": "grandchild"}, format="json")
        .json()["token"]
    )
    assert bearer(grandchild_secret).get("/api/v1/me/").status_code == 200
    assert bearer(parent.secret).delete(f"/api/v1/tokens/{parent.token.pk}/").status_code == 204
    assert bearer(child_secret).get("/api/v1/me/").status_code == 401
    assert bearer(grandchild_secret).get("/api/v1/me/").status_code == 401
