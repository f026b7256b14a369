"""Who may do what on the REST API, role by role.

The matrix is explicit: every policy endpoint and write method is crossed with
every role. Refusals must leave the policy untouched (object, row count and
``PolicyChange`` count) and leave an ``AccessDenial`` row behind; the admin's
writes must really happen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.db import models
from rest_framework.response import Response
from rest_framework.test import APIClient

from accounts.models import AccessDenial, ApiToken
from accounts.services import create_token
from queues import services
from queues.choices import PolicyKind
from queues.models import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    PolicyChange,
    QueueClass,
    ResourceFlavor,
    Team,
    TeamMembership,
    Topology,
    WorkloadPriorityClass,
)
from tests import factories

API = "/api/v1/"
SIGNED_IN = ["admin", "member_a", "member_b", "approver", "global_approver"]
NON_ADMINS = ["member_a", "member_b", "approver", "global_approver"]
WRITES = ["POST", "PATCH", "PUT", "DELETE"]
MIGRATED_QUEUE_CLASSES = {"interactive-dev", "training-large", "eval-batch", "urgent-release"}


@dataclass(frozen=True)
class Kind:
    """One policy endpoint: where it lives, a valid new object, and the existing
    object (``target``) that PATCH / PUT / DELETE address."""

    path: str
    model: type[models.Model]
    target: str
    create: dict[str, Any]
    change: dict[str, Any]


KINDS = {
    kind.path: kind
    for kind in [
        Kind("teams", Team, "delta", {"slug": "gamma", "name": "Gamma"}, {"name": "Delta 2"}),
        Kind(
            "topologies",
            Topology,
            "spare",
            {"name": "t2", "levels": list(factories.RACK_LEVELS)},
            {"description": "x"},
        ),
        Kind("resource-flavors", ResourceFlavor, "spare", {"name": "a100"}, {"description": "x"}),
        Kind("cohorts", Cohort, "spare", {"name": "c2"}, {"description": "x"}),
        Kind(
            "cluster-queues",
            ClusterQueue,
            "spare",
            {"name": "q2", "resource_groups": factories.gpu_groups("h100")},
            {"description": "x"},
        ),
        Kind(
            "local-queues",
            LocalQueue,
            "{lq}",
            {"namespace": "alpha", "name": "extra", "cluster_queue": "q"},
            {"stop_policy": "Hold"},
        ),
        Kind(
            "priority-classes",
            WorkloadPriorityClass,
            "spare",
            {"name": "p", "value": 10},
            {"value": 99},
        ),
        Kind("queue-classes", QueueClass, "spare", {"name": "my-class"}, {"description": "x"}),
    ]
}
WRITE_MATRIX = [(kind, method) for kind in KINDS for method in WRITES]
ADMIN_STATUS = {"POST": 201, "PATCH": 200, "PUT": 200, "DELETE": 204}


@pytest.fixture
def world(users: dict[str, Any]) -> dict[str, str]:
    """Policy around the role users: one spare object of every kind to edit or delete."""
    factories.topology("gpu-racks")
    factories.topology("spare")
    factories.flavor("h100")
    factories.flavor("spare")
    factories.cohort("shared")
    factories.cohort("spare")
    factories.cluster_queue("q", resource_groups=factories.gpu_groups("h100"))
    factories.cluster_queue("spare", resource_groups=factories.gpu_groups("h100"))
    factories.team("delta")
    services.priority_classes.create(actor=None, data={"name": "spare", "value": 1})
    services.queue_classes.create(actor=None, data={"name": "spare"})
    manual = services.local_queues.create(
        actor=None, data={"namespace": "alpha", "name": "manual", "cluster_queue": "q"}
    )
    change = PolicyChange.objects.exclude(kind=PolicyKind.TEAM_MEMBERSHIP).first()
    assert change is not None
    return {"lq": str(manual.pk), "change": str(change.pk)}


def url(template: str, world: dict[str, str]) -> str:
    return API + template.format(**world)


def detail(kind: Kind, world: dict[str, str]) -> str:
    return url(f"{kind.path}/{kind.target}/", world)


def call(client: APIClient, method: str, path: str, data: Any = None) -> Response:
    if method == "GET":
        return client.get(path)
    return getattr(client, method.lower())(path, data, format="json")


def username_of(users: dict[str, Any], role: str) -> str:
    return "" if users[role] is None else users[role].get_username()


def assert_denial_logged(
    before: int, *, username: str, method: str, path: str, reason: str
) -> None:
    assert AccessDenial.objects.count() == before + 1
    row = AccessDenial.objects.order_by("-id").first()
    assert row is not None
    assert (row.username, row.method, row.path, row.reason) == (username, method, path, reason)


def write_payload(kind: Kind, method: str, current: dict[str, Any]) -> dict[str, Any] | None:
    """POST a new object, PATCH the change, PUT back what GET said plus the change."""
    if method == "POST":
        return kind.create
    if method == "PATCH":
        return kind.change
    if method == "PUT":
        return {**current, **kind.change}
    return None


# --- anonymous --------------------------------------------------------------

ANONYMOUS_CALLS = [
    ("GET", ""),
    ("GET", "me/"),
    ("GET", "tokens/"),
    ("POST", "tokens/"),
    ("GET", "access-denials/"),
    ("GET", "policy/history/"),
    ("GET", "policy/history/{change}/"),
    ("GET", "teams/alpha/members/"),
    ("POST", "teams/alpha/members/"),
    ("DELETE", "teams/alpha/members/member-a/?role=member"),
    *((method, f"{kind}/") for kind in KINDS for method in ("GET", "POST")),
    *(
        (method, f"{kind.path}/{kind.target}/")
        for kind in KINDS.values()
        for method in ("GET", "PATCH", "PUT", "DELETE")
    ),
]


@pytest.mark.parametrize(("method", "template"), ANONYMOUS_CALLS)
def test_anonymous_is_refused_401_with_challenge_and_logged(
    clients: dict[str, APIClient], world: dict[str, str], method: str, template: str
) -> None:
    path = url(template, world)
    denials, changes = AccessDenial.objects.count(), PolicyChange.objects.count()
    response = call(clients["anonymous"], method, path, {"name": "zzz", "username": "member-b"})
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="berth"'
    assert PolicyChange.objects.count() == changes
    assert_denial_logged(denials, username="", method=method, path=path, reason="not-authenticated")


def test_unknown_token_is_refused_401_as_bad_credentials(db: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer berth_not-a-real-token")
    response = client.get(API + "teams/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="berth"'
    row = AccessDenial.objects.get()
    assert (row.username, row.reason, row.path) == ("", "bad-credentials", API + "teams/")


# --- reading the policy -----------------------------------------------------

READS = [
    ("teams/", "slug", "alpha"),
    ("teams/alpha/", "slug", "alpha"),
    ("topologies/", "name", "gpu-racks"),
    ("topologies/gpu-racks/", "name", "gpu-racks"),
    ("resource-flavors/", "name", "h100"),
    ("resource-flavors/h100/", "name", "h100"),
    ("cohorts/", "name", "shared"),
    ("cohorts/shared/", "name", "shared"),
    ("cluster-queues/", "name", "q"),
    ("cluster-queues/q/", "name", "q"),
    ("local-queues/", "name", "manual"),
    ("local-queues/{lq}/", "name", "manual"),
    ("priority-classes/", "name", "spare"),
    ("priority-classes/spare/", "name", "spare"),
    ("queue-classes/", "name", "interactive-dev"),
    ("queue-classes/interactive-dev/", "name", "interactive-dev"),
    ("policy/history/", "object_name", "q"),
    ("policy/history/{change}/", "id", "{change}"),
]


@pytest.mark.parametrize("role", SIGNED_IN)
@pytest.mark.parametrize(("template", "key", "expected"), READS)
def test_every_signed_in_role_reads_the_policy(
    clients: dict[str, APIClient],
    world: dict[str, str],
    role: str,
    template: str,
    key: str,
    expected: str,
) -> None:
    response = clients[role].get(url(template, world))
    assert response.status_code == 200, response.content
    body = response.json()
    want = expected.format(**world)
    if "results" in body:
        assert want in [str(item[key]) for item in body["results"]]
    else:
        assert str(body[key]) == want


@pytest.mark.parametrize("role", SIGNED_IN)
def test_queue_classes_from_the_data_migration_are_listed(
    clients: dict[str, APIClient], role: str
) -> None:
    response = clients[role].get(API + "queue-classes/")
    assert response.status_code == 200
    assert {item["name"] for item in response.json()["results"]} == MIGRATED_QUEUE_CLASSES


@pytest.mark.parametrize(("role", "sees_alpha_members"), [
    ("admin", True), ("member_a", True), ("approver", True),
    ("member_b", False), ("global_approver", False),
])  # fmt: skip
def test_membership_history_is_private_to_the_team(
    clients: dict[str, APIClient], role: str, sees_alpha_members: bool
) -> None:
    response = clients[role].get(API + "policy/history/", {"page_size": 500})
    assert response.status_code == 200
    rows = [(r["kind"], r["object_name"]) for r in response.json()["results"]]
    assert ((PolicyKind.TEAM_MEMBERSHIP.value, "alpha") in rows) is sees_alpha_members


# --- writing the policy -----------------------------------------------------


@pytest.mark.parametrize("role", NON_ADMINS)
@pytest.mark.parametrize(("kind_path", "method"), WRITE_MATRIX)
def test_non_admin_writes_are_refused_403_and_change_nothing(
    clients: dict[str, APIClient],
    users: dict[str, Any],
    world: dict[str, str],
    role: str,
    kind_path: str,
    method: str,
) -> None:
    kind, admin = KINDS[kind_path], clients["admin"]
    target = detail(kind, world)
    before = admin.get(target).json()
    rows, changes = kind.model.objects.count(), PolicyChange.objects.count()
    denials = AccessDenial.objects.count()
    path = url(f"{kind.path}/", world) if method == "POST" else target

    response = call(clients[role], method, path, write_payload(kind, method, before))

    assert response.status_code == 403, response.content
    assert admin.get(target).json() == before
    assert kind.model.objects.count() == rows
    assert PolicyChange.objects.count() == changes
    assert_denial_logged(
        denials, username=username_of(users, role), method=method, path=path, reason="forbidden"
    )


@pytest.mark.parametrize(("kind_path", "method"), WRITE_MATRIX)
def test_admin_writes_succeed(
    clients: dict[str, APIClient], world: dict[str, str], kind_path: str, method: str
) -> None:
    kind, admin = KINDS[kind_path], clients["admin"]
    target = detail(kind, world)
    before = admin.get(target).json()
    rows, changes = kind.model.objects.count(), PolicyChange.objects.count()
    denials = AccessDenial.objects.count()
    path = url(f"{kind.path}/", world) if method == "POST" else target

    response = call(admin, method, path, write_payload(kind, method, before))

    assert response.status_code == ADMIN_STATUS[method], response.content
    assert PolicyChange.objects.count() > changes
    assert PolicyChange.objects.order_by("-id").values_list("actor_username", flat=True)[0] == (
        "admin"
    )
    assert AccessDenial.objects.count() == denials
    if method == "POST":
        assert kind.model.objects.count() == rows + 1
        key = "id" if kind.path == "local-queues" else ("slug" if kind.path == "teams" else "name")
        created = admin.get(url(f"{kind.path}/{response.json()[key]}/", world))
        assert created.status_code == 200
        for field, value in kind.create.items():
            if field != "resource_groups":
                assert created.json()[field] == value
    elif method == "DELETE":
        assert kind.model.objects.count() == rows - 1
        assert admin.get(target).status_code == 404
    else:
        after = admin.get(target).json()
        assert {field: after[field] for field in kind.change} == kind.change
        assert after["revision"] == before["revision"] + 1


# --- team members -----------------------------------------------------------

MEMBERS = API + "teams/alpha/members/"


@pytest.mark.parametrize(("role", "expected"), [
    ("admin", 200), ("member_a", 200), ("approver", 200),
    ("member_b", 404), ("global_approver", 404), ("anonymous", 401),
])  # fmt: skip
def test_team_members_are_private_to_the_team(
    clients: dict[str, APIClient], role: str, expected: int
) -> None:
    response = clients[role].get(MEMBERS)
    assert response.status_code == expected
    if expected == 200:
        assert response.json() == {
            "team": "alpha",
            "members": [
                {"username": "approver-a", "role": "approver"},
                {"username": "member-a", "role": "member"},
            ],
        }
    else:
        assert "members" not in response.json()


def test_another_teams_members_look_like_a_missing_team_but_are_logged(
    clients: dict[str, APIClient], users: dict[str, Any]
) -> None:
    denials = AccessDenial.objects.count()
    hidden = clients["member_b"].get(MEMBERS)
    assert hidden.status_code == 404
    assert_denial_logged(
        denials, username="member-b", method="GET", path=MEMBERS, reason="forbidden"
    )
    missing = clients["member_b"].get(API + "teams/nope/members/")
    assert missing.status_code == 404
    assert missing.json() == hidden.json()
    assert AccessDenial.objects.count() == denials + 1


def alpha_members() -> set[tuple[str, str]]:
    return set(
        TeamMembership.objects.filter(team__slug="alpha").values_list("user__username", "role")
    )


@pytest.mark.parametrize(("role", "username", "expected"), [
    ("admin", "global-approver", 201), ("admin", "member-a", 200),
    ("member_a", "global-approver", 403), ("approver", "global-approver", 403),
    ("member_b", "member-b", 404), ("global_approver", "global-approver", 404),
    ("anonymous", "global-approver", 401),
])  # fmt: skip
def test_only_admins_add_team_members(
    clients: dict[str, APIClient],
    users: dict[str, Any],
    role: str,
    username: str,
    expected: int,
) -> None:
    before, changes = alpha_members(), PolicyChange.objects.count()
    denials = AccessDenial.objects.count()
    response = clients[role].post(MEMBERS, {"username": username, "role": "member"}, format="json")
    assert response.status_code == expected, response.content
    if expected == 201:
        assert alpha_members() == {*before, (username, "member")}
        assert PolicyChange.objects.count() == changes + 1
        assert {"username": username, "role": "member"} in response.json()["members"]
    else:
        assert alpha_members() == before
        assert PolicyChange.objects.count() == changes
    if expected in (200, 201):
        assert AccessDenial.objects.count() == denials
    else:
        reason = "not-authenticated" if expected == 401 else "forbidden"
        assert_denial_logged(
            denials, username=username_of(users, role), method="POST", path=MEMBERS, reason=reason
        )


@pytest.mark.parametrize(("role", "expected"), [
    ("admin", 204), ("member_a", 403), ("approver", 403),
    ("member_b", 404), ("global_approver", 404), ("anonymous", 401),
])  # fmt: skip
def test_only_admins_remove_team_members(
    clients: dict[str, APIClient], users: dict[str, Any], role: str, expected: int
) -> None:
    path = MEMBERS + "member-a/?role=member"
    before, denials = alpha_members(), AccessDenial.objects.count()
    response = clients[role].delete(path)
    assert response.status_code == expected, response.content
    if expected == 204:
        assert alpha_members() == before - {("member-a", "member")}
        assert AccessDenial.objects.count() == denials
    else:
        assert alpha_members() == before
        reason = "not-authenticated" if expected == 401 else "forbidden"
        assert_denial_logged(
            denials, username=username_of(users, role), method="DELETE", path=path, reason=reason
        )


# --- me, tokens, access log -------------------------------------------------

ME = {
    "admin": ("admin", True, False, []),
    "member_a": ("member-a", False, False, [{"team": "alpha", "role": "member"}]),
    "member_b": ("member-b", False, False, [{"team": "beta", "role": "member"}]),
    "approver": ("approver-a", False, False, [{"team": "alpha", "role": "approver"}]),
    "global_approver": ("global-approver", False, True, []),
}


@pytest.mark.parametrize("role", SIGNED_IN)
def test_me_describes_the_caller(clients: dict[str, APIClient], role: str) -> None:
    response = clients[role].get(API + "me/")
    assert response.status_code == 200
    username, admin, approver, teams = ME[role]
    assert response.json() == {
        "username": username,
        "is_platform_admin": admin,
        "is_global_approver": approver,
        "teams": teams,
    }


@pytest.mark.parametrize("role", SIGNED_IN)
def test_tokens_are_private_to_their_owner(
    clients: dict[str, APIClient], users: dict[str, Any], role: str
) -> None:
    owner = users["member_b"] if role != "member_b" else users["member_a"]
    foreign = create_token(user=owner, name="someone-elses").token
    client = clients[role]

    listed = client.get(API + "tokens/")
    assert listed.status_code == 200
    own_ids = set(ApiToken.objects.filter(user=users[role]).values_list("pk", flat=True))
    assert {item["id"] for item in listed.json()["results"]} == own_ids
    assert foreign.pk not in own_ids

    denials = AccessDenial.objects.count()
    assert client.get(f"{API}tokens/{foreign.pk}/").status_code == 404
    assert client.delete(f"{API}tokens/{foreign.pk}/").status_code == 404
    foreign.refresh_from_db()
    assert foreign.revoked_at is None
    # Someone else's token does not exist for them, and both attempts are logged.
    assert AccessDenial.objects.count() == denials + 2


def test_a_user_revokes_their_own_token(
    clients: dict[str, APIClient], users: dict[str, Any]
) -> None:
    mine = create_token(user=users["member_a"], name="spare").token
    assert clients["member_a"].delete(f"{API}tokens/{mine.pk}/").status_code == 204
    mine.refresh_from_db()
    assert mine.revoked_at is not None


@pytest.mark.parametrize(("role", "expected"), [
    ("admin", 200), ("member_a", 403), ("member_b", 403), ("approver", 403),
    ("global_approver", 403), ("anonymous", 401),
])  # fmt: skip
def test_only_admins_read_the_access_log(
    clients: dict[str, APIClient], users: dict[str, Any], role: str, expected: int
) -> None:
    path = API + "access-denials/"
    denials = AccessDenial.objects.count()
    response = clients[role].get(path)
    assert response.status_code == expected
    if expected == 200:
        assert response.json()["count"] == denials
        return
    reason = "not-authenticated" if expected == 401 else "forbidden"
    assert_denial_logged(
        denials, username=username_of(users, role), method="GET", path=path, reason=reason
    )
