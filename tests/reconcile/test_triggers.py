"""A policy change requests one reconcile once it commits (policy_write's
on_commit hook): one per outermost transaction however many writes it holds,
none for a rolled-back write, none with BERTH_RECONCILE_ON_CHANGE off.

These tests commit for real (transaction=True), so on_commit fires, and with no
broker the reconcile task runs eagerly inside it."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import transaction
from rest_framework.test import APIClient

from queues import services
from queues.backends import get_backend
from queues.backends.base import TYPES
from queues.backends.simulated import SimulatedBackend
from queues.errors import PolicyInvalid
from queues.models import ClusterQueue, PolicyChange, ReconcileRun, ResourceFlavor
from queues.reconcile import policy_version
from queues.services.common import policy_write
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, team, token_client, user

pytestmark = pytest.mark.django_db(transaction=True)
ON_CHANGE = ReconcileRun.Trigger.POLICY_CHANGE


@pytest.fixture(autouse=True)
def fast_retries(settings: Any) -> None:
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    settings.BERTH_RECONCILE_ON_CHANGE = True


def runs() -> list[ReconcileRun]:
    return list(ReconcileRun.objects.filter(trigger=ON_CHANGE).order_by("pk"))


def on_cluster(kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in SimulatedBackend().list(TYPES[kind])[0]}


def test_one_write_triggers_one_reconcile_that_applies_it() -> None:
    flavor("h100")
    [run] = runs()
    assert (run.status, run.dry_run, run.created) == ("succeeded", False, 1)
    assert run.policy_version == policy_version()
    assert on_cluster("ResourceFlavor") == {"h100"}

    services.resource_flavors.update(
        actor=None, obj=ResourceFlavor.objects.get(name="h100"), data={"node_labels": {"a": "b"}}
    )
    first, second = runs()
    assert first == run and second.updated == 1
    [h100] = SimulatedBackend().list(TYPES["ResourceFlavor"])[0]
    assert h100["spec"]["nodeLabels"] == {"a": "b"}


def test_several_writes_in_one_transaction_trigger_one_reconcile_after_commit() -> None:
    with transaction.atomic():
        flavor("h100")
        cohort("org")
        team("research")
        cluster_queue("research", team="research", cohort="org", resource_groups=gpu_groups())
        assert ReconcileRun.objects.count() == 0  # nothing before the commit
    [run] = runs()
    assert run.status == "succeeded"
    # It ran after the last write, so it saw (and applied) all of them.
    assert run.policy_version == policy_version() == PolicyChange.objects.latest("id").pk
    assert on_cluster("ClusterQueue") == {"research"}
    assert on_cluster("Cohort") == {"org"}
    assert "research" in on_cluster("Namespace")
    assert on_cluster("LocalQueue") == {"research"}


def test_a_rolled_back_transaction_triggers_nothing() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        flavor("h100")
        cohort("org")
        raise RuntimeError("changed my mind")
    assert ReconcileRun.objects.count() == 0
    assert PolicyChange.objects.count() == 0
    assert on_cluster("ResourceFlavor") == set()


def test_a_refused_write_triggers_nothing() -> None:
    flavor("h100")
    before = ReconcileRun.objects.count()
    with pytest.raises(PolicyInvalid):
        services.cluster_queues.create(actor=None, data={"name": "q", "cohort": "no-such-cohort"})
    assert ReconcileRun.objects.count() == before == 1
    assert not ClusterQueue.objects.exists()


def test_a_rolled_back_savepoint_keeps_the_reconcile_of_the_writes_that_stay() -> None:
    """The callback of a write in a savepoint that rolls back is discarded with
    it; the later write must register its own."""
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            flavor("spot")
            raise RuntimeError("undo the savepoint")
        flavor("h100")
    [run] = runs()
    assert on_cluster("ResourceFlavor") == {"h100"}
    assert run.created == 1


def test_a_write_rolled_back_after_a_kept_one_still_gives_one_reconcile() -> None:
    with transaction.atomic():
        flavor("h100")
        with pytest.raises(RuntimeError), transaction.atomic():
            flavor("spot")
            raise RuntimeError("undo the savepoint")
        flavor("a100")
    [run] = runs()
    assert on_cluster("ResourceFlavor") == {"h100", "a100"}
    assert run.policy_version == policy_version()


def test_nested_policy_writes_give_one_reconcile() -> None:
    with policy_write():
        flavor("h100")
        with policy_write():
            flavor("a100")
    assert len(runs()) == 1
    assert on_cluster("ResourceFlavor") == {"h100", "a100"}


def test_consecutive_transactions_each_trigger_one() -> None:
    for name in ("h100", "a100", "l4"):
        with transaction.atomic():
            flavor(name)
    assert [r.created for r in runs()] == [1, 1, 1]
    assert [r.policy_version for r in runs()] == sorted({r.policy_version for r in runs()})


def test_switched_off_no_reconcile_is_triggered(settings: Any) -> None:
    settings.BERTH_RECONCILE_ON_CHANGE = False
    flavor("h100")
    with transaction.atomic():
        cohort("org")
        team("research")
    assert ReconcileRun.objects.count() == 0
    assert on_cluster("ResourceFlavor") == set()
    assert PolicyChange.objects.count() > 0  # the policy itself was written


def test_seed_demo_is_one_transaction_and_one_reconcile(queue_class_templates: None) -> None:
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())
    [run] = runs()
    assert run.status == "succeeded", run.errors
    assert run.policy_version == policy_version()
    assert on_cluster("ClusterQueue") >= {"research", "serving", "platform"}


# --- through the API -------------------------------------------------------------


@pytest.fixture
def admin(settings: Any) -> APIClient:
    settings.BERTH_RECONCILE_ON_CHANGE = False  # setting up is not what is counted
    client = token_client(user("admin", superuser=True))
    flavor("h100")
    cluster_queue("research", resource_groups=gpu_groups("h100", "8"))
    settings.BERTH_RECONCILE_ON_CHANGE = True
    return client


def test_an_api_change_triggers_one_reconcile(admin: APIClient) -> None:
    response = admin.patch(
        "/api/v1/cluster-queues/research/",
        {"resource_groups": gpu_groups("h100", "16")},
        format="json",
    )
    assert response.status_code == 200, response.content
    [run] = runs()
    assert run.status == "succeeded"
    [queue] = SimulatedBackend().list(TYPES["ClusterQueue"])[0]
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "16"


def test_a_refused_api_change_triggers_nothing(admin: APIClient) -> None:
    response = admin.post(
        "/api/v1/cluster-queues/",
        {"name": "q2", "cohort": "no-such-cohort", "resource_groups": gpu_groups()},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert ReconcileRun.objects.count() == 0


def test_a_non_admin_api_write_triggers_nothing(admin: APIClient) -> None:
    client = token_client(user("someone"))
    response = client.delete("/api/v1/cluster-queues/research/")
    assert response.status_code == 403
    assert ReconcileRun.objects.count() == 0


def test_a_change_is_answered_as_stored_when_its_reconcile_cannot_start(
    admin: APIClient, settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A kubernetes cluster, but no kubeconfig (HOME is empty) and not in a pod.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    settings.BERTH_CLUSTER = "kubernetes"
    get_backend.cache_clear()
    admin.raise_request_exception = False
    try:
        response = admin.post("/api/v1/resource-flavors/", {"name": "a100"}, format="json")
    finally:
        get_backend.cache_clear()
    assert ResourceFlavor.objects.filter(name="a100").exists()  # committed either way
    assert response.status_code == 201, response.content
