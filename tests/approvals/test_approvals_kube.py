"""Berth as the controller of Kueue's ``berth-approval`` AdmissionCheck, end to end over HTTP:
Berth's KubernetesBackend (the official client, configured from a kubeconfig as in
production, as Berth's ServiceAccount) against a real kube-apiserver with Kueue's CRDs, with
the test playing Kueue and a provisioning controller as the other managers of the Workload's
status. Server-side apply, list-map merging of ``admissionChecks`` and field ownership are the
API server's own. A status write that fails with a 500 needs the loopback double (a real server
cannot be made to answer one on demand).

Reconcile creates the AdmissionCheck and the gated ClusterQueue ``urgent``; the controller
keeps the check Active; alice's job gets a Workload that Kueue reserves quota for, with two
checks Pending; sync and one controller pass raise the request; carol decides; the decision
reaches the Workload as Berth's own ``admissionChecks`` entry (server-side apply, manager
``berth``, status subresource) and the other controller's entry stays as it was. A decision
whose apply task is lost, and a status write the API server fails, are both re-driven by
the next pass."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from django.utils import timezone
from kubernetes import client

from approvals.apply import keep_check_active
from approvals.controller import drive_approvals
from approvals.decide import decide
from approvals.models import ApprovalAction, ApprovalRequest, ApprovalState
from approvals.status import CHECK_NAME, CONTROLLER_NAME, rfc3339
from cluster.models import WorkloadRecord, WorkloadState
from cluster.sync import sync_workloads
from jobs.follow import follow_jobs
from jobs.models import JobRequest, JobState
from queues.backends import get_backend
from queues.backends.kubernetes import KubernetesBackend
from queues.models import ReconcileRun
from queues.reconcile import reconcile
from tests.approvals.approval_support import approvers
from tests.envtest.cluster import EnvtestCluster
from tests.envtest.controlplane import ControlPlane
from tests.jobs.conftest import Org, job
from tests.kube.apiserver import FakeApiServer

KUEUE, V = "kueue.x-k8s.io", "v1beta2"
APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
GPU = "nvidia.com/gpu"
PROVISION = "provision-gpus"  # a check of Kueue's ProvisioningRequest controller
BERTH_ENTRY = 'k:{"name":"berth-approval"}'
PROVISION_ENTRY = 'k:{"name":"provision-gpus"}'
PROVISIONER = "kueue-provisioning"  # its field manager
ENTRY_FIELDS: dict[str, Any] = {
    ".": {},
    "f:lastTransitionTime": {},
    "f:message": {},
    "f:name": {},
    "f:state": {},
}


def write_kubeconfig(home: Path, server: str) -> None:
    """~/.kube/config naming the double (the client reads KUBECONFIG only at import)."""
    (home / ".kube").mkdir()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "double", "cluster": {"server": server}}],
        "users": [{"name": "tester", "user": {"token": "test"}}],
        "contexts": [{"name": "double", "context": {"cluster": "double", "user": "tester"}}],
        "current-context": "double",
    }
    (home / ".kube" / "config").write_text(yaml.safe_dump(config))


def condition(kind: str, reason: str, message: str = "") -> dict[str, Any]:
    at = rfc3339(timezone.now())
    return {"type": kind, "status": "True", "reason": reason, "message": message} | {
        "lastTransitionTime": at
    }


@dataclass
class Kueue:
    """Kueue and its provisioning controller, writing as other managers over HTTP."""

    api: client.CustomObjectsApi

    def workload_for(self, owner: dict[str, Any]) -> str:
        """The Workload Kueue's job integration makes for a (suspended) batch Job."""
        meta, spec = owner["metadata"], owner["spec"]
        name = f"job-{meta['name']}-8d2f1"
        workload = {
            "apiVersion": f"{KUEUE}/{V}",
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": meta["namespace"],
                "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {
                "queueName": meta["labels"]["kueue.x-k8s.io/queue-name"],
                "priority": 100000,
                "priorityClassRef": {
                    "group": KUEUE,
                    "kind": "WorkloadPriorityClass",
                    "name": meta["labels"]["kueue.x-k8s.io/priority-class"],
                },
                "podSets": [
                    {
                        "name": "main",
                        "count": spec.get("parallelism", 1),
                        "template": spec["template"],
                    }
                ],
            },
        }
        self.api.create_namespaced_custom_object(
            KUEUE, V, meta["namespace"], "workloads", workload, field_manager="kueue"
        )
        return name

    def _status(self, name: str, status: dict[str, Any]) -> None:
        self.api.patch_namespaced_custom_object_status(
            KUEUE, V, "research", "workloads", name, {"status": status},
            field_manager="kueue", _content_type=MERGE,
        )  # fmt: skip

    def reserve(self, name: str) -> None:
        """Quota reserved in ``urgent``: the queue's checks (and the provisioning one) Pending."""
        workload = self.workload(name)
        count = workload["spec"]["podSets"][0]["count"]
        pending = {"state": "Pending", "message": "", "lastTransitionTime": rfc3339(timezone.now())}
        self._status(
            name,
            {
                "admission": {
                    "clusterQueue": "urgent",
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "count": count,
                            "flavors": {GPU: "h100"},
                            "resourceUsage": {GPU: str(8 * count)},
                        }
                    ],
                },
                "conditions": [
                    condition("QuotaReserved", "QuotaReserved", "Quota reserved in ClusterQueue")
                ],
                "admissionChecks": [{"name": CHECK_NAME} | pending, {"name": PROVISION} | pending],
            },
        )

    def provision(self, name: str) -> dict[str, Any]:
        """The provisioning controller answers its own check, by server-side apply."""
        entry = {
            "name": PROVISION,
            "state": "Ready",
            "message": "ProvisioningRequest research/req-1 is provisioned",
            "lastTransitionTime": rfc3339(timezone.now()),
        }
        body = {
            "apiVersion": f"{KUEUE}/{V}",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": "research"},
            "status": {"admissionChecks": [entry]},
        }
        self.api.patch_namespaced_custom_object_status(
            KUEUE, V, "research", "workloads", name, body,
            field_manager=PROVISIONER, force=True, _content_type=APPLY,
        )  # fmt: skip
        return entry

    def admit(self, name: str) -> None:
        """Every check Ready: Kueue admits the Workload."""
        conditions = self.workload(name)["status"]["conditions"]
        admitted = condition("Admitted", "Admitted", "The workload is admitted")
        self._status(name, {"conditions": [*conditions, admitted]})

    def deactivate(self, name: str) -> None:
        """A check Rejected: Kueue deactivates the Workload and releases its quota."""
        self.api.patch_namespaced_custom_object(
            KUEUE, V, "research", "workloads", name, {"spec": {"active": False}},
            field_manager="kueue", _content_type=MERGE,
        )  # fmt: skip
        message = (
            'The workload is deactivated due to AdmissionCheck in Rejected state: "berth-approval"'
        )
        evicted = condition("Evicted", "DeactivatedDueToAdmissionCheck", message)
        released = condition("QuotaReserved", "Inactive", message) | {"status": "False"}
        self._status(name, {"admission": None, "conditions": [evicted, released]})

    def workload(self, name: str) -> dict[str, Any]:
        return dict(self.api.get_namespaced_custom_object(KUEUE, V, "research", "workloads", name))

    def checks(self, name: str) -> dict[str, dict[str, Any]]:
        return {c["name"]: c for c in self.workload(name)["status"]["admissionChecks"]}


@dataclass
class Cluster:
    """Berth's backend, Kueue, and what the test reads as the cluster's admin."""

    backend: KubernetesBackend
    kueue: Kueue
    get_object: Callable[..., dict[str, Any] | None]
    # Berth's status writes to a Workload: (query string, or the double's call).
    status_patches: Callable[[str], list[Any]]
    writes: Callable[[], int]
    faults: FakeApiServer | None = None  # the double, to make it fail on purpose


@contextmanager
def berth_from_kubeconfig(
    home: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[KubernetesBackend]:
    """BERTH_CLUSTER=kubernetes with ~/.kube/config in ``home``, so the apply task (run
    in-process after commit) reaches the cluster as in production; the org's policy
    reconciled."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(home))
    settings.BERTH_CLUSTER = "kubernetes"
    settings.BERTH_KUBE_CONTEXT = ""
    get_backend.cache_clear()
    try:
        backend = get_backend()
        assert isinstance(backend, KubernetesBackend)
        run = reconcile(backend)
        assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
        yield backend
    finally:
        get_backend.cache_clear()
        kubernetes.client.Configuration.set_default(None)


@pytest.fixture
def cluster(
    org: Org,
    kube: EnvtestCluster,
    control_plane: ControlPlane,
    tmp_path: Path,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Cluster]:
    """A real API server; Berth as its ServiceAccount."""
    (tmp_path / ".kube").mkdir()
    shutil.copy(control_plane.berth_kubeconfig, tmp_path / ".kube" / "config")

    def get_object(
        group: str, plural: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        kind = {"workloads": "Workload", "jobs": "Job", "clusterqueues": "ClusterQueue"}.get(
            plural
        ) or {"admissionchecks": "AdmissionCheck", "localqueues": "LocalQueue"}[plural]
        return kube.get(kind, name, namespace or "")

    def status_patches(name: str) -> list[str]:
        return [
            event["requestURI"]
            for event in kube.berth_requests()
            if event["verb"] == "patch"
            and event["objectRef"].get("resource") == "workloads"
            and event["objectRef"].get("subresource") == "status"
            and event["objectRef"].get("name") == name
        ]

    with berth_from_kubeconfig(tmp_path, settings, monkeypatch) as backend:
        yield Cluster(
            backend,
            Kueue(client.CustomObjectsApi(kube.admin_api)),
            get_object,
            status_patches,
            kube.writes,
        )


@pytest.fixture
def double(
    org: Org, tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cluster]:
    """The loopback API-server double, for a 500 no real server answers on demand."""
    server = FakeApiServer().start()
    write_kubeconfig(tmp_path, server.url)
    try:
        with (
            berth_from_kubeconfig(tmp_path, settings, monkeypatch) as backend,
            server.api_client() as api,
        ):

            def patches(name: str) -> list[Any]:
                return [
                    call
                    for call in server.write_calls()
                    if call.method == "PATCH"
                    and call.path.endswith(f"/workloads/{name}/status")
                    and call.query.get("fieldManager") == "berth"
                ]

            yield Cluster(
                backend,
                Kueue(client.CustomObjectsApi(api)),
                server.get_object,
                patches,
                lambda: len(server.write_calls()),
                server,
            )
    finally:
        server.stop()
    assert server.internal_errors == []


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    return approvers() | org.users


def submit_urgent(org: Org, django_capture_on_commit_callbacks: Any, cluster: Cluster) -> str:
    """alice submits a release fix to the urgent queue; Berth creates the Job (its create
    task runs after commit); Kueue makes its Workload and reserves quota. Returns its name."""
    body = job(
        name="release-fix",
        queue="urgent-release",
        nodes=1,
        gpus_per_node=8,
        priority_class="train-high",
        justification="release 2026.12 blocker: regression in eval",
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = org.alice.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    owner = cluster.get_object("batch", "jobs", "release-fix", "research")
    assert owner is not None and owner["spec"]["suspend"] is True
    name = cluster.kueue.workload_for(owner)
    cluster.kueue.reserve(name)
    return name


def raised(cluster: Cluster) -> ApprovalRequest:
    """Sync, then one controller pass: the one pending request it raised."""
    sync_workloads(cluster.backend)
    record = WorkloadRecord.objects.get()
    assert (record.state, record.cluster_queue) == (WorkloadState.QUOTA_RESERVED, "urgent")
    assert record.admission_checks[CHECK_NAME]["state"] == "Pending"
    outcome = drive_approvals(cluster.backend)
    assert (outcome["raised"], outcome["applied"], outcome["apply_failed"]) == (1, 0, 0)
    [request] = ApprovalRequest.objects.all()
    assert request.state == ApprovalState.PENDING
    return request


def actions(request: ApprovalRequest) -> list[str]:
    return list(request.events.values_list("action", flat=True))


def berth_status_fields(workload: dict[str, Any]) -> dict[str, Any]:
    [entry] = [e for e in workload["metadata"]["managedFields"] if e["manager"] == "berth"]
    assert (entry["operation"], entry["subresource"]) == ("Apply", "status")
    return dict(entry["fieldsV1"])


# --- the AdmissionCheck ------------------------------------------------------------------------


def test_reconcile_makes_the_check_and_the_controller_keeps_it_active(cluster: Cluster) -> None:
    check = cluster.get_object(KUEUE, "admissionchecks", CHECK_NAME)
    assert check is not None and check["spec"] == {"controllerName": CONTROLLER_NAME}
    urgent = cluster.get_object(KUEUE, "clusterqueues", "urgent")
    assert urgent is not None
    assert urgent["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": CHECK_NAME}]}
    local = cluster.get_object(KUEUE, "localqueues", "urgent", "research")
    assert local is not None and local["spec"]["clusterQueue"] == "urgent"
    assert "status" not in check  # nobody answers it yet: Kueue would stop ``urgent``

    assert keep_check_active(cluster.backend) is True
    check = cluster.get_object(KUEUE, "admissionchecks", CHECK_NAME)
    assert check is not None
    [active] = check["status"]["conditions"]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Active")
    assert active["observedGeneration"] == check["metadata"]["generation"]
    [entry] = [e for e in check["metadata"]["managedFields"] if e.get("subresource") == "status"]
    assert (entry["manager"], entry["operation"]) == ("berth", "Apply")
    assert list(entry["fieldsV1"]["f:status"]["f:conditions"]) == ['k:{"type":"Active"}']

    writes = cluster.writes()
    assert keep_check_active(cluster.backend) is False  # Active already: no write
    assert cluster.writes() == writes
    assert reconcile(cluster.backend).write_calls == 0  # status is not reconcile's business


# --- decisions reaching the Workload -----------------------------------------------------------


def test_an_approval_is_applied_as_berths_own_check_entry_and_kueue_admits(
    cluster: Cluster, org: Org, people: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    name = submit_urgent(org, django_capture_on_commit_callbacks, cluster)
    provisioned = cluster.kueue.provision(name)
    request = raised(cluster)
    assert request.requester == people["alice"] and request.job == JobRequest.objects.get()
    assert request.justification.startswith("release 2026.12 blocker")
    assert actions(request) == [ApprovalAction.REQUESTED, ApprovalAction.NOTIFIED]
    assert drive_approvals(cluster.backend)["raised"] == 0  # a second pass raises nothing
    assert cluster.kueue.checks(name)[CHECK_NAME]["state"] == "Pending"

    with django_capture_on_commit_callbacks(execute=True):  # the apply task runs after commit
        decide(people["carol"], request.pk, approve=True, comment="ship it")
    checks = cluster.kueue.checks(name)
    mine = checks[CHECK_NAME]
    assert mine["state"] == "Ready"
    assert mine["message"] == f"Approved by carol (approval #{request.pk}): ship it"
    assert mine["lastTransitionTime"].endswith("Z")
    decided_at = datetime.fromisoformat(mine["lastTransitionTime"])
    assert abs(decided_at - timezone.now()) < timedelta(minutes=1)
    assert checks[PROVISION] == provisioned  # the other controller's entry, untouched
    workload = cluster.kueue.workload(name)
    assert [c["name"] for c in workload["status"]["admissionChecks"]] == [CHECK_NAME, PROVISION]
    assert workload["status"]["admission"]["clusterQueue"] == "urgent"
    assert berth_status_fields(workload) == {
        "f:status": {"f:admissionChecks": {BERTH_ENTRY: ENTRY_FIELDS}}
    }
    [theirs] = [e for e in workload["metadata"]["managedFields"] if e["manager"] == PROVISIONER]
    assert (theirs["operation"], theirs["subresource"]) == ("Apply", "status")
    assert list(theirs["fieldsV1"]["f:status"]["f:admissionChecks"]) == [PROVISION_ENTRY]
    [patch] = cluster.status_patches(name)  # one write: server-side apply, forced
    assert "fieldManager=berth" in patch and "force=true" in patch
    request.refresh_from_db()
    assert request.applied_at is not None and request.apply_attempts == 0
    assert actions(request)[-2:] == [ApprovalAction.APPROVED, ApprovalAction.APPLIED]

    cluster.kueue.admit(name)
    sync_workloads(cluster.backend)
    record = WorkloadRecord.objects.get()
    assert record.state == WorkloadState.ADMITTED
    assert record.admission_checks[CHECK_NAME]["state"] == "Ready"
    outcome = drive_approvals(cluster.backend)
    assert (outcome["raised"], outcome["applied"], outcome["apply_failed"]) == (0, 0, 0)
    assert ApprovalRequest.objects.count() == 1
    assert len(cluster.status_patches(name)) == 1  # nothing written again


def test_a_rejection_is_applied_as_rejected_with_the_reason(
    cluster: Cluster, org: Org, people: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    name = submit_urgent(org, django_capture_on_commit_callbacks, cluster)
    request = raised(cluster)
    with django_capture_on_commit_callbacks(execute=True):
        decide(people["carol"], request.pk, approve=False, comment="not a release blocker")
    checks = cluster.kueue.checks(name)
    assert checks[CHECK_NAME]["state"] == "Rejected"
    assert checks[CHECK_NAME]["message"] == (
        f"Rejected by carol (approval #{request.pk}): not a release blocker"
    )
    assert checks[PROVISION]["state"] == "Pending"  # still Kueue's, as Kueue wrote it
    request.refresh_from_db()
    assert (request.state, request.applied_at is not None) == (ApprovalState.REJECTED, True)
    sync_workloads(cluster.backend)
    assert WorkloadRecord.objects.get().admission_checks[CHECK_NAME]["state"] == "Rejected"
    assert drive_approvals(cluster.backend)["raised"] == 0  # Rejected is no new Pending

    cluster.kueue.deactivate(name)
    sync_workloads(cluster.backend)
    follow_jobs(cluster.backend)
    record = WorkloadRecord.objects.get()
    assert record.state == WorkloadState.DEACTIVATED
    job = JobRequest.objects.get(pk=request.job_id)
    assert job.state == JobState.REJECTED and job.reason == "DeactivatedDueToAdmissionCheck"


# --- a lost task, a failed write ---------------------------------------------------------------


def test_a_decision_whose_apply_task_was_lost_is_applied_by_the_next_pass(
    cluster: Cluster, org: Org, people: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    name = submit_urgent(org, django_capture_on_commit_callbacks, cluster)
    request = raised(cluster)
    # The worker dies between the decision's commit and the patch: the apply task that
    # on_commit would queue never runs.
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        decide(people["carol"], request.pk, approve=True)
    assert len(callbacks) == 1  # the apply task, dropped
    assert cluster.kueue.checks(name)[CHECK_NAME]["state"] == "Pending"
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED and request.applied_at is None

    outcome = drive_approvals(cluster.backend)
    assert (outcome["raised"], outcome["applied"], outcome["apply_failed"]) == (0, 1, 0)
    mine = cluster.kueue.checks(name)[CHECK_NAME]
    assert (mine["state"], mine["message"]) == (
        "Ready",
        f"Approved by carol (approval #{request.pk})",
    )
    request.refresh_from_db()
    assert request.applied_at is not None
    # before sync sees Ready, the next pass finds the same Pending: nothing raised or written
    again = drive_approvals(cluster.backend)
    assert (again["raised"], again["reapproved"], again["applied"]) == (0, 0, 0)
    assert ApprovalRequest.objects.count() == 1
    assert len(cluster.status_patches(name)) == 1


def test_a_status_write_the_api_server_fails_is_audited_and_retried_by_the_next_pass(
    double: Cluster,
    org: Org,
    people: dict[str, Any],
    django_capture_on_commit_callbacks: Any,
) -> None:
    cluster = double
    name = submit_urgent(org, django_capture_on_commit_callbacks, cluster)
    request = raised(cluster)
    with django_capture_on_commit_callbacks(execute=False):
        decide(people["erin"], request.pk, approve=True, comment="global approver")
    assert cluster.faults is not None
    cluster.faults.fail_next("PATCH", rf"/workloads/{name}/status$", 500)

    outcome = drive_approvals(cluster.backend)
    assert (outcome["applied"], outcome["apply_failed"]) == (0, 1)
    assert cluster.kueue.checks(name)[CHECK_NAME]["state"] == "Pending"
    request.refresh_from_db()
    assert request.applied_at is None and request.apply_attempts == 1
    [failed] = request.events.filter(action=ApprovalAction.APPLY_FAILED)
    assert "500" in failed.message and "injected failure" in failed.message

    outcome = drive_approvals(cluster.backend)
    assert (outcome["applied"], outcome["apply_failed"]) == (1, 0)
    mine = cluster.kueue.checks(name)[CHECK_NAME]
    assert mine["state"] == "Ready"
    assert mine["message"] == f"Approved by erin (approval #{request.pk}): global approver"
    request.refresh_from_db()
    assert request.applied_at is not None
    assert actions(request)[-3:] == [
        ApprovalAction.APPROVED,
        ApprovalAction.APPLY_FAILED,
        ApprovalAction.APPLIED,
    ]
    assert len(cluster.status_patches(name)) == 2  # the failed one and the retry
