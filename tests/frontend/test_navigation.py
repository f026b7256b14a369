"""No dead ends: every role reaches its pages from the navigation, everyone
manages their own API tokens, admins reach every team, missing and forbidden
pages keep the navigation and say what to do."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from accounts.models import ApiToken
from accounts.roles import APPROVERS_GROUP
from queues.models import ReconcileRun
from tests.factories import team, user
from tests.jobs.conftest import Org, org

__all__ = ["org"]


def browser(person: Any) -> Client:
    client = Client()
    client.force_login(person)
    return client


def text(response: Any, status: int = 200) -> str:
    assert response.status_code == status, response.status_code
    return str(response.content.decode())


@pytest.fixture
def approver(org: Org) -> Any:
    """A global approver in no team."""
    person = user("erin")
    Group.objects.get_or_create(name=APPROVERS_GROUP)[0].user_set.add(person)
    return person


@pytest.mark.parametrize("who", ["alice", "admin", "approver"])
def test_everyone_creates_and_revokes_their_own_tokens_on_their_profile(
    org: Org, approver: Any, who: str
) -> None:
    person = approver if who == "approver" else org.users[who]
    client = browser(person)
    home = text(client.get("/"))
    assert 'href="/profile/"' in home  # the user name in the header
    page = text(client.post("/profile/", {"action": "token-create", "token_name": "cli"}))
    assert 'id="issued-token"' in page and "berth login --url http://testserver" in page
    token = ApiToken.objects.get(user=person, name="cli")
    assert token.prefix in page
    assert (
        client.post("/profile/", {"action": "token-revoke", "token": token.pk}).status_code == 302
    )
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_a_token_of_someone_else_cannot_be_revoked(org: Org) -> None:
    client = browser(org.users["alice"])
    client.post("/profile/", {"action": "token-create", "token_name": "mine"})
    theirs = ApiToken.objects.get(name="mine")
    browser(org.users["bob"]).post("/profile/", {"action": "token-revoke", "token": theirs.pk})
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_admins_reach_every_team_from_the_teams_list(org: Org) -> None:
    admin = browser(org.users["admin"])
    home = text(admin.get("/"))
    assert 'href="/teams/" >Teams</a>' in home
    listing = text(admin.get("/teams/"))
    assert 'data-team="research"' in listing and 'data-team="serving"' in listing
    assert 'href="/teams/serving/"' in listing
    assert admin.get("/team/")["Location"] == "/teams/"
    # A member sees only their own team there.
    mine = text(browser(org.users["alice"]).get("/teams/"))
    assert 'data-team="research"' in mine and 'data-team="serving"' not in mine


def test_someone_in_no_team_is_told_so_not_sent_back_home(org: Org, approver: Any) -> None:
    page = text(browser(approver).get("/team/"))
    assert 'id="no-team"' in page and "You are in no team yet" in page
    profile = text(browser(approver).get("/profile/"))
    assert "Approver for every team" in profile


def test_missing_and_hidden_pages_keep_the_navigation_and_say_what_to_do(org: Org) -> None:
    bob = browser(org.users["bob"])
    for path in ("/no-such-page/", "/teams/research/", "/queues/no-such-queue/", "/jobs/999999/"):
        page = text(bob.get(path), 404)
        assert 'id="error-page"' in page and "Nothing here" in page, path
        assert 'href="/queues/"' in page and 'href="/profile/"' in page, path
    # The API's 404 stays JSON.
    api = bob.get("/api/v1/no-such-endpoint/")
    assert api.status_code == 404 and api.json()["detail"].startswith("No API endpoint")
    anonymous = text(Client().get("/no-such-page/"), 404)
    assert "Sign in" in anonymous


def test_a_stale_form_is_a_styled_403_saying_to_reload(org: Org) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(org.users["alice"])
    page = text(client.post("/profile/", {"action": "token-create"}), 403)
    assert 'id="error-page"' in page and "reload the page" in page


def test_the_overview_links_only_to_pages_that_exist(org: Org) -> None:
    admin = browser(org.users["admin"])
    page = text(admin.get("/"))
    assert "/api/v1/policy/plan/" not in page  # no plan made yet: it would be a 404
    assert 'href="/policy/">Plan a change' in page
    ReconcileRun.objects.create(
        trigger=ReconcileRun.Trigger.PLAN, backend="simulated", dry_run=True, status="succeeded"
    )
    page = text(admin.get("/"))
    assert 'href="/api/v1/policy/plan/">Latest plan' in page
    assert admin.get("/api/v1/policy/plan/").status_code == 200
    member = text(browser(org.users["alice"]).get("/"))
    assert "Plan a change" not in member  # the policy editor is for admins


def test_a_member_with_one_team_goes_straight_to_it(org: Org) -> None:
    team("lonely", ["lonely"])
    assert browser(org.users["alice"]).get("/team/")["Location"] == "/teams/research/"
