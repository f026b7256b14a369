"""Every URL Berth serves is classified here by who may use it, and checked:
a signed-in user of another team (bob, of serving) is refused what is not
his (404 for another team's object, 403 under the API and 404 on the pages
for admins' things) and every such refusal is in the access log; anonymous
requests are refused too (the API answers 401, logged; pages send to the
login). A URL added without a line here fails the first test."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from accounts.models import AccessDenial, ApiToken
from grants.models import QuotaGrant
from jobs.models import JobRequest
from queues.models import Team
from tests.approvals.approval_support import approval_request
from tests.jobs.conftest import Org, org
from whatif.models import CapacityPlan, WhatIfRun

__all__ = ["org"]  # the fixture, used by name

# Not behind any sign-in: pages to sign in and out (single sign-on's two
# included: 404 while it is off), health, the vendored script, the API's schema
# and its documentation.
PUBLIC = {
    "login", "logout", "oidc_authentication_init", "oidc_authentication_callback", "healthz",
    "plotly-js", "schema", "api-docs",
}  # fmt: skip
# Every signed-in user may read these (the policy, their own things).
SIGNED_IN = {
    "home", "queues", "queue", "my-team", "teams", "profile", "cohorts", "jobs", "workloads",
    "me", "policy-kueue-configuration",
    "policy-manifests", "team-list", "topology-list", "topology-detail", "resource-flavor-list",
    "resource-flavor-detail", "cohort-list", "cohort-detail", "cluster-queue-list",
    "cluster-queue-detail", "local-queue-list", "local-queue-detail", "priority-class-list",
    "priority-class-detail", "queue-class-list", "queue-class-detail", "policy-change-list",
    "policy-change-detail", "api-token-list", "submit-queue-list", "job-list", "approval-list",
    "approval-history", "api-root", "team-detail", "reconcile-run-list", "reconcile-run-detail",
    "usage", "usage-report", "gang-fit", "gang-fit-map",
    "grants", "grant-new", "quota-grant-list",
}  # fmt: skip
# Another team's object: bob is told it does not exist.
OTHER_TEAMS = {
    "team", "job", "approval", "team-members", "job-detail", "job-events",
    "job-explain", "approval-detail", "approval-approve", "approval-reject",
    "api-token-detail",
    "grant", "quota-grant-detail", "quota-grant-approve", "quota-grant-reject", "quota-grant-end",
}  # fmt: skip
# Approvers, and the teams whose jobs wait for an approval: not bob.
APPROVERS = {"approvals", "approvals-history", "approvals-history-csv"}
# Platform admins only (policy-plan: computing one; every user reads the latest).
ADMINS = {
    "policy", "kueue-configuration-editor", "kueue-import", "policy-new", "policy-edit", "whatif",
    "whatif-run", "capacity", "capacity-plan", "api-capacity-plans", "api-capacity-plan",
    "policy-plan", "policy-reconcile", "access-denial-list", "metrics", "team-remove-member",
}  # fmt: skip
POST_ONLY = {"approval-approve", "approval-reject", "policy-reconcile", "policy-plan"}
POST_ONLY |= {"quota-grant-approve", "quota-grant-reject", "quota-grant-end"}
DELETE_ONLY = {"team-remove-member"}


def names(patterns: list[Any]) -> Iterator[str]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            if str(pattern.pattern).startswith("admin/"):
                continue  # Django's admin: staff only, its own login
            yield from names(pattern.url_patterns)
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield pattern.name


def test_every_url_is_classified() -> None:
    served = set(names(get_resolver().url_patterns))
    classified = PUBLIC | SIGNED_IN | OTHER_TEAMS | APPROVERS | ADMINS
    assert served - classified == set(), "classify these URLs in this file"
    assert classified - served == set(), "these URLs are gone: drop them here"


@dataclass
class Objects:
    """The research team's things bob must not see, and things anyone may."""

    kwargs: dict[str, dict[str, Any]]


@pytest.fixture
def objects(org: Org) -> Objects:
    now = timezone.now()
    research = Team.objects.get(slug="research")
    job = JobRequest.objects.create(
        name="a", team=research, namespace="research", image="busybox",
        local_queue="research", cluster_queue="research", submitted_at=now,
    )  # fmt: skip
    approval = approval_request(org.users["alice"])
    grant = QuotaGrant.objects.create(
        team=research, cluster_queue="research", kind="nominal", flavor="h100", amount=8,
        justification="release", created_at=now, ends_at=now + timedelta(days=1),
    )  # fmt: skip
    run = WhatIfRun.objects.create(window_start=now, window_end=now)
    plan = CapacityPlan.objects.create(source="window")
    token = ApiToken.objects.filter(user=org.users["alice"]).first()
    assert token is not None
    return Objects(
        {
            "queue": {"name": "research"},
            "team": {"slug": "research"},
            "job": {"job_id": job.pk},
            "approval": {"approval_id": approval.pk},
            "policy-new": {"kind": "cohort"},
            "policy-edit": {"kind": "cohort", "name": "org"},
            "whatif-run": {"run_id": run.pk},
            "capacity-plan": {"plan_id": plan.pk},
            "api-capacity-plan": {"pk": plan.pk},
            "plotly-js": {"version": "0"},
            "team-detail": {"slug": "research"},
            "team-members": {"slug": "research"},
            "team-remove-member": {"slug": "research", "username": "alice"},
            "topology-detail": {"name": "none"},
            "resource-flavor-detail": {"name": "h100"},
            "cohort-detail": {"name": "org"},
            "cluster-queue-detail": {"name": "research"},
            "local-queue-detail": {"id": 1},
            "priority-class-detail": {"name": "train-high"},
            "queue-class-detail": {"name": "training-large"},
            "policy-change-detail": {"pk": 1},
            "reconcile-run-detail": {"pk": 1},
            "api-token-detail": {"pk": token.pk},
            "job-detail": {"pk": job.pk},
            "job-events": {"pk": job.pk},
            "job-explain": {"pk": job.pk},
            "approval-detail": {"pk": approval.pk},
            "approval-approve": {"pk": approval.pk},
            "approval-reject": {"pk": approval.pk},
            "grant": {"grant_id": grant.pk},
            **{
                f"quota-grant-{action}": {"pk": grant.pk}
                for action in ("detail", "approve", "reject", "end")
            },
        }
    )


ELSEWHERE = {"REMOTE_ADDR": "10.1.2.3"}  # not loopback, which /metrics lets in


def call(client: Any, name: str, objects: Objects) -> Any:
    path = reverse(name, kwargs=objects.kwargs.get(name))
    if name in POST_ONLY:
        return client.post(path, {}, format="json", **ELSEWHERE)
    if name in DELETE_ONLY:
        return client.delete(path, **ELSEWHERE)
    return client.get(path, **ELSEWHERE)


def as_bob(org: Org, name: str, objects: Objects) -> tuple[bool, Any]:
    """Whether ``name`` is an API URL, and bob's client for it (his token
    for the API, his session for the pages)."""
    if reverse(name, kwargs=objects.kwargs.get(name)).startswith("/api/"):
        return True, org.bob
    client = Client()
    client.force_login(org.users["bob"])
    return False, client


def refusals() -> int:
    return AccessDenial.objects.count()


@pytest.mark.parametrize("name", sorted(OTHER_TEAMS | APPROVERS | ADMINS))
def test_another_team_is_refused_and_the_refusal_logged(
    org: Org, objects: Objects, name: str
) -> None:
    api, client = as_bob(org, name, objects)
    before = refusals()
    response = call(client, name, objects)
    expected = {404} if (name not in ADMINS or not api) else {403, 404}
    if name == "metrics":
        expected = {403}
    assert response.status_code in expected, (name, response.status_code)
    assert refusals() == before + 1, f"{name}: the refusal is not in the access log"


@pytest.mark.parametrize("name", sorted(SIGNED_IN))
def test_what_every_signed_in_user_may_read_answers_them(
    org: Org, objects: Objects, name: str
) -> None:
    _, client = as_bob(org, name, objects)
    response = call(client, name, objects)
    assert response.status_code in (200, 302, 404), (name, response.status_code)
    if response.status_code == 302:  # "my team": to his own
        assert response["Location"] == "/teams/serving/", name
    if response.status_code == 404:  # a detail that does not exist here: not a refusal
        assert name.endswith("-detail"), name


@pytest.mark.parametrize("name", sorted(SIGNED_IN | OTHER_TEAMS | APPROVERS | ADMINS))
def test_anonymous_requests_are_refused(org: Org, objects: Objects, name: str) -> None:
    path = reverse(name, kwargs=objects.kwargs.get(name))
    before = refusals()
    response = call(Client(), name, objects)
    if path.startswith("/api/") or name == "metrics":
        assert response.status_code in (401, 403), (name, response.status_code)
        assert refusals() == before + 1, f"{name}: the refusal is not in the access log"
    else:
        assert response.status_code == 302 and "/login/" in response["Location"], name


@pytest.mark.parametrize("name", sorted(PUBLIC - {"logout"}))
def test_public_urls_answer_anyone(objects: Objects, name: str) -> None:
    response = call(Client(), name, objects)
    assert response.status_code in (200, 302, 404), (name, response.status_code)
