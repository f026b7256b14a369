"""Kueue's manager ConfigMap (kueue-system/kueue-manager-config) and reconcile.

On the simulated cluster reconcile writes it like any other object (the
embedded Kueue reads it): created once saved, unchanged runs write nothing, a
change is one update, a hand edit is drift. It is never pruned, on any
backend. On a real cluster (the real kube-apiserver with Berth as its
ServiceAccount, and the loopback double) Berth never reads, writes or deletes
it: the plan lists it as a ``manual`` step with the instructions, and the
manifests show it as comments."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from rest_framework.test import APIClient

from queues import services
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.kueue import manager_config
from queues.kueue.render import MANUAL_STEP
from queues.models import (
    ClusterQueue,
    Cohort,
    DriftRecord,
    KueueConfiguration,
    LocalQueue,
    QueueClass,
    ReconcileRun,
    ResourceFlavor,
    Team,
)
from queues.reconcile import reconcile
from tests.envtest.cluster import EnvtestCluster
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, team
from tests.reconcile.clusters import ClusterUnderTest, SimulatedCluster
from tests.reconcile.kube_cluster import KubeCluster

NAME, NAMESPACE, KEY = manager_config.NAME, manager_config.NAMESPACE, manager_config.KEY
SETTINGS: dict[str, Any] = {
    "fairSharing": {"enable": True},
    "waitForPodsReady": {"timeout": "10m", "requeuingStrategy": {"backoffLimitCount": 3}},
}
# What a real cluster's Kueue install holds: many settings Berth does not own.
KUEUES_OWN = (
    "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
    "health:\n  healthProbeBindAddress: :8081\nintegrations:\n  frameworks:\n  - batch/job\n"
)


@pytest.fixture
def policy(db: Any) -> None:
    flavor("h100")
    cohort("org")
    team("research")
    cluster_queue(
        "research", team="research", cohort="org", resource_groups=gpu_groups("h100", "8")
    )


def configure(settings: dict[str, Any] = SETTINGS) -> None:
    services.kueue_configuration.update(actor=None, data=settings)


def configuration_on(backend: SimulatedBackend) -> Any:
    config_map = backend.get(TYPES["ConfigMap"], NAME, NAMESPACE)
    assert config_map is not None
    return yaml.safe_load(config_map["data"][KEY])


# --------------------------------------------------------------------------- simulated


@pytest.fixture
def simulated(settings: Any, policy: None) -> SimulatedCluster:
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    settings.BERTH_RECONCILE_ON_CHANGE = False
    return SimulatedCluster()


def test_nothing_is_written_for_kueue_until_a_configuration_is_saved(
    simulated: SimulatedCluster,
) -> None:
    run = reconcile(simulated.backend)
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    assert simulated.backend.get(TYPES["ConfigMap"], NAME, NAMESPACE) is None


def test_the_simulated_cluster_gets_the_configmap_like_any_object(
    simulated: SimulatedCluster,
) -> None:
    reconcile(simulated.backend)
    configure()
    run = reconcile(simulated.backend)
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    assert [(c["action"], c["kind"], c["namespace"], c["name"]) for c in run.changes] == [
        ("create", "ConfigMap", NAMESPACE, NAME)
    ]
    document = configuration_on(simulated.backend)
    assert document["kind"] == "Configuration"
    assert document["fairSharing"]["enable"] is True
    assert document["waitForPodsReady"]["timeout"] == "10m"
    assert document["waitForPodsReady"]["requeuingStrategy"]["backoffLimitCount"] == 3

    writes = simulated.writes()
    again = reconcile(simulated.backend)
    assert (again.write_calls, simulated.writes()) == (0, writes)

    configure({**SETTINGS, "waitForPodsReady": {"timeout": "20m"}})
    changed = reconcile(simulated.backend)
    assert (changed.updated, changed.write_calls) == (1, 1)
    assert configuration_on(simulated.backend)["waitForPodsReady"]["timeout"] == "20m"


def test_a_hand_edit_of_the_simulated_configmap_is_drift_and_repaired(
    simulated: SimulatedCluster,
) -> None:
    configure()
    reconcile(simulated.backend)

    def tamper(obj: dict[str, Any]) -> None:
        obj["data"][KEY] = "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"

    simulated.edit("ConfigMap", NAME, tamper, namespace=NAMESPACE)
    run = reconcile(simulated.backend)
    assert (run.updated, run.drifted) == (1, 1)
    assert DriftRecord.objects.get().fields == [f"data.{KEY}"]
    assert configuration_on(simulated.backend)["fairSharing"]["enable"] is True


def test_the_configmap_is_never_pruned(simulated: SimulatedCluster) -> None:
    configure()
    reconcile(simulated.backend)
    KueueConfiguration.objects.all().delete()  # as if its row were lost
    run = reconcile(simulated.backend)
    assert run.deleted == 0
    [kept] = [c for c in run.changes if c["kind"] == "ConfigMap"]
    assert kept["action"] == "keep" and "never deleted" in kept["note"]
    assert simulated.backend.get(TYPES["ConfigMap"], NAME, NAMESPACE) is not None


def test_a_configuration_alone_does_not_make_a_wiped_policy_look_real(
    simulated: SimulatedCluster,
) -> None:
    """An empty policy prunes nothing, even while the Kueue configuration row
    (which a partial wipe may leave) still asks for its ConfigMap."""
    configure()
    reconcile(simulated.backend)
    LocalQueue.objects.all().delete()
    ClusterQueue.objects.all().delete()
    Team.objects.all().delete()
    Cohort.objects.all().delete()
    ResourceFlavor.objects.all().delete()
    QueueClass.objects.all().delete()
    run = reconcile(simulated.backend)
    assert run.deleted == 0 and "policy is empty" in run.message
    assert {q["metadata"]["name"] for q in simulated.objects("ClusterQueue")} == {"research"}


# --------------------------------------------------------------------------- real clusters


def test_on_a_real_cluster_the_plan_makes_it_a_manual_step_and_never_touches_it(
    cluster: ClusterUnderTest, policy: None
) -> None:
    """Both backends through the same test: simulated applies, the real
    kube-apiserver (Berth as its ServiceAccount) gets a manual step."""
    if isinstance(cluster, EnvtestCluster):
        cluster.add_foreign(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        cluster.add_foreign(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NAMESPACE},
                "data": {KEY: KUEUES_OWN},
            }
        )
    configure()
    plan = reconcile(cluster.backend, trigger=ReconcileRun.Trigger.PLAN, dry_run=True)
    [step] = [c for c in plan.changes if c["kind"] == "ConfigMap"]
    run = reconcile(cluster.backend)
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    if not isinstance(cluster, EnvtestCluster):
        assert step["action"] == "create"
        assert configuration_on(cluster.backend)["fairSharing"]["enable"] is True  # type: ignore[arg-type]
        return
    assert (step["action"], step["namespace"], step["name"]) == ("manual", NAMESPACE, NAME)
    assert "restart kueue-controller-manager" in step["note"]
    assert "merge these keys" in step["note"]
    assert "manual step" in plan.message and "manual step" in run.message
    # Kueue's own ConfigMap is exactly as its installer left it.
    config_map = cluster.get("ConfigMap", NAME, NAMESPACE)
    assert config_map is not None and config_map["data"] == {KEY: KUEUES_OWN}
    # Berth never even asked about ConfigMaps (its role grants none: the kube
    # fixture fails the test on any refused request).
    assert not [r for r in cluster.berth_requests() if "configmaps" in r["requestURI"]]
    # The next run still shows the step, and still writes nothing.
    again = reconcile(cluster.backend)
    assert again.write_calls == 0
    assert [c["action"] for c in again.changes if c["kind"] == "ConfigMap"] == ["manual"]


@pytest.fixture
def double(settings: Any) -> Iterator[KubeCluster]:
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    settings.BERTH_RECONCILE_ON_CHANGE = False
    with KubeCluster() as cluster:
        yield cluster


def test_against_the_loopback_double_no_configmap_request_is_ever_sent(
    double: KubeCluster, policy: None
) -> None:
    configure()
    plan = reconcile(double.backend, trigger=ReconcileRun.Trigger.PLAN, dry_run=True)
    assert ("manual", "ConfigMap", NAME) in {
        (c["action"], c["kind"], c["name"]) for c in plan.changes
    }
    run = reconcile(double.backend)
    assert run.status == ReconcileRun.Status.SUCCEEDED, run.errors
    assert not [c for c in double.server.calls if "configmaps" in c.path]
    assert run.created > 0  # everything else was applied


def test_the_kubernetes_backend_refuses_configmaps_outright(double: KubeCluster) -> None:
    """A future caller cannot write Kueue's ConfigMap on a real cluster by
    mistake: the backend refuses before any request is made."""
    from queues.backends.base import BackendError

    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "data": {KEY: "x"},
    }
    with pytest.raises(BackendError, match="does not read or write configmaps"):
        double.backend.apply(config_map, force=True)
    with pytest.raises(BackendError):
        double.backend.delete(TYPES["ConfigMap"], NAME, NAMESPACE)
    assert not [c for c in double.server.calls if "configmaps" in c.path]


# --------------------------------------------------------------------------- manifests


def test_manifests_for_a_real_cluster_show_it_as_comments_and_an_annotation(
    admin_client: APIClient, settings: Any, policy: None
) -> None:
    settings.BERTH_CLUSTER = "kubernetes"
    configure()
    text = admin_client.get("/api/v1/policy/manifests/").content.decode()
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    assert "ConfigMap" not in {d["kind"] for d in documents}  # kubectl apply -f skips it
    assert "# manual step: Berth does not write Kueue's manager configuration" in text
    assert "#   waitForPodsReady:" in text
    objects = admin_client.get("/api/v1/policy/manifests/?format=json").json()
    [config_map] = [o for o in objects if o["kind"] == "ConfigMap"]
    assert "restart kueue-controller-manager" in config_map["metadata"]["annotations"][MANUAL_STEP]


def test_manifests_for_the_simulated_cluster_hold_the_configmap_itself(
    admin_client: APIClient, policy: None
) -> None:
    configure()
    text = admin_client.get("/api/v1/policy/manifests/").content.decode()
    [config_map] = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "ConfigMap"]
    assert (config_map["metadata"]["namespace"], config_map["metadata"]["name"]) == (
        NAMESPACE,
        NAME,
    )
    assert MANUAL_STEP not in config_map["metadata"].get("annotations", {})
    assert yaml.safe_load(config_map["data"][KEY])["fairSharing"]["enable"] is True
