"""Reconcile against both backends: create, no-op, one change, drift, prune with
drain, never touching what Berth does not own, and never pruning everything."""

from __future__ import annotations

from typing import Any

import pytest

from queues import services
from queues.backends.base import ClusterBackend
from queues.kueue.plan import MANAGED_BY
from queues.kueue.render import TEAM_LABEL
from queues.models import (
    ClusterQueue,
    Cohort,
    DriftRecord,
    LocalQueue,
    QueueClass,
    ReconcileRun,
    ResourceFlavor,
    Team,
)
from queues.reconcile import reconcile
from tests.envtest.cluster import EnvtestCluster
from tests.envtest.controlplane import BERTH_USER
from tests.factories import gpu_groups
from tests.reconcile.clusters import ClusterUnderTest
from tests.reconcile.policy_support import small_policy

GPU = "nvidia.com/gpu"


@pytest.fixture
def policy(db: Any) -> None:
    small_policy(urgent=True)


def names(cluster: ClusterUnderTest, kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in cluster.objects(kind)}


def test_first_apply_creates_everything_and_a_second_run_writes_nothing(
    cluster: ClusterUnderTest, policy: None
) -> None:
    first = reconcile(cluster.backend)
    assert first.status == ReconcileRun.Status.SUCCEEDED, first.errors
    assert names(cluster, "ClusterQueue") == {"research", "urgent"}
    assert names(cluster, "ResourceFlavor") == {"h100"}
    assert names(cluster, "Cohort") == {"org"}
    assert names(cluster, "LocalQueue") == {"research", "urgent"}
    assert names(cluster, "AdmissionCheck") == {"berth-approval"}  # urgent-release needs it
    assert "research" in names(cluster, "Namespace")
    [queue] = [q for q in cluster.objects("ClusterQueue") if q["metadata"]["name"] == "urgent"]
    assert queue["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "berth-approval"}]
    }
    assert first.created == first.write_calls == 8

    before = cluster.writes()
    again = reconcile(cluster.backend)
    assert (again.status, again.write_calls, again.unchanged) == (
        ReconcileRun.Status.SUCCEEDED,
        0,
        8,
    )
    assert cluster.writes() == before
    assert again.message == "in sync: nothing to change"


def test_one_quota_change_makes_exactly_one_apply(cluster: ClusterUnderTest, policy: None) -> None:
    reconcile(cluster.backend)
    queue = ClusterQueue.objects.get(name="research")
    services.cluster_queues.update(
        actor=None, obj=queue, data={"resource_groups": gpu_groups("h100", "16")}
    )
    run = reconcile(cluster.backend)
    assert (run.updated, run.write_calls, run.drifted) == (1, 1, 0)
    [change] = run.changes
    assert (change["kind"], change["name"]) == ("ClusterQueue", "research")
    [research] = [q for q in cluster.objects("ClusterQueue") if q["metadata"]["name"] == "research"]
    assert (
        research["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "16"
    )


def test_a_hand_edit_is_recorded_as_drift_and_repaired(
    cluster: ClusterUnderTest, policy: None
) -> None:
    reconcile(cluster.backend)

    def grab_more(obj: dict[str, Any]) -> None:
        obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "64"

    cluster.edit("ClusterQueue", "research", grab_more)
    run = reconcile(cluster.backend)
    assert (run.updated, run.drifted) == (1, 1)
    drift = DriftRecord.objects.get()
    assert (drift.kind, drift.name) == ("ClusterQueue", "research")
    assert drift.fields == ["spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"]
    [research] = [q for q in cluster.objects("ClusterQueue") if q["metadata"]["name"] == "research"]
    assert (
        research["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "8"
    )


def test_a_queue_with_workloads_is_drained_before_it_is_deleted(
    cluster: ClusterUnderTest, policy: None
) -> None:
    reconcile(cluster.backend)
    cluster.set_status("ClusterQueue", "urgent", {"admittedWorkloads": 2})
    services.cluster_queues.delete(actor=None, obj=ClusterQueue.objects.get(name="urgent"))
    run = reconcile(cluster.backend)
    assert run.drained == 1 and run.deleted >= 1  # its LocalQueue and the check go
    [urgent] = [q for q in cluster.objects("ClusterQueue") if q["metadata"]["name"] == "urgent"]
    assert urgent["spec"]["stopPolicy"] == "HoldAndDrain"
    assert urgent["spec"]["resourceGroups"]  # the rest of Berth's spec is kept
    assert reconcile(cluster.backend).write_calls == 0  # still draining: nothing new to do
    cluster.set_status("ClusterQueue", "urgent", {"admittedWorkloads": 0})
    finished = reconcile(cluster.backend)
    assert finished.deleted == 1
    assert names(cluster, "ClusterQueue") == {"research"}


def test_objects_without_berths_label_are_never_touched(
    cluster: ClusterUnderTest, policy: None
) -> None:
    cluster.add_foreign(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "hand-made"},
            "spec": {},
        }
    )
    cluster.add_foreign(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "h100", "labels": {"owner": "someone"}},
            "spec": {},
        }
    )
    run = reconcile(cluster.backend)
    assert "hand-made" in names(cluster, "ClusterQueue")
    [error] = run.errors
    assert (error["kind"], error["name"], error["action"]) == ("ResourceFlavor", "h100", "conflict")
    assert MANAGED_BY in error["message"]
    assert run.status == ReconcileRun.Status.PARTIAL
    [h100] = cluster.objects("ResourceFlavor")
    assert h100["metadata"]["labels"] == {"owner": "someone"}


def test_an_empty_policy_prunes_nothing(cluster: ClusterUnderTest, policy: None) -> None:
    reconcile(cluster.backend)
    # As if the database were wiped.
    LocalQueue.objects.all().delete()
    ClusterQueue.objects.all().delete()
    Team.objects.all().delete()
    Cohort.objects.all().delete()
    ResourceFlavor.objects.all().delete()
    QueueClass.objects.all().delete()
    run = reconcile(cluster.backend)
    assert run.deleted == 0 and run.write_calls == 0
    assert "policy is empty" in run.message
    assert names(cluster, "ClusterQueue") == {"research", "urgent"}


def test_plan_shows_changes_and_writes_nothing(cluster: ClusterUnderTest, policy: None) -> None:
    before = cluster.writes()
    run = reconcile(cluster.backend, trigger=ReconcileRun.Trigger.PLAN, dry_run=True)
    assert run.write_calls == 0 and cluster.writes() == before
    assert {(c["action"], c["kind"]) for c in run.changes} >= {("create", "ClusterQueue")}
    assert cluster.objects("ClusterQueue") == []


def berths_patches(cluster: ClusterUnderTest, since: int) -> list[tuple[str, str, int]]:
    """(resource, requestURI, status) of every patch Berth sent since ``since``."""
    assert isinstance(cluster, EnvtestCluster)
    return [
        (e["objectRef"]["resource"], e["requestURI"], e["responseStatus"]["code"])
        for e in cluster.plane.audit.events(since, user=BERTH_USER)
        if e["verb"] == "patch"
    ]


def test_a_plan_of_a_change_is_a_server_side_dry_run_that_persists_nothing(
    cluster: ClusterUnderTest, policy: None
) -> None:
    reconcile(cluster.backend)
    services.cluster_queues.update(
        actor=None,
        obj=ClusterQueue.objects.get(name="research"),
        data={"resource_groups": gpu_groups("h100", "16", borrowing_limit="4")},
    )
    versions = {
        q["metadata"]["name"]: q["metadata"]["resourceVersion"]
        for q in cluster.objects("ClusterQueue")
    }
    writes = cluster.writes()
    since = cluster.plane.audit.offset() if isinstance(cluster, EnvtestCluster) else 0
    plan = reconcile(cluster.backend, trigger=ReconcileRun.Trigger.PLAN, dry_run=True)
    assert plan.status == ReconcileRun.Status.SUCCEEDED, plan.errors
    assert [(c["action"], c["kind"], c["name"]) for c in plan.changes] == [
        ("update", "ClusterQueue", "research")
    ]
    assert (plan.write_calls, cluster.writes()) == (0, writes)
    # Not even a resourceVersion moved.
    assert {
        q["metadata"]["name"]: q["metadata"]["resourceVersion"]
        for q in cluster.objects("ClusterQueue")
    } == versions
    if isinstance(cluster, EnvtestCluster):
        [(resource, uri, status)] = berths_patches(cluster, since)
        assert (resource, "dryRun=All" in uri, status) == ("clusterqueues", True, 200)
    applied = reconcile(cluster.backend)  # the plan did not do the apply's work
    assert applied.updated == 1


def test_a_plan_for_an_empty_cluster_skips_dry_runs_into_namespaces_it_creates(
    cluster: ClusterUnderTest, policy: None
) -> None:
    # A dry-run namespace is not persisted: a dry run of its LocalQueues would be a 404.
    since = cluster.plane.audit.offset() if isinstance(cluster, EnvtestCluster) else 0
    plan = reconcile(cluster.backend, trigger=ReconcileRun.Trigger.PLAN, dry_run=True)
    assert (plan.status, plan.errors) == (ReconcileRun.Status.SUCCEEDED, [])
    notes = {c["name"]: c["note"] or "" for c in plan.changes if c["kind"] == "LocalQueue"}
    assert set(notes) == {"research", "urgent"}
    assert all("namespace is created by this plan" in note for note in notes.values())
    assert cluster.objects("ClusterQueue") == []
    assert "research" not in names(cluster, "Namespace")
    if isinstance(cluster, EnvtestCluster):
        patches = berths_patches(cluster, since)
        assert len(patches) == 6 and all("dryRun=All" in uri for _, uri, _ in patches)
        assert "localqueues" not in {resource for resource, _, _ in patches}
        # A dry run of a create is answered as the create would be.
        assert {status for _, _, status in patches} == {201}


def test_namespaces_are_never_deleted(cluster: ClusterUnderTest, policy: None) -> None:
    reconcile(cluster.backend)
    services.teams.update(
        actor=None, obj=Team.objects.get(slug="research"), data={"namespaces": ["research-2"]}
    )
    run = reconcile(cluster.backend)
    assert {"research", "research-2"} <= names(cluster, "Namespace")
    assert any(c["kind"] == "Namespace" and c["action"] == "keep" for c in run.changes)


def test_an_existing_team_namespace_gets_only_the_team_label(
    cluster: ClusterUnderTest, policy: None
) -> None:
    cluster.add_foreign(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": "research",
                "labels": {"owner": "infra", "app.kubernetes.io/managed-by": "helm"},
            },
        }
    )
    run = reconcile(cluster.backend)
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    [research] = [n for n in cluster.objects("Namespace") if n["metadata"]["name"] == "research"]
    # Its owner's labels stay; Berth claims nothing but the label its queues select on.
    # (A real API server labels every namespace with its own name.)
    labels = dict(research["metadata"]["labels"])
    labels.pop("kubernetes.io/metadata.name", None)
    assert labels == {
        "owner": "infra",
        "app.kubernetes.io/managed-by": "helm",
        TEAM_LABEL: "research",
    }
    assert ("research", "research") in {
        (q["metadata"]["namespace"], q["metadata"]["name"]) for q in cluster.objects("LocalQueue")
    }
    writes = cluster.writes()
    assert reconcile(cluster.backend).write_calls == 0 and cluster.writes() == writes


def test_a_team_label_set_by_someone_else_is_a_conflict_not_overwritten(
    cluster: ClusterUnderTest, policy: None
) -> None:
    cluster.add_foreign(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "research", "labels": {TEAM_LABEL: "serving"}},
        }
    )
    run = reconcile(cluster.backend)
    assert run.status == ReconcileRun.Status.PARTIAL
    [error] = run.errors
    assert (error["kind"], error["name"], error["transient"]) == ("Namespace", "research", False)
    assert "409" in error["message"] or "conflict" in error["message"].lower()
    assert run.retries == 0
    [research] = [n for n in cluster.objects("Namespace") if n["metadata"]["name"] == "research"]
    assert research["metadata"]["labels"][TEAM_LABEL] == "serving"


class EditedBeforeTheWrite:
    """Berth's backend, with someone else changing an object between Berth's
    plan (which read its resourceVersion) and Berth's write."""

    def __init__(self, backend: ClusterBackend, kind: str, name: str, edit: Any) -> None:
        self.backend, self.target, self.edit = backend, (kind, name), edit

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.backend, attribute)

    def apply(self, obj: dict[str, Any], *, force: bool, dry_run: bool = False) -> dict[str, Any]:
        if self.edit is not None and (obj["kind"], obj["metadata"]["name"]) == self.target:
            edit, self.edit = self.edit, None
            edit()
        return self.backend.apply(obj, force=force, dry_run=dry_run)


def test_an_update_on_a_stale_resource_version_is_refused_then_made_on_the_fresh_one(
    cluster: ClusterUnderTest, policy: None
) -> None:
    reconcile(cluster.backend)
    services.cluster_queues.update(
        actor=None,
        obj=ClusterQueue.objects.get(name="research"),
        data={"resource_groups": gpu_groups("h100", "16", borrowing_limit="4")},
    )

    def annotate(obj: dict[str, Any]) -> None:
        obj["metadata"].setdefault("annotations", {})["owner"] = "infra"

    racing = EditedBeforeTheWrite(
        cluster.backend,
        "ClusterQueue",
        "research",
        lambda: cluster.edit("ClusterQueue", "research", annotate),
    )
    since = cluster.plane.audit.offset() if isinstance(cluster, EnvtestCluster) else 0
    run = reconcile(racing)  # type: ignore[arg-type]
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    assert (run.updated, run.retries) == (1, 1)  # the stale write was refused once
    [research] = [q for q in cluster.objects("ClusterQueue") if q["metadata"]["name"] == "research"]
    assert research["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == (
        "16"
    )
    assert research["metadata"]["annotations"]["owner"] == "infra"  # theirs, kept
    if isinstance(cluster, EnvtestCluster):
        # The API server refused the write (409), Berth re-read the queue and wrote again.
        answered = [
            (e["verb"], e["responseStatus"]["code"])
            for e in cluster.plane.audit.events(since, user=BERTH_USER)
            if e.get("objectRef", {}).get("resource") == "clusterqueues"
            and e["objectRef"].get("name") == "research"
            and "dryRun" not in e["requestURI"]
        ]
        assert answered == [("patch", 409), ("get", 200), ("patch", 200)]
