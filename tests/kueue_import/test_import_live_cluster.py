"""Adopting a Kueue installation Berth did not make, on the real API server:
the hand-written installation (tests/kueue_import/installation.yaml, 26
objects and one more left out on purpose) is applied by "GitOps" (server-side
apply as ``argocd-controller``); ``manage.py import_kueue`` plans without
storing or writing anything, then ``--apply`` stores the policy with its
history and takes the objects over, after which a reconcile writes nothing,
the GitOps tool can apply its files again without a conflict, and nothing
Berth did not import is ever touched."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from kubernetes.client.rest import ApiException

from queues.backends import get_backend
from queues.backends.base import FIELD_MANAGER, TYPES
from queues.models import (
    AdoptedObject,
    ClusterQueue,
    Cohort,
    KueueReading,
    LocalQueue,
    PolicyChange,
    ReconcileRun,
    ResourceFlavor,
    Team,
)
from queues.reconcile import reconcile
from tests.envtest.cluster import APPLY, EnvtestCluster, _rtype_path
from tests.envtest.controlplane import ControlPlane

pytestmark = pytest.mark.django_db

INSTALLATION = Path(__file__).with_name("installation.yaml")
GITOPS = "argocd-controller"
# Not imported (--skip): a queue the platform team keeps to itself.
CANARY = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "platform-canary"},
    "spec": {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [
                    {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 1}]}
                ],
            }
        ],
    },
}
OPTIONS = ("--team-label", "org.example/team", "--skip", "ClusterQueue/platform-canary")


def manifests() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(INSTALLATION.read_text()) if doc] + [CANARY]


def gitops_apply(
    kube: EnvtestCluster, *, force: bool, without: tuple[str, ...] = ()
) -> dict[str, str]:
    """What a GitOps tool does: server-side apply of every file, as itself,
    leaving out the spec fields ``without``. Returns the refusals, by object."""
    refused = {}
    for obj in manifests():
        obj = {**obj, "spec": {k: v for k, v in obj.get("spec", {}).items() if k not in without}}
        if not obj["spec"]:
            del obj["spec"]
        name = obj["metadata"]["name"]
        path = _rtype_path(TYPES[obj["kind"]], name, obj["metadata"].get("namespace"))
        query = [("fieldManager", GITOPS)] + ([("force", "true")] if force else [])
        try:
            kube.call("PATCH", path, obj, content_type=APPLY, query=query)
        except ApiException as exc:
            refused[f"{obj['kind']} {name}"] = str(exc.body)
    return refused


@pytest.fixture
def installed(
    kube: EnvtestCluster,
    control_plane: ControlPlane,
    tmp_path: Path,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[EnvtestCluster]:
    """The installation on the API server; Berth configured for it as its
    ServiceAccount (BERTH_CLUSTER=kubernetes, ~/.kube/config)."""
    gitops_apply(kube, force=True)
    (tmp_path / ".kube").mkdir()
    shutil.copy(control_plane.berth_kubeconfig, tmp_path / ".kube" / "config")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    settings.BERTH_CLUSTER = "kubernetes"
    settings.BERTH_KUBE_CONTEXT = ""
    settings.BERTH_RECONCILE_ON_CHANGE = False
    get_backend.cache_clear()
    try:
        yield kube
    finally:
        get_backend.cache_clear()
        kubernetes.client.Configuration.set_default(None)


def run_import(*args: str) -> str:
    out = StringIO()
    call_command("import_kueue", *OPTIONS, *args, stdout=out)
    return out.getvalue()


def managers(obj: dict[str, Any]) -> set[str]:
    return {entry["manager"] for entry in obj["metadata"].get("managedFields", [])}


def test_the_plan_names_every_dropped_field_and_stores_and_writes_nothing(
    installed: EnvtestCluster,
) -> None:
    before, history = installed.writes(), PolicyChange.objects.count()
    plan = run_import()
    assert installed.writes() == before  # read only
    assert not Team.objects.exists() and not ClusterQueue.objects.exists()
    assert PolicyChange.objects.count() == history and not AdoptedObject.objects.exists()
    # Every field Berth cannot represent, with its object.
    assert (
        "ClusterQueue nlp-eval-batch: spec.admissionChecksStrategy.admissionChecks[0] = "
        "{'name': 'capacity-check', 'onFlavors': ['h100-spot']}" in plan
    )
    assert "LocalQueue nlp/nlp-eval-batch: spec.fairSharing = {'weight': 3}" in plan
    assert "Berth cannot represent (2)" in plan
    # What it leaves alone, and the guesses to confirm.
    assert "AdmissionCheck capacity-check: controller kueue.x-k8s.io/provisioning-request" in plan
    assert "ClusterQueue platform-canary: left out (--skip)" in plan
    assert "vision-urgent: urgent-release — its name has 'urgent'" in plan
    assert "shared-preemptible: (none)" in plan
    # Berth's model implies one LocalQueue the installation lacks.
    assert "create LocalQueue research-b/research-interactive" in plan
    # The one field whose value Berth changes, and who owned it.
    assert "takes over spec.namespaceSelector (owned by argocd-controller)" in plan
    assert plan.count("takes over ") == 5  # the five queues' selectors, nothing else
    assert "Nothing was stored" in plan


def test_apply_stores_with_history_takes_over_and_reconcile_then_writes_nothing(
    installed: EnvtestCluster,
) -> None:
    get_user_model().objects.create_user("alice", password="x", is_staff=True)
    history = PolicyChange.objects.count()
    out = run_import("--apply", "--as", "alice", "--cluster-name", "prod-a")
    assert "Takeover: " in out and "A reconcile now: 0 change(s) planned." in out, out

    # The policy, as the cluster had it.
    assert sorted(Team.objects.values_list("slug", flat=True)) == ["nlp", "research", "vision"]
    assert Cohort.objects.get(name="research-pool").parent.name == "org"
    assert str(Cohort.objects.get(name="applied-pool").fair_sharing_weight.normalize()) == "0.5"
    training = ClusterQueue.objects.get(name="research-training")
    assert (training.team.slug, training.queue_class.name, training.queueing_strategy) == (
        "research",
        "training-large",
        "StrictFIFO",
    )
    gpu = training.quotas.get(flavor__name="h100-ondemand", resource="nvidia.com/gpu")
    assert (gpu.nominal_quota, gpu.borrowing_limit) == (32, 16)
    assert ResourceFlavor.objects.get(name="h100-spot").capacity_type == "spot"
    assert LocalQueue.objects.get(namespace__name="vision", name="hotfix").generated is False
    # History says where it came from, and who.
    imported = PolicyChange.objects.order_by("pk")[history:]
    assert {c.note for c in imported} == {"imported from cluster prod-a by alice"}
    assert {c.actor_username for c in imported} == {"alice"}
    assert len(imported) >= 26

    # Taken over: Berth's label, Berth among the managers, GitOps still one of them
    # (the values were the same: shared, not taken).
    queue = installed.get("ClusterQueue", "research-training")
    assert queue is not None
    assert queue["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "berth"
    assert {FIELD_MANAGER, GITOPS} <= managers(queue)
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] == 32

    # A reconcile afterwards writes nothing.
    backend = get_backend()
    writes = installed.writes()
    run = reconcile(backend)
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    assert (run.created, run.updated, run.deleted, run.drained, run.write_calls) == (0, 0, 0, 0, 0)
    assert installed.writes() == writes

    # GitOps applies its files again, without force: refused only where the plan
    # said Berth takes a field over (the selectors); everything else Berth shares.
    refused = gitops_apply(installed, force=False)
    assert sorted(refused) == [
        "ClusterQueue nlp-eval-batch",
        "ClusterQueue research-interactive",
        "ClusterQueue research-training",
        "ClusterQueue shared-preemptible",
        "ClusterQueue vision-urgent",
    ]
    assert all(".spec.namespaceSelector" in body for body in refused.values()), refused
    # Once GitOps stops managing the selectors, its files apply with no conflict,
    # and Berth still has nothing to do: no fight.
    assert gitops_apply(installed, force=False, without=("namespaceSelector",)) == {}
    again = reconcile(backend)
    assert (again.updated, again.created, again.write_calls) == (0, 0, 0), again.changes

    # Never touched: what Berth did not import.
    for kind, name in (("ClusterQueue", "platform-canary"), ("AdmissionCheck", "capacity-check")):
        obj = installed.get(kind, name)
        assert obj is not None, name
        assert "app.kubernetes.io/managed-by" not in obj["metadata"].get("labels", {})
        assert FIELD_MANAGER not in managers(obj), name


def test_an_import_that_breaks_a_rule_stores_nothing(installed: EnvtestCluster) -> None:
    """A queue class that does not exist: named (and the LocalQueue that names
    the queue it refused), and nothing stored or written."""
    before, history = installed.writes(), PolicyChange.objects.count()
    out = StringIO()
    with pytest.raises(CommandError, match="2 object"):
        call_command(
            "import_kueue", *OPTIONS, "--apply", "--class", "nlp-eval-batch=gold", stdout=out
        )
    said = out.getvalue()
    assert "ClusterQueue nlp-eval-batch: queue_class: there is no queue class named 'gold'" in said
    assert "LocalQueue nlp/nlp-eval-batch: cluster_queue: there is no cluster queue" in said
    assert "nothing is stored until fixed" in said
    assert not Team.objects.exists() and not AdoptedObject.objects.exists()
    assert PolicyChange.objects.count() == history
    assert installed.writes() == before


def test_the_page_reads_the_cluster_through_a_worker_and_imports_from_the_reading(
    installed: EnvtestCluster, settings: Any
) -> None:
    """Policy → Import from Kueue → Read the cluster: the reading (a task, run
    in-process here as in embedded mode) holds the objects as the cluster has
    them, so the plan names the manager whose field Berth takes; Import stores
    with the cluster named in the history."""
    settings.CELERY_TASK_ALWAYS_EAGER = True
    admin = get_user_model().objects.create_user("root", password="x", is_superuser=True)
    client = Client()
    client.force_login(admin)
    before = installed.writes()
    asked = client.post("/policy/import/", {"action": "read"})
    assert asked.status_code == 302
    reading = KueueReading.objects.get()
    assert asked["Location"] == f"/policy/import/?reading={reading.pk}"
    assert reading.finished_at is not None and reading.error == ""
    assert len(reading.objects_read) >= 27 and reading.cluster == "kubernetes"
    shown = client.get(asked["Location"]).content.decode()
    assert f"Read {len(reading.objects_read)} objects from the kubernetes cluster" in shown

    form = {"reading": reading.pk, "team_label": "org.example/team",
            "skip": "ClusterQueue/platform-canary"}  # fmt: skip
    plan = client.post("/policy/import/", {**form, "action": "plan"}).content.decode()
    assert "takes over spec.namespaceSelector (owned by argocd-controller)" in plan
    assert not ClusterQueue.objects.exists() and installed.writes() == before

    done = client.post("/policy/import/", {**form, "action": "apply"}).content.decode()
    assert "imported from cluster kubernetes by root" in done
    assert ClusterQueue.objects.count() == 5
    assert installed.writes() == before  # the takeover is the next reconcile's
    run = reconcile(get_backend())
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    assert reconcile(get_backend()).write_calls == 0
