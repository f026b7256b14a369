"""Brute-force protection: failed sign-ins on every login form and refused API
tokens lock out (429 with Retry-After, logged), the right credentials too,
until the lockout ends or an admin unlocks."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import AccessDenial
from accounts.services import create_token
from tests.factories import user

LOGIN_FORMS = ["/login/", "/admin/login/", "/api-auth/login/"]


@pytest.fixture
def limits(settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    settings.BERTH_TOKEN_FAILURE_LIMIT = 4


def sign_in(client: Client, path: str, username: str, password: str) -> Any:
    return client.post(path, {"username": username, "password": password})


def lockouts() -> int:
    return AccessDenial.objects.filter(reason=AccessDenial.Reason.LOCKED_OUT).count()


@pytest.mark.parametrize("path", LOGIN_FORMS)
def test_failed_sign_ins_lock_the_user_out_even_with_the_right_password(
    db: Any, limits: None, path: str
) -> None:
    user("dora", superuser=True)
    browser = Client()
    for _ in range(2):
        assert sign_in(browser, path, "dora", "wrong").status_code == 200  # the form again
    assert sign_in(browser, path, "dora", "wrong").status_code == 429  # the limit: locked
    locked = sign_in(browser, path, "dora", "dora-password")
    assert locked.status_code == 429
    assert int(locked["Retry-After"]) == 15 * 60
    assert b"Too many failed sign-ins" in locked.content
    assert lockouts() >= 1

    call_command("unlock", "--username", "dora", stdout=StringIO())
    assert sign_in(browser, path, "dora", "dora-password").status_code == 302  # signed in


def test_an_address_is_locked_out_across_usernames(db: Any, limits: None) -> None:
    user("erin")
    browser = Client()
    for name in ("a", "b", "c"):
        sign_in(browser, "/login/", name, "guess")
    assert sign_in(browser, "/login/", "erin", "erin-password").status_code == 429
    call_command("unlock", "--address", "127.0.0.1", stdout=StringIO())
    assert sign_in(browser, "/login/", "erin", "erin-password").status_code == 302


def test_refused_tokens_lock_the_address_out_of_token_sign_in(db: Any, limits: None) -> None:
    secret = create_token(user=user("finn"), name="ci").secret
    client = APIClient()
    for attempt in range(4):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer berth_bogus{attempt}")
        assert client.get("/api/v1/me/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    locked = client.get("/api/v1/me/")
    assert locked.status_code == 429
    assert 1 <= int(locked["Retry-After"]) <= 15 * 60
    assert "refused tokens" in locked.json()["detail"]
    assert lockouts() == 1

    call_command("unlock", "--address", "127.0.0.1", stdout=StringIO())
    assert client.get("/api/v1/me/").status_code == 200


def test_fewer_refusals_than_the_limit_do_not_lock(db: Any, limits: None) -> None:
    secret = create_token(user=user("gail"), name="ci").secret
    client = APIClient()
    for attempt in range(3):
        client.credentials(HTTP_AUTHORIZATION=f"Bearer berth_bogus{attempt}")
        client.get("/api/v1/me/")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/me/").status_code == 200
    assert lockouts() == 0


def test_unlock_refuses_what_is_not_an_address(db: Any) -> None:
    with pytest.raises(CommandError, match="not an IP address"):
        call_command("unlock", "--address", "nowhere", stdout=StringIO())
