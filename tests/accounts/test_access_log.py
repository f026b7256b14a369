"""Refused attempts are logged with who, what and when; old entries are pruned."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import AccessDenial
from accounts.services import prune_access_denials

pytestmark = pytest.mark.django_db


def test_failed_browser_login_is_logged(users: dict[str, Any]) -> None:
    response = Client().post("/login/", {"username": "member-a", "password": "wrong"})
    assert response.status_code == 200 and b"Wrong username or password" in response.content
    denial = AccessDenial.objects.get()
    assert (denial.username, denial.reason, denial.method, denial.path) == (
        "member-a",
        "login-failed",
        "POST",
        "/login/",
    )
    assert denial.remote_addr == "127.0.0.1"


def test_forbidden_write_is_logged_with_the_user(clients: dict[str, APIClient]) -> None:
    response = clients["member_a"].post("/api/v1/resource-flavors/", {"name": "x"}, format="json")
    assert response.status_code == 403
    denial = AccessDenial.objects.get()
    assert (denial.username, denial.reason, denial.method, denial.path) == (
        "member-a",
        "forbidden",
        "POST",
        "/api/v1/resource-flavors/",
    )
    assert denial.user is not None and "platform admins" in denial.detail


def test_anonymous_request_is_logged(db: Any) -> None:
    assert APIClient().get("/api/v1/cohorts/?page=2").status_code == 401
    denial = AccessDenial.objects.get()
    assert (denial.username, denial.reason, denial.path) == (
        "",
        "not-authenticated",
        "/api/v1/cohorts/?page=2",
    )


def test_admins_read_the_log_through_the_api(clients: dict[str, APIClient]) -> None:
    clients["member_b"].delete("/api/v1/teams/alpha/")
    rows = clients["admin"].get("/api/v1/access-denials/", {"username": "member-b"}).json()
    assert [(r["reason"], r["method"], r["path"]) for r in rows["results"]] == [
        ("forbidden", "DELETE", "/api/v1/teams/alpha/")
    ]


def test_prune_deletes_only_entries_past_retention(db: Any) -> None:
    old = AccessDenial.objects.create(reason="forbidden", username="old")
    AccessDenial.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=91))
    recent = AccessDenial.objects.create(reason="forbidden", username="recent")
    assert prune_access_denials(older_than_days=90, batch_size=1) == 1
    assert list(AccessDenial.objects.values_list("pk", flat=True)) == [recent.pk]
    assert prune_access_denials(older_than_days=90) == 0  # running again is harmless
