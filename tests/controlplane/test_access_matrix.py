"""The role × URL × team matrix, generated from the URL patterns and their
classes in test_access_coverage.py (so a new URL is covered the day it is
added): for anonymous, a member of research (alice), a member of serving
(bob), research's approver (carol) and a platform admin, each URL answers or
refuses as its class says, every refusal and only a refusal adds exactly one
access-log record, and the lists show each role the number of objects it may
see."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.models import AccessDenial
from tests.approvals.approval_support import approvers
from tests.controlplane.test_access_coverage import (
    ADMINS,
    APPROVERS,
    ELSEWHERE,
    OTHER_TEAMS,
    PUBLIC,
    SIGNED_IN,
    Objects,
    call,
    objects,
)
from tests.factories import token_client
from tests.jobs.conftest import Org, org

__all__ = ["objects", "org"]  # fixtures, used by name

ROLES = ("anonymous", "member_a", "member_b", "approver", "admin")
PEOPLE = {"member_a": "alice", "member_b": "bob", "approver": "carol", "admin": "admin"}
# Another user's token: its owner only.
OWN_ONLY = {"api-token-detail"}
# Deciding: the research approver and admins; alice submitted it and may not.
DECIDING = {"approval-approve", "approval-reject"}
# A quota grant takes capacity from other teams: platform admins and global
# approvers decide it, not a team's approver (docs/quota-grants.md).
GRANT_DECIDING = {"quota-grant-approve", "quota-grant-reject"}
ALLOWED = {200, 201, 202, 204, 302}


def allowed(name: str, role: str) -> bool:
    if name in PUBLIC:
        return True
    if role == "anonymous":
        return False
    if name in SIGNED_IN:
        return True
    if name in OWN_ONLY:
        return role == "member_a"
    if name in DECIDING:
        return role in ("approver", "admin")
    if name in GRANT_DECIDING:
        return role == "admin"
    if name in OTHER_TEAMS | APPROVERS:
        return role in ("member_a", "approver", "admin")
    assert name in ADMINS, name
    return role == "admin"


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    found = {**org.users, **approvers()}
    return {role: found[person] for role, person in PEOPLE.items()}


def client_for(role: str, people: dict[str, Any], api: bool) -> Any:
    if role == "anonymous":
        return APIClient() if api else Client()
    if api:
        return token_client(people[role])
    browser = Client()
    browser.force_login(people[role])
    return browser


# Single sign-on's two routes answer 404 while it is off, as here; with it on,
# tests/accounts/test_oidc_flow.py drives them against a real provider.
SSO_ROUTES = {"oidc_authentication_init", "oidc_authentication_callback"}
URLS = sorted(PUBLIC - {"logout"} - SSO_ROUTES | SIGNED_IN | OTHER_TEAMS | APPROVERS | ADMINS)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", URLS)
def test_each_role_is_answered_or_refused_as_the_url_class_says(
    people: dict[str, Any], objects: Objects, name: str, role: str
) -> None:
    api = reverse(name, kwargs=objects.kwargs.get(name)).startswith("/api/")
    client = client_for(role, people, api)
    before = AccessDenial.objects.count()
    if name in ("approval-reject", "quota-grant-reject"):  # a reason sent: only access decides
        path = reverse(name, kwargs=objects.kwargs[name])
        response = client.post(path, {"reason": "not now"}, format="json", **ELSEWHERE)
    else:
        response = call(client, name, objects)
    logged = AccessDenial.objects.count() - before
    code = response.status_code
    if allowed(name, role):
        # A detail of an object the fixture does not make is a plain 404.
        assert code in ALLOWED or (code == 404 and name.endswith("-detail")), (name, role, code)
        assert logged == 0, f"{name} as {role}: answered, yet logged as refused"
    elif role == "anonymous" and not api and name != "metrics":
        assert code == 302 and "/login/" in response["Location"], (name, code)
    else:
        assert code in (401, 403, 404), (name, role, code)
        assert logged == 1, f"{name} as {role}: refused {code}, {logged} access-log records"


LISTS = {  # list URL -> objects each role sees in it (the fixture's data)
    "job-list": {"member_a": 1, "member_b": 0, "approver": 1, "admin": 1},
    "approval-list": {"member_a": 1, "member_b": 0, "approver": 1, "admin": 1},
    "quota-grant-list": {"member_a": 1, "member_b": 0, "approver": 1, "admin": 1},
    # Their own only: the org's token and this test client's (carol has no org token).
    "api-token-list": {"member_a": 2, "member_b": 2, "approver": 1, "admin": 2},
}


@pytest.mark.parametrize("role", ["member_a", "member_b", "approver", "admin"])
@pytest.mark.parametrize("name", sorted(LISTS))
def test_lists_show_each_role_what_it_may_see(
    people: dict[str, Any], objects: Objects, name: str, role: str
) -> None:
    client = client_for(role, people, api=True)
    response = client.get(reverse(name))
    assert response.status_code == 200
    assert response.json()["count"] == LISTS[name][role], (name, role)
