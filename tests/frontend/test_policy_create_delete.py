"""Creating, editing and deleting the other policy objects in the policy
editor: flavors, cohorts and cluster queues created from the index page's
forms (and a refused create naming its field), a flavor's labels and taints
edited as lines, a cohort parent cycle refused, and deletion planned first and
refused while the object is in use. Forms are read and posted as a browser
would (``policy_editor_support.form_data``)."""

from __future__ import annotations

from typing import Any

from django.test import Client

from queues.models import Cohort, PolicyChange, Quota, ResourceFlavor
from tests.factories import GPU, cohort
from tests.frontend.policy_editor_support import (
    NOMINAL,
    admin,
    footprint,
    form_data,
    org,
    text,
)

__all__ = ["admin", "org"]  # fixtures, imported for pytest to find


# ------------------------------------------------------------------ create


def test_a_flavor_is_created_through_the_new_flavor_form(
    org: dict[str, Any], admin: Client
) -> None:
    index = text(admin.get("/policy/"))
    data = form_data(index, "new-flavor")
    data.update(
        name="h200", capacity_type="spot", node_labels="gpu=h200\npool = spot-a", action="plan"
    )
    before = footprint()
    response = admin.post("/policy/new/flavor/", data)
    assert response.status_code == 200
    [change] = response.context["plan"].changes
    assert (change.action, change.kind, change.name) == ("create", "ResourceFlavor", "h200")
    assert footprint() == before

    response = admin.post("/policy/new/flavor/", {**data, "action": "apply"})
    assert response.status_code == 302
    created = ResourceFlavor.objects.get(name="h200")
    assert created.node_labels == {"gpu": "h200", "pool": "spot-a"}
    assert created.capacity_type == "spot"
    entry = PolicyChange.objects.get(kind="resource-flavor", object_name="h200")
    assert (entry.action, entry.actor) == ("created", org["admin"])
    assert response["Location"] == f"/policy/flavor/h200/?applied={entry.pk}"
    assert "Applied." in text(admin.get(response["Location"]))


def test_a_cohort_is_created_through_the_new_cohort_form(
    org: dict[str, Any], admin: Client
) -> None:
    data = form_data(text(admin.get("/policy/")), "new-cohort")
    assert data["fair_sharing_weight"] == "1" and data["parent"] == ""
    data.update(name="vision-org", parent="shared", fair_sharing_weight="2", action="apply")
    response = admin.post("/policy/new/cohort/", data)
    assert response.status_code == 302
    created = Cohort.objects.get(name="vision-org")
    assert created.parent is not None and created.parent.name == "shared"
    assert str(created.fair_sharing_weight.normalize()) == "2"
    entry = PolicyChange.objects.get(kind="cohort", object_name="vision-org")
    assert entry.actor == org["admin"]


def test_a_cluster_queue_with_quota_is_created_from_the_index_form(admin: Client) -> None:
    data = form_data(text(admin.get("/policy/")), "new-cluster-queue")
    data.update({"name": "vision", "cohort": "shared", "rg-0-f-0-name": "h100"})
    data.update({NOMINAL: "4", "action": "apply"})
    response = admin.post("/policy/new/cluster-queue/", data)
    assert response.status_code == 302, response.context and response.context["errors"]
    assert list(
        Quota.objects.filter(cluster_queue__name="vision").values_list(
            "flavor__name", "resource", "nominal_quota"
        )
    ) == [("h100", GPU, 4)]


def test_a_refused_create_names_the_field(admin: Client) -> None:
    before = footprint()
    response = admin.post("/policy/new/flavor/", {"name": "h100", "action": "apply"})
    assert response.status_code == 200
    assert ("name", "unique") in {(e.field, e.rule) for e in response.context["errors"]}
    response = admin.post(
        "/policy/new/flavor/", {"name": "ok", "node_labels": "no-equals-sign", "action": "plan"}
    )
    assert response.status_code == 200
    assert [(e.field, e.rule) for e in response.context["errors"]] == [("node_labels", "format")]
    assert footprint() == before


# ------------------------------------------------------------------ flavors, cohorts, delete


def test_a_flavors_labels_and_taints_are_edited_as_lines(admin: Client) -> None:
    url = "/policy/flavor/h100-spot/"
    data = form_data(text(admin.get(url)))
    data.update(
        node_labels="cloud.example.com/pool=spot",
        node_taints="spot=true:NoSchedule\ngpu:NoExecute",
        action="plan",
    )
    [change] = admin.post(url, data).context["plan"].changes
    assert {f.path: f.new for f in change.fields} == {
        "spec.nodeLabels": {"cloud.example.com/pool": "spot"},
        "spec.nodeTaints": [
            {"effect": "NoSchedule", "key": "spot", "value": "true"},
            {"effect": "NoExecute", "key": "gpu"},
        ],
    }
    assert admin.post(url, {**data, "action": "apply"}).status_code == 302
    stored = ResourceFlavor.objects.get(name="h100-spot")
    assert stored.node_taints == [
        {"key": "spot", "value": "true", "effect": "NoSchedule"},
        {"key": "gpu", "effect": "NoExecute"},
    ]
    # Shown again as the same lines, so an untouched form changes nothing.
    again = form_data(text(admin.get(url)))
    assert again["node_taints"] == "spot=true:NoSchedule\ngpu:NoExecute"
    response = admin.post(url, {**again, "action": "apply"})
    assert "Nothing to apply" in text(response)

    data = {**again, "node_taints": "spot=true:Sometimes", "action": "plan"}
    response = admin.post(url, data)
    assert ("node_taints[0].effect", "taint-effect") in {
        (e.field, e.rule) for e in response.context["errors"]
    }


def test_a_cohort_parent_cycle_is_refused(admin: Client) -> None:
    cohort("child", parent="shared")
    data = form_data(text(admin.get("/policy/cohort/shared/")))
    assert "child" in text(admin.get("/policy/cohort/shared/"))
    response = admin.post("/policy/cohort/shared/", {**data, "parent": "child", "action": "apply"})
    assert response.status_code == 200
    assert [(e.field, e.rule) for e in response.context["errors"]] == [("parent", "cohort-cycle")]


def test_deleting_is_planned_first_and_refused_while_in_use(admin: Client) -> None:
    url = "/policy/flavor/h100-spot/"
    revision = str(ResourceFlavor.objects.get(name="h100-spot").revision)
    before = footprint()
    response = admin.post(url, {"action": "plan-delete", "revision": revision})
    [change] = response.context["plan"].changes
    assert (change.action, change.kind, change.name) == ("delete", "ResourceFlavor", "h100-spot")
    assert footprint() == before
    response = admin.post(url, {"action": "delete", "revision": revision})
    assert response.status_code == 302
    entry = PolicyChange.objects.latest("id")
    assert response["Location"] == f"/policy/?applied={entry.pk}"
    assert (entry.action, entry.object_name) == ("deleted", "h100-spot")
    assert not ResourceFlavor.objects.filter(name="h100-spot").exists()

    revision = str(ResourceFlavor.objects.get(name="h100").revision)
    response = admin.post("/policy/flavor/h100/", {"action": "delete", "revision": revision})
    assert response.status_code == 200
    assert "still used by cluster queue research" in text(response)
    assert ResourceFlavor.objects.filter(name="h100").exists()
