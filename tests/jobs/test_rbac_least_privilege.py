"""Berth's role (deploy/base/rbac.yaml) is exactly what Berth needs, proven on a
real kube-apiserver with RBAC on and an audit log:

- everything Berth does — reconcile with a conflict and a prune, four job kinds
  submitted and cancelled through the API, sync, the watch, the approval
  check — runs as its ServiceAccount with no request refused, and every verb
  of every rule in the role is used by it at least once (none is spare);
- what Berth has no business doing is refused: reading Secrets, deleting
  namespaces, touching pods, deployments, RBAC, nodes or Kueue objects it does
  not manage.

An API server-side-apply that creates an object is a ``patch`` in the audit log
answered 201, and RBAC checks ``create`` for it: it counts as both."""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from django.utils import timezone
from kubernetes import client
from kubernetes.client.rest import ApiException

from approvals.controller import drive_approvals
from approvals.decide import decide
from approvals.models import ApprovalRequest
from approvals.status import CHECK_NAME, rfc3339
from cluster.sync import sync_workloads, watch_workloads
from cluster.tasks import sync_cluster
from jobs.models import JobRequest, JobState
from queues import services
from queues.backends import get_backend
from queues.backends.base import ClusterBackend
from queues.backends.kubernetes import KubernetesBackend
from queues.models import ClusterQueue, ReconcileRun
from queues.reconcile import reconcile
from tests.approvals.approval_support import approvers
from tests.envtest.cluster import PROBE_AGENT, EnvtestCluster
from tests.envtest.controlplane import BERTH_USER, RBAC_FILE, ControlPlane
from tests.jobs.conftest import Org, gpus, job

KUEUE, V = "kueue.x-k8s.io", "v1beta2"
Triple = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


def granted() -> dict[int, set[Triple]]:
    """The ClusterRole's rules, each as the set of what it allows."""
    [role] = [d for d in yaml.safe_load_all(RBAC_FILE.read_text()) if d["kind"] == "ClusterRole"]
    return {
        index: {
            (group, resource, verb)
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }
        for index, rule in enumerate(role["rules"])
    }


def used(events: list[dict[str, Any]]) -> set[Triple]:
    """What the audited requests needed, as RBAC checks it."""
    found: set[Triple] = set()
    for event in events:
        ref = event.get("objectRef")
        if not ref:
            continue  # discovery (/apis): every authenticated user may read it
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        group = ref.get("apiGroup", "")
        found.add((group, resource, event["verb"]))
        if event["verb"] == "patch" and event["responseStatus"]["code"] == 201:
            found.add((group, resource, "create"))  # server-side apply made it
    return found


# --------------------------------------------------------------------- refusals


def probe(plane: ControlPlane) -> client.ApiClient:
    api = plane.berth_client()
    api.user_agent = PROBE_AGENT  # refusals this test asks for, not Berth's own
    return api


def refused(call: Callable[[], Any]) -> int:
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200


def test_berth_cannot_read_secrets_delete_namespaces_or_touch_what_is_not_its_own(
    kube: EnvtestCluster,
) -> None:
    kube.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "research"}})
    kube.call(
        "POST",
        "/api/v1/namespaces/research/secrets",
        {"metadata": {"name": "registry-login"}, "stringData": {"password": "hunter2"}},
    )
    kube.add_foreign(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1"}, "status": {}}
    )
    with probe(kube.plane) as api:
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        custom, rbac = client.CustomObjectsApi(api), client.RbacAuthorizationV1Api(api)
        pod = {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "x", "image": "x"}]}}
        attempts = {
            "read a Secret": lambda: core.read_namespaced_secret("registry-login", "research"),
            "list Secrets": lambda: core.list_secret_for_all_namespaces(),
            "delete a namespace": lambda: core.delete_namespace("research"),
            "create a pod": lambda: core.create_namespaced_pod("research", pod),
            "list pods": lambda: core.list_pod_for_all_namespaces(),
            "exec into nothing / create a ConfigMap": lambda: core.create_namespaced_config_map(
                "research", {"metadata": {"name": "x"}}
            ),
            "create a Deployment": lambda: apps.create_namespaced_deployment(
                "research",
                {
                    "metadata": {"name": "x"},
                    "spec": {
                        "selector": {"matchLabels": {"app": "x"}},
                        "template": {"metadata": {"labels": {"app": "x"}}, "spec": pod["spec"]},
                    },
                },
            ),
            "label a node": lambda: core.patch_node(
                "gpu-node-1", {"metadata": {"labels": {"gpu": "mine"}}}
            ),
            "delete a Workload": lambda: custom.delete_namespaced_custom_object(
                KUEUE, V, "research", "workloads", "x"
            ),
            "change a Workload's spec": lambda: custom.patch_namespaced_custom_object(
                KUEUE, V, "research", "workloads", "x", {"spec": {"active": False}}
            ),
            "create a Workload (Kueue makes them)": lambda: custom.create_namespaced_custom_object(
                KUEUE, V, "research", "workloads", {"metadata": {"name": "x"}}
            ),
            "watch Topologies (reconcile only lists them)": lambda: (
                custom.list_cluster_custom_object(
                    KUEUE, V, "topologies", watch=True, timeout_seconds=1
                )
            ),
            "replace a ClusterQueue (PUT)": lambda: custom.replace_cluster_custom_object(
                KUEUE, V, "clusterqueues", "x", {"metadata": {"name": "x"}}
            ),
            "grant itself more (ClusterRoleBinding)": lambda: rbac.create_cluster_role_binding(
                {
                    "metadata": {"name": "berth-more"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "berth", "namespace": "berth"}],
                }
            ),
            "read its own token's Secret kind at all": lambda: core.list_namespaced_secret("berth"),
        }
        answers = {what: refused(attempt) for what, attempt in attempts.items()}
    assert answers == dict.fromkeys(attempts, 403)


# ------------------------------------------------------------- the whole of Berth


@pytest.fixture
def berth(
    org: Org,
    kube: EnvtestCluster,
    control_plane: ControlPlane,
    tmp_path: Path,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[KubernetesBackend]:
    """BERTH_CLUSTER=kubernetes from a kubeconfig of Berth's ServiceAccount, so the
    tasks the API runs after commit reach the server as in production."""
    (tmp_path / ".kube").mkdir()
    shutil.copy(control_plane.berth_kubeconfig, tmp_path / ".kube" / "config")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    settings.BERTH_CLUSTER, settings.BERTH_KUBE_CONTEXT = "kubernetes", ""
    get_backend.cache_clear()
    try:
        backend = get_backend()
        assert isinstance(backend, KubernetesBackend)
        yield backend
    finally:
        get_backend.cache_clear()
        kubernetes.client.Configuration.set_default(None)


class RacedBy:
    """Berth's backend, with someone else writing an object between Berth's plan
    and Berth's update of it (so the update's resourceVersion is stale)."""

    def __init__(self, backend: ClusterBackend, kind: str, name: str, edit: Any) -> None:
        self.backend, self.target, self.edit = backend, (kind, name), edit

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.backend, attribute)

    def apply(self, obj: dict[str, Any], *, force: bool, dry_run: bool = False) -> dict[str, Any]:
        if self.edit is not None and (obj["kind"], obj["metadata"]["name"]) == self.target:
            edit, self.edit = self.edit, None
            edit()
        return self.backend.apply(obj, force=force, dry_run=dry_run)


def annotate(obj: dict[str, Any]) -> None:
    obj["metadata"].setdefault("annotations", {})["touched-by"] = "someone"


def relabel(obj: dict[str, Any]) -> None:
    obj["metadata"]["labels"]["berth.dev/team"] = "nobody"


def play_kueue_for(kube: EnvtestCluster, owner: dict[str, Any]) -> str:
    """Kueue's job integration makes the Workload and reserves quota in ``urgent``,
    with Berth's check Pending."""
    meta = owner["metadata"]
    name = f"job-{meta['name']}-1a2b3"
    workload = {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "uid": meta["uid"]}
            ],
        },
        "spec": {
            "queueName": meta["labels"]["kueue.x-k8s.io/queue-name"],
            "podSets": [{"name": "main", "count": 1, "template": owner["spec"]["template"]}],
        },
    }
    kube.add_foreign(workload)
    now = rfc3339(timezone.now())
    kube.set_status(
        "Workload",
        name,
        {
            "admission": {
                "clusterQueue": "urgent",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": 1,
                        "flavors": {"nvidia.com/gpu": "h100"},
                        "resourceUsage": {"nvidia.com/gpu": "8"},
                    }
                ],
            },
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "Quota reserved in ClusterQueue urgent",
                    "lastTransitionTime": now,
                }
            ],
            "admissionChecks": [
                {"name": CHECK_NAME, "state": "Pending", "message": "", "lastTransitionTime": now}
            ],
        },
        namespace=meta["namespace"],
    )
    return name


def test_every_verb_of_the_role_is_used_and_nothing_more_is_needed(
    org: Org,
    kube: EnvtestCluster,
    berth: KubernetesBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    since = kube.plane.audit.offset()
    # serving's namespace exists already (Berth only labels it); research's is Berth's.
    kube.add_foreign({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serving"}})
    first = reconcile(berth)
    assert first.status == ReconcileRun.Status.SUCCEEDED, first.errors

    # Updates that race someone else's write: refused (409), re-read, made.
    services.cluster_queues.update(
        actor=None,
        obj=ClusterQueue.objects.get(name="research"),
        data={"resource_groups": gpus(("h100", "24"), borrowing_limit="8")},
    )
    edit = lambda: kube.edit("ClusterQueue", "research", annotate)  # noqa: E731
    raced = reconcile(RacedBy(berth, "ClusterQueue", "research", edit))  # type: ignore[arg-type]
    assert (raced.status, raced.retries) == (ReconcileRun.Status.SUCCEEDED, 1), raced.errors
    kube.edit("Namespace", "research", relabel)  # drift on a namespace Berth made
    edit = lambda: kube.edit("Namespace", "research", annotate)  # noqa: E731
    raced = reconcile(RacedBy(berth, "Namespace", "research", edit))  # type: ignore[arg-type]
    assert (raced.status, raced.retries) == (ReconcileRun.Status.SUCCEEDED, 1), raced.errors

    # A queue leaves the policy: it and its LocalQueue are pruned.
    services.cluster_queues.delete(actor=None, obj=ClusterQueue.objects.get(name="research-dev"))
    pruned = reconcile(berth)
    assert pruned.status == ReconcileRun.Status.SUCCEEDED and pruned.deleted == 2, pruned.changes

    # Four kinds submitted through the API (created after commit) and an urgent one.
    made = []
    for kind in ("Job", "JobSet", "PyTorchJob", "TrainJob"):
        with django_capture_on_commit_callbacks(execute=True):
            answer = org.alice.post(
                "/api/v1/jobs/", job(kind=kind, name=f"sft-{kind.lower()}"), format="json"
            )
        assert answer.status_code == 201, answer.content
        made.append(answer.json()["id"])
    with django_capture_on_commit_callbacks(execute=True):
        answer = org.alice.post(
            "/api/v1/jobs/",
            job(
                name="release-fix",
                queue="urgent-release",
                nodes=1,
                priority_class="train-high",
                justification="release blocker",
            ),
            format="json",
        )
    assert answer.status_code == 201, answer.content
    assert set(JobRequest.objects.values_list("state", flat=True)) == {JobState.QUEUED}

    # Kueue reserves quota for the urgent one; sync sees it; the approval controller
    # raises a request and keeps its check Active; carol's decision reaches the Workload.
    owner = kube.get("Job", "release-fix", "research")
    assert owner is not None
    workload = play_kueue_for(kube, owner)
    sync_cluster()
    assert drive_approvals(berth)["raised"] == 1
    with django_capture_on_commit_callbacks(execute=True):
        decide(approvers()["carol"], ApprovalRequest.objects.get().pk, approve=True)
    checks = kube.get("Workload", workload, "research")["status"]["admissionChecks"]  # type: ignore[index]
    assert [c["state"] for c in checks if c["name"] == CHECK_NAME] == ["Ready"]

    # The watch, then cancels through the API.
    sync_workloads(berth)
    watch_workloads(berth, timeout_seconds=1, rounds=1)
    for job_id in made:
        with django_capture_on_commit_callbacks(execute=True):
            assert org.alice.delete(f"/api/v1/jobs/{job_id}/").status_code == 202
    assert JobRequest.objects.filter(state=JobState.CANCELLED).count() == 4

    events = kube.plane.audit.events(since, user=BERTH_USER)
    refusals = [e["requestURI"] for e in events if e["responseStatus"]["code"] == 403]
    assert refusals == []
    needed = used(events)
    rules = granted()
    everything = set().union(*rules.values())
    assert needed - everything == set()  # nothing it used is missing from the role
    unused: dict[int, set[str]] = defaultdict(set)
    for index, rule in rules.items():
        for verb in {v for _, _, v in rule}:
            if not any(triple in needed for triple in rule if triple[2] == verb):
                unused[index].add(verb)
    assert dict(unused) == {}, "rules (by index) with verbs Berth never used"
