"""Topologies reconciled like every other kind, on both backends (the real
kube-apiserver runs Berth as its ServiceAccount, with the Topology CRD's
schema and CEL rules): created before the flavors that name them, left alone
when in sync, put back when deleted by hand, pruned only after those flavors,
and replaced (deleted, then created) when the levels Kueue fixes differ."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from queues import services
from queues.backends.base import BackendError, ClusterBackend, ResourceType
from queues.models import ClusterQueue, DriftRecord, ReconcileRun, ResourceFlavor, Topology
from queues.reconcile import desired_objects, reconcile
from tests.envtest.cluster import EnvtestCluster
from tests.envtest.controlplane import BERTH_USER
from tests.factories import RACK_LEVELS, cluster_queue, flavor, gpu_groups, topology
from tests.reconcile.clusters import ClusterUnderTest

HOST = "kubernetes.io/hostname"


class Recorder:
    """Berth's backend, noting the order of its writes: (verb, kind, name)."""

    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend
        self.writes: list[tuple[str, str, str]] = []

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.backend, attribute)

    def apply(
        self, obj: Mapping[str, Any], *, force: bool, dry_run: bool = False
    ) -> dict[str, Any]:
        if not dry_run:
            self.writes.append(("apply", obj["kind"], obj["metadata"]["name"]))
        return self.backend.apply(obj, force=force, dry_run=dry_run)

    def delete(self, rtype: ResourceType, name: str, namespace: str | None = None) -> None:
        self.writes.append(("delete", rtype.kind, name))
        self.backend.delete(rtype, name, namespace)


@pytest.fixture
def racked(db: Any) -> None:
    """A topology, the flavor that names it and a queue with quota in that flavor."""
    topology("gpu-racks")
    flavor("h100", node_labels={"gpu": "h100"}, topology_name="gpu-racks")
    cluster_queue("research", resource_groups=gpu_groups("h100", "8"))


def levels_of(cluster: ClusterUnderTest, name: str) -> list[str]:
    [found] = [t for t in cluster.objects("Topology") if t["metadata"]["name"] == name]
    return [level["nodeLabel"] for level in found["spec"]["levels"]]


def test_a_topology_is_created_before_the_flavor_that_names_it(
    cluster: ClusterUnderTest, racked: None
) -> None:
    recorder = Recorder(cluster.backend)
    run = reconcile(recorder)  # type: ignore[arg-type]
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    assert levels_of(cluster, "gpu-racks") == RACK_LEVELS
    [h100] = cluster.objects("ResourceFlavor")
    assert h100["spec"]["topologyName"] == "gpu-racks"
    order = [(kind, name) for _, kind, name in recorder.writes]
    assert order.index(("Topology", "gpu-racks")) < order.index(("ResourceFlavor", "h100"))
    [made] = cluster.objects("Topology")
    assert made["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "berth"

    again = reconcile(cluster.backend)
    assert (again.status, again.write_calls) == (ReconcileRun.Status.SUCCEEDED, 0)


def test_a_topology_deleted_by_hand_is_put_back(cluster: ClusterUnderTest, racked: None) -> None:
    reconcile(cluster.backend)
    cluster.remove("Topology", "gpu-racks")
    run = reconcile(cluster.backend)
    assert (run.status, run.created, run.write_calls) == (ReconcileRun.Status.SUCCEEDED, 1, 1)
    assert levels_of(cluster, "gpu-racks") == RACK_LEVELS


def test_pruning_deletes_the_flavor_before_its_topology(
    cluster: ClusterUnderTest, racked: None
) -> None:
    reconcile(cluster.backend)
    services.cluster_queues.delete(actor=None, obj=ClusterQueue.objects.get(name="research"))
    services.resource_flavors.delete(actor=None, obj=ResourceFlavor.objects.get(name="h100"))
    services.topologies.delete(actor=None, obj=Topology.objects.get(name="gpu-racks"))
    topology("hosts", levels=[HOST])  # something is left, so the policy is not empty
    recorder = Recorder(cluster.backend)
    run = reconcile(recorder)  # type: ignore[arg-type]
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    deletes = [(kind, name) for verb, kind, name in recorder.writes if verb == "delete"]
    assert deletes.index(("ResourceFlavor", "h100")) < deletes.index(("Topology", "gpu-racks"))
    assert {t["metadata"]["name"] for t in cluster.objects("Topology")} == {"hosts"}
    assert cluster.objects("ResourceFlavor") == []


def remake_with_other_levels() -> None:
    """Deleted and made again under the same name before a reconcile ran: the
    one way the levels Berth holds can differ from the cluster's."""
    services.topologies.delete(actor=None, obj=Topology.objects.get(name="gpu-racks"))
    topology("gpu-racks", levels=["topology.berth.dev/rack", HOST])


def test_other_levels_under_the_same_name_replace_the_topology(
    cluster: ClusterUnderTest, db: Any
) -> None:
    topology("gpu-racks")
    reconcile(cluster.backend)
    remake_with_other_levels()
    [new_body] = [o for o in desired_objects() if o["kind"] == "Topology"]
    if isinstance(cluster, EnvtestCluster):
        # The API server refuses to change them in place (the CRD's self == oldSelf).
        with pytest.raises(BackendError) as refused:
            cluster.backend.apply(new_body, force=True)
        assert refused.value.status == 422 and "immutable" in str(refused.value)

    plan = reconcile(cluster.backend, trigger=ReconcileRun.Trigger.PLAN, dry_run=True)
    assert (plan.status, plan.errors) == (ReconcileRun.Status.SUCCEEDED, [])
    [change] = plan.changes
    assert (change["action"], change["kind"]) == ("update", "Topology")
    assert "deleted and created again" in change["note"]

    recorder = Recorder(cluster.backend)
    run = reconcile(recorder)  # type: ignore[arg-type]
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    assert (run.updated, run.write_calls) == (1, 2)
    assert recorder.writes == [
        ("delete", "Topology", "gpu-racks"),
        ("apply", "Topology", "gpu-racks"),
    ]
    assert levels_of(cluster, "gpu-racks") == ["topology.berth.dev/rack", HOST]
    assert reconcile(cluster.backend).write_calls == 0


def test_levels_edited_by_hand_are_refused_or_repaired(cluster: ClusterUnderTest, db: Any) -> None:
    """A real API server refuses the edit (the CRD makes levels immutable); the
    simulated cluster has no CEL, takes it, and reconcile repairs it as drift."""
    topology("gpu-racks")
    reconcile(cluster.backend)

    def flatten(obj: dict[str, Any]) -> None:
        obj["spec"]["levels"] = [{"nodeLabel": HOST}]

    if isinstance(cluster, EnvtestCluster):
        with pytest.raises(Exception, match="immutable"):
            cluster.edit("Topology", "gpu-racks", flatten)
        assert reconcile(cluster.backend).write_calls == 0
        return
    cluster.edit("Topology", "gpu-racks", flatten)
    run = reconcile(cluster.backend)
    assert (run.status, run.updated, run.drifted) == (ReconcileRun.Status.SUCCEEDED, 1, 1)
    drift = DriftRecord.objects.get()
    assert (drift.kind, drift.fields) == ("Topology", ["spec.levels"])
    assert levels_of(cluster, "gpu-racks") == RACK_LEVELS


def test_berths_service_account_reconciles_topologies_with_the_shipped_role(
    kube: EnvtestCluster, racked: None, settings: Any
) -> None:
    """As deploy/base/rbac.yaml's ServiceAccount: list, create (a server-side
    apply answered 201), replace (delete, create) and prune Topologies; the
    ``kube`` fixture fails the test on any 403."""
    settings.BERTH_RECONCILE_ON_CHANGE = False
    since = kube.plane.audit.offset()
    assert reconcile(kube.backend).status == ReconcileRun.Status.SUCCEEDED
    services.cluster_queues.delete(actor=None, obj=ClusterQueue.objects.get(name="research"))
    services.resource_flavors.delete(actor=None, obj=ResourceFlavor.objects.get(name="h100"))
    remake_with_other_levels()
    topology("hosts", levels=[HOST])
    replaced = reconcile(kube.backend)
    assert (replaced.status, replaced.updated) == (ReconcileRun.Status.SUCCEEDED, 1)
    services.topologies.delete(actor=None, obj=Topology.objects.get(name="gpu-racks"))
    pruned = reconcile(kube.backend)
    assert (pruned.status, pruned.deleted) == (ReconcileRun.Status.SUCCEEDED, 1)
    used = {
        (event["verb"], event["responseStatus"]["code"])
        for event in kube.plane.audit.events(since, user=BERTH_USER)
        if event.get("objectRef", {}).get("resource") == "topologies"
    }
    assert {("list", 200), ("patch", 201), ("delete", 200)} <= used
    assert not {code for _, code in used if code == 403}
