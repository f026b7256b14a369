"""The policy editor at /policy/, before anything is saved: who may open it
(admins only; others get a 404 and a recorded denial, anonymous visitors the
sign-in page), the edit form as stored, what Plan shows and that it writes
nothing, the paginated change history, and the per-field diff Plan is built
on. Apply and refused edits are in ``test_policy_apply.py``, creating and
deleting in ``test_policy_create_delete.py``; forms are read and posted as a
browser would (``policy_editor_support.form_data``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts.models import AccessDenial
from frontend.policy_plan import ABSENT, FieldChange, compare, leaf_changes
from queues.kueue.render import render_flavor
from queues.models import ClusterQueue
from tests.factories import GPU, flavor
from tests.frontend.policy_editor_support import (
    LENDING,
    NOMINAL,
    NOMINAL_PATH,
    QUEUE_URL,
    admin,
    footprint,
    form_data,
    nominal,
    org,
    queue_form,
    text,
)

__all__ = ["admin", "org"]  # fixtures, imported for pytest to find


# ------------------------------------------------------------------ who may


def test_the_admin_sees_the_policy_and_its_history(admin: Client) -> None:
    response = admin.get("/policy/")
    assert response.status_code == 200
    page = text(response)
    for expected in ("Resource flavors", "Cohorts", "Cluster queues", "Change history"):
        assert expected in page
    assert 'href="/policy/cluster-queue/research/"' in page
    assert 'href="/policy/flavor/h100-spot/"' in page
    assert 'href="/policy/cohort/shared/"' in page
    assert 'data-quota="h100/nvidia.com/gpu">h100 nvidia.com/gpu: <strong>8</strong>' in page
    assert 'action="/policy/new/flavor/"' in page
    assert 'action="/policy/new/cohort/"' in page
    assert 'action="/policy/new/cluster-queue/"' in page
    assert 'href="/api/v1/policy/history/"' in page
    # The history lists the setup's changes, newest first, with what changed.
    rows = response.context["history_rows"]
    assert rows[0]["entry"].object_name in {"research", "alpha/research"}
    created = next(r for r in rows if r["entry"].kind == "cluster-queue")
    assert created["entry"].action == "created"
    assert FieldChange("cohort", ABSENT, "shared") in created["changes"]
    assert '<a href="/policy/">Policy</a>' not in page  # the nav link is there, marked active
    assert 'href="/policy/" class="active">Policy</a>' in page


def test_the_policy_link_is_for_admins_only(org: dict[str, Any]) -> None:
    member = Client()
    member.force_login(org["member_a"])
    assert 'href="/policy/"' not in text(member.get("/"))


@pytest.mark.parametrize("who", ["member_a", "approver", "global_approver"])
@pytest.mark.parametrize(
    "path", ["/policy/", QUEUE_URL, "/policy/new/flavor/", "/policy/flavor/h100/"]
)
def test_non_admins_get_a_404_and_change_nothing(org: dict[str, Any], who: str, path: str) -> None:
    client = Client()
    client.force_login(org[who])
    before = footprint()
    denials = AccessDenial.objects.count()
    assert client.get(path).status_code == 404
    post = {"action": "apply", "name": "sneaky", "revision": "1", NOMINAL: "999", "rg": "1"}
    assert client.post(path, post).status_code == 404
    assert footprint() == before
    assert AccessDenial.objects.count() == denials + 2
    assert AccessDenial.objects.latest("at").reason == AccessDenial.Reason.FORBIDDEN


@pytest.mark.parametrize("path", ["/policy/", QUEUE_URL, "/policy/new/cohort/"])
def test_anonymous_visitors_are_sent_to_sign_in(org: dict[str, Any], path: str) -> None:
    for response in (Client().get(path), Client().post(path, {"action": "apply"})):
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={path}"


@pytest.mark.parametrize(
    "path", ["/policy/queue/research/", "/policy/cluster-queue/nope/", "/policy/new/team/"]
)
def test_unknown_kinds_and_objects_are_404(admin: Client, path: str) -> None:
    assert admin.get(path).status_code == 404


# ------------------------------------------------------------------ the form


def test_the_edit_form_shows_the_queue_as_stored(admin: Client) -> None:
    data = form_data(text(admin.get(QUEUE_URL)))
    queue = ClusterQueue.objects.get(name="research")
    assert data["revision"] == str(queue.revision)
    assert data["cohort"] == "shared"
    assert data["team"] == "alpha"
    assert data["queue_class"] == "training-large"
    assert data["queueing_strategy"] == queue.queueing_strategy
    assert data["stop_policy"] == "None"
    assert data["rg"] == "1" and data["rg-0-covered"] == GPU and data["rg-0-f-0-name"] == "h100"
    assert (data[NOMINAL], data["rg-0-f-0-r-0-borrowing_limit"], data[LENDING]) == ("8", "", "4")


# ------------------------------------------------------------------ plan


def test_plan_of_a_quota_change_shows_only_the_cluster_queue_diff_and_writes_nothing(
    admin: Client,
) -> None:
    data = queue_form(admin, **{NOMINAL: "12", "action": "plan"})
    before = footprint()
    response = admin.post(QUEUE_URL, data)
    assert response.status_code == 200
    plan = response.context["plan"]
    assert [(c.action, c.kind, c.name) for c in plan.changes] == [
        ("update", "ClusterQueue", "research")
    ]
    assert plan.changes[0].fields == (FieldChange(NOMINAL_PATH, "8", "12"),)
    assert plan.unchanged > 0
    page = text(response)
    assert f"<code>{NOMINAL_PATH}</code>" in page
    assert "<del><code>8</code></del>" in page and "<ins><code>12</code></ins>" in page
    assert "Nothing was saved" in page
    assert footprint() == before
    assert nominal() == 8
    # The form comes back as typed, still at the revision it was opened at.
    again = form_data(page)
    assert again[NOMINAL] == "12" and again["revision"] == data["revision"]


def test_a_form_left_as_it_was_plans_nothing_and_applies_nothing(admin: Client) -> None:
    before = footprint()
    response = admin.post(QUEUE_URL, queue_form(admin, action="plan"))
    assert response.context["plan"].empty
    assert "No Kueue object would change" in text(response)
    response = admin.post(QUEUE_URL, queue_form(admin, action="apply"))
    assert response.status_code == 200
    assert "Nothing to apply" in text(response)
    assert footprint() == before


def test_plan_of_a_new_cluster_queue_shows_it_and_its_local_queues(admin: Client) -> None:
    before = footprint()
    post = {
        "name": "vision", "team": "beta", "cohort": "shared", "queue_class": "eval-batch",
        "rg": "1", "rg-0-flavors": "1", "rg-0-covered": GPU, "rg-0-f-0-name": "h100-spot",
        NOMINAL: "4", "action": "plan",
    }  # fmt: skip
    response = admin.post("/policy/new/cluster-queue/", post)
    assert response.status_code == 200, response.context and response.context["errors"]
    plan = response.context["plan"]
    assert [(c.action, c.kind, c.namespace, c.name) for c in plan.changes] == [
        ("create", "ClusterQueue", "", "vision"),
        ("create", "LocalQueue", "beta", "vision"),
    ]
    assert "nominalQuota: &#x27;4&#x27;" in text(response)  # the manifest of the new queue
    assert footprint() == before
    assert not ClusterQueue.objects.filter(name="vision").exists()


# ------------------------------------------------------------------ history


def test_the_history_is_paginated(admin: Client) -> None:
    for index in range(25):
        flavor(f"f{index:02d}")
    first = admin.get("/policy/")
    assert first.context["history"].paginator.num_pages >= 2
    assert len(first.context["history_rows"]) == 20
    assert "older →" in text(first)
    second = admin.get("/policy/?page=2")
    assert second.status_code == 200
    newest = {r["entry"].pk for r in first.context["history_rows"]}
    assert newest.isdisjoint(r["entry"].pk for r in second.context["history_rows"])


def test_leaf_changes_and_compare_are_per_field() -> None:
    old = {"a": {"b": [1, 2]}, "c": "x"}
    new = {"a": {"b": [1, 3, 4]}, "d": "y"}
    assert leaf_changes(old, new) == [
        FieldChange("a.b[1]", 2, 3),
        FieldChange("a.b[2]", ABSENT, 4),
        FieldChange("c", "x", ABSENT),
        FieldChange("d", ABSENT, "y"),
    ]
    h100 = render_flavor({"name": "h100"})
    spot = render_flavor({"name": "h100", "capacity_type": "spot"})
    assert compare([h100], [h100]).empty
    [change] = compare([h100], [spot]).changes
    # The policy hash changes too, but it is bookkeeping, not a change to show.
    assert change.fields == (
        FieldChange("metadata.labels.berth.dev/capacity-type", "on-demand", "spot"),
    )
    plan = compare([h100], [render_flavor({"name": "a100"})])
    assert [(c.action, c.name) for c in plan.changes] == [("create", "a100"), ("delete", "h100")]
