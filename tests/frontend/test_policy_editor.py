"""The policy editor at /policy/: who may open it, what Plan shows (and that it
writes nothing), what Apply changes and records, and how refused edits look.

Forms are posted the way a browser would post them: ``form_data`` reads the
inputs, selects and textareas of the rendered form, and a test changes only
what an admin would type."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from accounts.models import AccessDenial
from frontend.policy_plan import ABSENT, FieldChange, compare, leaf_changes
from queues import services
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.kueue.render import render_flavor
from queues.models import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    PolicyChange,
    Quota,
    ReconcileRun,
    ResourceFlavor,
)
from queues.services.common import _request_reconcile
from tests.factories import GPU, cluster_queue, cohort, flavor, gpu_groups, role_users

QUEUE_URL = "/policy/cluster-queue/research/"
NOMINAL = "rg-0-f-0-r-0-nominal_quota"
LENDING = "rg-0-f-0-r-0-lending_limit"
NOMINAL_PATH = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"


class FormReader(HTMLParser):
    """The fields a browser would submit from one form (no button pressed)."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside:
            return
        name = a.get("name", "")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("submit", "button"):
                return
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            self.fields[name] = a.get("value", "")
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select is not None:
            if self._select not in self.fields or "selected" in a:
                self.fields[self._select] = a.get("value", "")
        elif tag == "textarea" and name and "readonly" not in a:
            self._textarea = name
            self.fields[name] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            # The HTML parser gives the text after the newline a textarea may open with.
            self.fields[self._textarea] += (
                data.lstrip("\n") if not self.fields[self._textarea] else data
            )


def form_data(html: str, form_id: str = "policy-form") -> dict[str, str]:
    reader = FormReader(form_id)
    reader.feed(html)
    assert reader.fields, f"no form #{form_id} on the page"
    return reader.fields


def text(response: Any) -> str:
    return response.content.decode()


@pytest.fixture
def org(db: Any, queue_class_templates: None, settings: Any) -> dict[str, Any]:
    """Role users (tests.factories.role_users), two flavors, a cohort and one
    team queue with 8 GPUs of which it lends at most 4."""
    settings.BERTH_RECONCILE_ON_CHANGE = False
    people = role_users()
    flavor("h100")
    flavor("h100-spot", capacity_type="spot")
    cohort("shared")
    cluster_queue(
        "research",
        team="alpha",
        cohort="shared",
        queue_class="training-large",
        resource_groups=gpu_groups("h100", "8", lending_limit="4"),
    )
    return people


@pytest.fixture
def admin(org: dict[str, Any]) -> Client:
    client = Client()
    client.force_login(org["admin"])
    return client


def footprint() -> dict[str, Any]:
    """Everything Plan must leave alone."""
    return {
        "changes": PolicyChange.objects.count(),
        "runs": ReconcileRun.objects.count(),
        "quotas": sorted(
            Quota.objects.values_list(
                "cluster_queue__name",
                "flavor__name",
                "resource",
                "nominal_quota",
                "borrowing_limit",
                "lending_limit",
            ),
            key=repr,
        ),
        "local_queues": sorted(LocalQueue.objects.values_list("namespace__name", "name")),
        "queues": sorted(ClusterQueue.objects.values_list("name", "revision")),
        "flavors": sorted(ResourceFlavor.objects.values_list("name", "revision")),
        "cohorts": sorted(Cohort.objects.values_list("name", "revision")),
    }


def queue_form(client: Client, **changes: str) -> dict[str, str]:
    data = form_data(text(client.get(QUEUE_URL)))
    data.update(changes)
    return data


def nominal() -> int:
    return Quota.objects.get(cluster_queue__name="research", flavor__name="h100").nominal_quota


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
    assert "<del>8</del>" in page and "<ins>12</ins>" in page
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


# ------------------------------------------------------------------ apply


def test_apply_changes_the_quota_and_records_who_did_it(org: dict[str, Any], admin: Client) -> None:
    revision = ClusterQueue.objects.get(name="research").revision
    runs = ReconcileRun.objects.count()
    response = admin.post(QUEUE_URL, queue_form(admin, **{NOMINAL: "12", "action": "apply"}))
    assert response.status_code == 302
    entry = PolicyChange.objects.latest("id")
    assert response["Location"] == f"{QUEUE_URL}?applied={entry.pk}"
    assert nominal() == 12
    assert ClusterQueue.objects.get(name="research").revision == revision + 1
    assert (entry.actor, entry.actor_username) == (org["admin"], "admin")
    assert (entry.kind, entry.object_name, entry.action) == ("cluster-queue", "research", "updated")
    assert entry.changed_fields == ["resource_groups"]
    assert ReconcileRun.objects.count() == runs  # reconcile on change is off in this test

    page = text(admin.get(response["Location"]))
    assert "Applied." in page
    assert "resource_groups[0].flavors[0].resources[0].nominal_quota" in page
    assert "<del>8</del> → <ins>12</ins>" in page
    index = text(admin.get("/policy/"))
    assert 'data-quota="h100/nvidia.com/gpu">h100 nvidia.com/gpu: <strong>12</strong>' in index
    assert f'data-change-id="{entry.pk}"' in index


def test_apply_of_class_controlled_fields_and_weight(admin: Client) -> None:
    data = queue_form(
        admin, stop_policy="Hold", fair_sharing_weight="2", queueing_strategy="BestEffortFIFO"
    )
    response = admin.post(QUEUE_URL, {**data, "action": "plan"})
    [change] = response.context["plan"].changes
    assert {f.path: (f.old, f.new) for f in change.fields} == {
        "spec.fairSharing.weight": ("1", "2"),
        "spec.queueingStrategy": ("StrictFIFO", "BestEffortFIFO"),
        "spec.stopPolicy": ("None", "Hold"),
    }
    assert admin.post(QUEUE_URL, {**data, "action": "apply"}).status_code == 302
    queue = ClusterQueue.objects.get(name="research")
    assert (queue.stop_policy, queue.queueing_strategy) == ("Hold", "BestEffortFIFO")
    assert str(queue.fair_sharing_weight.normalize()) == "2"


def test_moving_a_queue_to_another_class_brings_the_class_defaults(admin: Client) -> None:
    """The form sends only what changed, so fields that kept the old class's
    values follow the new class, as through the API."""
    data = queue_form(admin, queue_class="eval-batch", action="plan")
    [change] = admin.post(QUEUE_URL, data).context["plan"].changes
    assert {f.path: (f.old, f.new) for f in change.fields} == {
        "metadata.labels.berth.dev/queue-class": ("training-large", "eval-batch"),
        "spec.preemption.reclaimWithinCohort": ("Any", "LowerPriority"),
        "spec.queueingStrategy": ("StrictFIFO", "BestEffortFIFO"),
    }


def test_a_flavor_is_added_to_a_group_and_removed_again(admin: Client) -> None:
    data = queue_form(admin, **{"rg-0-add-flavor": "h100-spot", "action": "add-flavor-0"})
    before = footprint()
    response = admin.post(QUEUE_URL, data)
    assert response.status_code == 200
    assert footprint() == before  # adding a row writes nothing
    assert "Added flavor h100-spot" in text(response)
    data = form_data(text(response))
    assert data["rg-0-flavors"] == "2" and data["rg-0-f-1-name"] == "h100-spot"
    data.update({"rg-0-f-1-r-0-nominal_quota": "16", "action": "apply"})
    assert admin.post(QUEUE_URL, data).status_code == 302
    groups = services.cluster_queues.snapshot(ClusterQueue.objects.get(name="research"))
    assert [f["name"] for f in groups["resource_groups"][0]["flavors"]] == ["h100", "h100-spot"]

    data = queue_form(admin, **{"rg-0-f-0-remove": "1", "action": "plan"})
    [change] = admin.post(QUEUE_URL, data).context["plan"].changes
    # By position, as Kueue reads them (the order is the order of preference).
    assert {f.path: (f.old_text, f.new_text) for f in change.fields} == {
        "spec.resourceGroups[0].flavors[0].name": ("h100", "h100-spot"),
        "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit": ("4", "—"),
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota": ("8", "16"),
        "spec.resourceGroups[0].flavors[1]": (
            '{"name": "h100-spot", "resources": '
            '[{"name": "nvidia.com/gpu", "nominalQuota": "16"}]}',
            "—",
        ),
    }
    assert admin.post(QUEUE_URL, {**data, "action": "apply"}).status_code == 302
    assert list(
        Quota.objects.filter(cluster_queue__name="research").values_list(
            "flavor__name", "nominal_quota"
        )
    ) == [("h100-spot", 16)]


def test_a_new_resource_group_is_added(admin: Client) -> None:
    data = queue_form(
        admin,
        **{"rg-new-covered": "cpu, memory", "rg-new-flavor": "h100-spot", "action": "add-group"},
    )
    data = form_data(text(admin.post(QUEUE_URL, data)))
    assert data["rg"] == "2" and data["rg-1-covered"] == "cpu, memory"
    data.update(
        {
            "rg-1-f-0-r-0-nominal_quota": "500m",
            "rg-1-f-0-r-1-nominal_quota": "4Ti",
            "action": "apply",
        }
    )
    assert admin.post(QUEUE_URL, data).status_code == 302
    stored = dict(
        Quota.objects.filter(cluster_queue__name="research", group_index=1).values_list(
            "resource", "nominal_quota"
        )
    )
    assert stored == {"cpu": 500, "memory": 4 * 2**40}


# ------------------------------------------------------------------ refused


@pytest.mark.parametrize("action", ["plan", "apply"])
@pytest.mark.parametrize(
    ("changes", "field", "rule"),
    [
        ({LENDING: "9"}, "resource_groups[0].flavors[0].resources[0].lending_limit",
         "lending-limit-above-nominal"),
        ({NOMINAL: "-4"}, "resource_groups[0].flavors[0].resources[0].nominal_quota",
         "non-negative"),
        ({NOMINAL: "eight"}, "resource_groups[0].flavors[0].resources[0].nominal_quota",
         "quantity-format"),
        ({"cohort": "", LENDING: "4"}, "resource_groups[0].flavors[0].resources[0].lending_limit",
         "lending-limit-needs-cohort"),
        ({"stop_policy": "Sometimes"}, "stop_policy", "unsupported-value"),
        ({"borrow_within_cohort_max_priority_threshold": "lots"},
         "borrow_within_cohort_max_priority_threshold", "invalid"),
    ],
)  # fmt: skip
def test_invalid_input_names_the_field_and_rule_and_changes_nothing(
    admin: Client, action: str, changes: dict[str, str], field: str, rule: str
) -> None:
    data = queue_form(admin, **changes, action=action)
    before = footprint()
    response = admin.post(QUEUE_URL, data)
    assert response.status_code == 200
    errors = {(e.field, e.rule) for e in response.context["errors"]}
    assert (field, rule) in errors, errors
    page = text(response)
    assert "Refused: nothing was changed" in page
    assert f'data-field="{field}" data-rule="{rule}"' in page
    assert response.context["plan"] is None
    assert footprint() == before
    # The offending input is marked, and keeps what was typed.
    typed = form_data(page)
    for name, value in changes.items():
        assert typed[name] == value
    if field.startswith("resource_groups"):
        name = "rg-0-f-0-r-0-" + field.rsplit(".", 1)[1]
        assert f'name="{name}" value="{typed[name]}" aria-label' in page
        assert 'class="invalid" aria-invalid="true"' in page


def test_quota_rules_shown_for_a_quota_error_are_quota_inputs() -> None:
    from frontend.policy_forms import inputs_of

    assert inputs_of("resource_groups[0].flavors[1].resources[2].lending_limit") == {
        "rg-0-f-1-r-2-lending_limit"
    }
    assert inputs_of("resource_groups[1].flavors[0].name") == {"rg-1-f-0"}
    assert inputs_of("resource_groups[1].covered_resources[0]") == {"rg-1"}
    assert inputs_of("node_labels.example.com/x") == {"node_labels"}
    assert inputs_of("node_taints[2].effect") == {"node_taints"}


@pytest.mark.parametrize("action", ["plan", "apply"])
def test_a_stale_revision_is_refused(org: dict[str, Any], admin: Client, action: str) -> None:
    data = queue_form(admin, **{NOMINAL: "12", "action": action})
    # Someone else changes the queue after the form was opened.
    queue = ClusterQueue.objects.get(name="research")
    services.cluster_queues.update(actor=None, obj=queue, data={"fair_sharing_weight": "3"})
    before = footprint()
    response = admin.post(QUEUE_URL, data)
    assert response.status_code == 200
    page = text(response)
    assert "Changed since you opened it" in page
    assert f"is at revision {queue.revision}" in page
    assert f"made to revision {data['revision']}" in page
    assert [e.rule for e in response.context["errors"]] == ["stale-revision"]
    assert footprint() == before
    assert nominal() == 8
    assert not PolicyChange.objects.filter(actor=org["admin"]).exists()


def test_a_form_without_its_revision_is_refused(admin: Client) -> None:
    data = queue_form(admin, **{NOMINAL: "12", "action": "apply"})
    del data["revision"]
    before = footprint()
    response = admin.post(QUEUE_URL, data)
    assert response.status_code == 200
    assert [(e.field, e.rule) for e in response.context["errors"]] == [("revision", "format")]
    assert footprint() == before


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


# ------------------------------------------------------------------ reconcile


def test_apply_requests_a_reconcile_and_plan_does_not(
    admin: Client, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.BERTH_RECONCILE_ON_CHANGE = True
    # The setup's writes asked for a reconcile in this test's transaction, which
    # never commits; policy_write asks once per transaction, so forget them to
    # see what each request asks for.
    connection.run_on_commit.clear()
    with django_capture_on_commit_callbacks() as planned:
        response = admin.post(QUEUE_URL, queue_form(admin, **{NOMINAL: "12", "action": "plan"}))
        assert response.status_code == 200
    assert planned == []
    with django_capture_on_commit_callbacks() as applied:
        response = admin.post(QUEUE_URL, queue_form(admin, **{NOMINAL: "12", "action": "apply"}))
        assert response.status_code == 302
    assert applied == [_request_reconcile]
    assert "Applied; reconcile requested." in text(admin.get(response["Location"]))


@pytest.mark.django_db(transaction=True)
def test_committed_for_real_apply_reconciles_and_plan_does_not(
    queue_class_templates: None, settings: Any
) -> None:
    """No test transaction around it: Plan's rollback and Apply's commit are real,
    and with no broker the reconcile runs in-process on the simulated cluster."""
    settings.BERTH_RECONCILE_ON_CHANGE = False
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    people = role_users()
    flavor("h100")
    cohort("shared")
    cluster_queue("research", cohort="shared", resource_groups=gpu_groups("h100", "8"))
    settings.BERTH_RECONCILE_ON_CHANGE = True
    client = Client()
    client.force_login(people["admin"])
    changes = PolicyChange.objects.count()

    response = client.post(QUEUE_URL, queue_form(client, **{NOMINAL: "12", "action": "plan"}))
    assert response.status_code == 200 and not response.context["plan"].empty
    assert ReconcileRun.objects.count() == 0
    assert PolicyChange.objects.count() == changes
    assert nominal() == 8

    response = client.post(QUEUE_URL, queue_form(client, **{NOMINAL: "12", "action": "apply"}))
    assert response.status_code == 302
    [run] = ReconcileRun.objects.all()
    assert run.status == "succeeded", run.errors
    queues = {q["metadata"]["name"]: q for q in SimulatedBackend().list(TYPES["ClusterQueue"])[0]}
    quota = queues["research"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert quota["nominalQuota"] == "12"
