"""Applying edits in the policy editor: Apply changes the stored policy, bumps
the revision and records who did it; class-controlled fields, class moves,
added and removed flavors and resource groups; refused edits (invalid input,
a stale or missing revision) name the field and rule, keep what was typed and
change nothing; and Apply, unlike Plan, requests a reconcile, including with
real commits against the simulated cluster. Forms are read and posted as a
browser would (``policy_editor_support.form_data``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client

from queues import services
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.models import ClusterQueue, PolicyChange, Quota, ReconcileRun
from queues.services.common import _request_reconcile
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, role_users
from tests.frontend.policy_editor_support import (
    LENDING,
    NOMINAL,
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
    assert "<del><code>8</code></del> → <ins><code>12</code></ins>" in page
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
