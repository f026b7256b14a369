"""Reconcile against a misbehaving API server: the real kubernetes client, through
KubernetesBackend, talking HTTP to the loopback double (tests/kube/apiserver.py),
which answers chosen requests with errors or holds them past the client's timeout.
These stay on the double because a real API server cannot be made to answer a
given request with a 500, a 429 with Retry-After, a 422 or a delay on demand, nor
to serve no Kueue while the session's other tests need it; everything else about
reconcile runs against the real server (test_reconcile.py).

Transient errors (409, 429, 5xx, timeouts) are retried and the run converges;
what stays broken after the retry budget is a PARTIAL run naming the object, and
the next run finishes the job; a validation error is shown, not retried, and
blocks nothing else; a dry-run refusal shows in the plan; no Kueue is a FAILED
run that says how to install it; an expired watch raises WatchExpired."""

from __future__ import annotations

import inspect
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from queues import services
from queues.backends.base import TYPES, ClusterBackend, WatchExpired
from queues.backends.kubernetes import KubernetesBackend
from queues.backends.retry import with_retries
from queues.kueue.plan import is_managed
from queues.kueue.render import identity
from queues.models import ClusterQueue, ReconcileRun
from queues.reconcile import actual_objects, desired_objects, policy_version, reconcile
from tests.factories import gpu_groups
from tests.kube.apiserver import Call, FakeApiServer
from tests.kube.apiserver_state import status_body
from tests.reconcile.kube_cluster import KubeCluster
from tests.reconcile.policy_support import small_policy

Status = ReconcileRun.Status
ATTEMPTS: int = inspect.signature(with_retries).parameters["attempts"].default
KUEUE = "kueue.x-k8s.io"
RESEARCH_CQ = r"/clusterqueues/research$"
INVALID = (
    'ClusterQueue.kueue.x-k8s.io "research" is invalid: spec.resourceGroups[0].flavors[0]'
    '.resources[0].nominalQuota: Invalid value: "8": quota exceeds the flavor\'s capacity'
)


@pytest.fixture(autouse=True)
def fast_retries(settings: Any) -> None:
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    settings.BERTH_RECONCILE_ON_CHANGE = False


@pytest.fixture
def policy(db: Any, queue_class_templates: None) -> None:
    small_policy(urgent=True)


class TrackingApiServer(FakeApiServer):
    """The double, counting the requests it is still handling (to wait for the ones
    the client gave up on)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.in_progress = 0

    def _handle(self, handler: Any) -> None:
        with self.store.lock:
            self.in_progress += 1
        try:
            super()._handle(handler)
        finally:
            with self.store.lock:
                self.in_progress -= 1


@pytest.fixture
def kube() -> Iterator[KubeCluster]:
    cluster = KubeCluster()
    cluster.server = TrackingApiServer()
    with cluster:
        yield cluster


# --- helpers ------------------------------------------------------------------------------------


def short_timeout(kube: KubeCluster, seconds: float = 1) -> None:
    """Talk to the same server with a short request timeout (before any request)."""
    kube.backend = KubernetesBackend(kube.server.api_client(), request_timeout=seconds)


def calls_to(server: FakeApiServer, method: str, path: str) -> list[Call]:
    return [c for c in server.calls if c.method == method and re.search(path, c.path)]


def names(kube: KubeCluster, kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in kube.objects(kind)}


def quota(kube: KubeCluster, name: str = "research") -> str:
    queue = kube.server.get_object(KUEUE, "clusterqueues", name)
    assert queue is not None, name
    return str(queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])


def set_quota(nominal: str) -> None:
    services.cluster_queues.update(
        actor=None,
        obj=ClusterQueue.objects.get(name="research"),
        data={"resource_groups": gpu_groups("h100", nominal, borrowing_limit="4")},
    )


def assert_cluster_holds_intent(backend: ClusterBackend) -> None:
    """Berth's objects on the cluster are exactly the rendered policy: same
    identities, same labels (policy hash included) and same spec."""
    desired = {identity(obj): obj for obj in desired_objects()}
    actual = {identity(obj): obj for obj in actual_objects(backend) if is_managed(obj)}
    assert sorted(actual) == sorted(desired)
    for key, want in desired.items():
        have = actual[key]
        assert have["metadata"]["labels"] == want["metadata"]["labels"], key
        assert have.get("spec") == want.get("spec"), key


def wait_until(condition: Callable[[], object], what: str, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def wait_for_abandoned_requests(kube: KubeCluster) -> None:
    """Let the requests the client gave up on (timeouts) finish on the server: a held
    write has landed (or been refused) once the server is handling nothing."""
    server = kube.server
    assert isinstance(server, TrackingApiServer)
    wait_until(lambda: server.in_progress == 0, "the server to finish abandoned requests")


def invalid_status() -> dict[str, Any]:
    """A 422 as a real API server sends it for a CRD schema or CEL violation."""
    cause = {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "8": quota exceeds the flavor\'s capacity',
        "field": "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
    }
    details = {"name": "research", "group": KUEUE, "kind": "ClusterQueue", "causes": [cause]}
    return status_body(422, INVALID, "Invalid", details)


# --- 1, 2: transient errors and timeouts on an apply --------------------------------------------


@pytest.mark.parametrize("status", [409, 429, 500, 503])
def test_transient_apply_errors_are_retried_until_the_cluster_holds_the_intent(
    kube: KubeCluster, policy: None, status: int
) -> None:
    kube.server.fail_next("PATCH", r"/api/v1/namespaces/research$", status)
    kube.server.fail_next("PATCH", RESEARCH_CQ, status, times=2, body=f"injected {status}")
    run = reconcile(kube.backend)
    assert run.status == Status.SUCCEEDED, run.errors
    assert (run.retries, run.created, run.write_calls) == (3, 8, 8 + 3)
    assert len(calls_to(kube.server, "PATCH", RESEARCH_CQ)) == 3
    assert len(calls_to(kube.server, "PATCH", r"/namespaces/research$")) == 2
    assert_cluster_holds_intent(kube.backend)


def test_an_apply_that_times_out_is_retried_and_converges_even_when_the_late_write_lands(
    kube: KubeCluster, policy: None
) -> None:
    short_timeout(kube, 1)
    kube.server.delay_next("PATCH", RESEARCH_CQ, 1.5)  # the client gives up after 1 s
    run = reconcile(kube.backend)
    assert run.status == Status.SUCCEEDED, run.errors
    assert (run.retries, run.created) == (1, 8)
    assert len(calls_to(kube.server, "PATCH", RESEARCH_CQ)) == 2
    wait_for_abandoned_requests(kube)  # the held first attempt is now applied too
    assert_cluster_holds_intent(kube.backend)
    kube.server.reset_calls()
    again = reconcile(kube.backend)
    assert (again.status, again.write_calls, again.unchanged) == (Status.SUCCEEDED, 0, 8)
    assert kube.server.write_calls() == []


# --- 3, 4: errors beyond the retry budget, validation errors ------------------------------------


def test_errors_beyond_the_retry_budget_make_a_partial_run_and_the_next_run_converges(
    kube: KubeCluster, policy: None
) -> None:
    local_queue = r"/namespaces/research/localqueues/urgent$"
    kube.server.fail_next("PATCH", local_queue, 503, times=ATTEMPTS, body="etcdserver: timeout")
    run = reconcile(kube.backend)
    assert run.status == Status.PARTIAL
    assert run.message == "1 object(s) failed; see errors"
    [error] = run.errors
    assert (error["kind"], error["namespace"], error["name"], error["action"]) == (
        "LocalQueue",
        "research",
        "urgent",
        "create",
    )
    assert "503" in error["message"] and "etcdserver: timeout" in error["message"]
    assert error["transient"] is True
    assert ReconcileRun.objects.get(pk=run.pk).errors == run.errors  # recorded
    assert len(calls_to(kube.server, "PATCH", local_queue)) == ATTEMPTS
    assert (run.retries, run.created) == (ATTEMPTS - 1, 7)
    assert names(kube, "ClusterQueue") == {"research", "urgent"}  # the others were applied
    assert names(kube, "LocalQueue") == {"research"}

    following = reconcile(kube.backend)
    assert (following.status, following.errors) == (Status.SUCCEEDED, [])
    assert (following.created, following.write_calls, following.retries) == (1, 1, 0)
    assert_cluster_holds_intent(kube.backend)


def test_a_validation_error_is_not_retried_is_shown_and_blocks_nothing_else(
    kube: KubeCluster, policy: None
) -> None:
    # Armed for every attempt: a retry would fail again and show up as a second call.
    kube.server.fail_next("PATCH", RESEARCH_CQ, 422, times=ATTEMPTS, body=invalid_status())
    run = reconcile(kube.backend)
    assert run.status == Status.PARTIAL
    assert len(calls_to(kube.server, "PATCH", RESEARCH_CQ)) == 1
    assert run.retries == 0
    [error] = run.errors
    assert (error["kind"], error["namespace"], error["name"], error["action"]) == (
        "ClusterQueue",
        None,
        "research",
        "create",
    )
    assert "422" in error["message"] and INVALID in error["message"]
    assert error["transient"] is False
    assert run.created == 7
    assert names(kube, "ClusterQueue") == {"urgent"}
    assert names(kube, "LocalQueue") == {"research", "urgent"}


# --- 5: the final state is the last intent ------------------------------------------------------


def _reconcile_in_thread(backend: ClusterBackend, runs: list[ReconcileRun]) -> None:
    try:
        runs.append(reconcile(backend))
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_policy_change_while_the_apply_is_failing_ends_with_the_newest_quota(
    kube: KubeCluster, policy: None
) -> None:
    reconcile(kube.backend)
    set_quota("16")
    # The first attempt is held for a second, then fails like the next one.
    kube.server.delay_next("PATCH", RESEARCH_CQ, 1.0)
    kube.server.fail_next("PATCH", RESEARCH_CQ, 503, times=2)
    kube.server.reset_calls()
    runs: list[ReconcileRun] = []
    worker = threading.Thread(target=_reconcile_in_thread, args=(kube.backend, runs))
    worker.start()
    wait_until(lambda: calls_to(kube.server, "PATCH", RESEARCH_CQ), "the apply of research")
    set_quota("32")  # committed while that apply is still failing
    worker.join(timeout=30)
    [run] = runs
    assert run.status == Status.SUCCEEDED, run.errors
    assert run.policy_version == policy_version()
    assert (run.retries, run.updated) == (2, 2)  # 16 in the first pass, 32 in the second
    assert quota(kube) == "32"
    assert_cluster_holds_intent(kube.backend)


def test_a_timed_out_apply_that_lands_late_does_not_undo_a_newer_one(
    kube: KubeCluster, policy: None
) -> None:
    short_timeout(kube, 1)
    reconcile(kube.backend)
    set_quota("16")
    kube.server.delay_next("PATCH", RESEARCH_CQ, 3.0)  # lands ~2 s after the retry
    first = reconcile(kube.backend)
    assert (first.status, first.retries) == (Status.SUCCEEDED, 1)
    set_quota("32")
    second = reconcile(kube.backend)
    assert (second.status, quota(kube)) == (Status.SUCCEEDED, "32")
    wait_for_abandoned_requests(kube)  # the held quota-16 apply of the first run lands
    assert quota(kube) == "32"


# --- 6: no Kueue --------------------------------------------------------------------------------


def test_without_kueue_the_run_fails_with_install_instructions_and_writes_nothing(
    policy: None,
) -> None:
    with KubeCluster(kueue=False) as kube:
        for dry_run in (False, True):
            run = reconcile(kube.backend, dry_run=dry_run)
            assert run.status == Status.FAILED
            assert "Kueue is not installed" in run.message
            assert "kubectl apply --server-side" in run.message
            assert "manifests.yaml" in run.message
            assert (run.write_calls, run.changes, run.finished_at is None) == (0, [], False)
        assert kube.server.write_calls() == []
        assert {call.path for call in kube.server.calls} == {"/apis/"}  # discovery only


# --- 7: plan = server-side dry run --------------------------------------------------------------


def test_a_dry_run_refusal_shows_in_the_plan_with_the_servers_message(
    kube: KubeCluster, policy: None
) -> None:
    reconcile(kube.backend)
    set_quota("16")
    kube.server.fail_next("PATCH", RESEARCH_CQ, 422, body=invalid_status())
    kube.server.reset_calls()
    plan = reconcile(kube.backend, trigger=ReconcileRun.Trigger.PLAN, dry_run=True)
    assert plan.status == Status.PARTIAL
    [error] = plan.errors
    assert (error["kind"], error["name"], error["action"]) == ("ClusterQueue", "research", "update")
    assert "dry run" in error["message"] and INVALID in error["message"]
    assert error["transient"] is False
    [call] = calls_to(kube.server, "PATCH", RESEARCH_CQ)
    assert call.query.get("dryRun") == "All"
    assert quota(kube) == "8"


# --- 8: prune failures --------------------------------------------------------------------------


def test_a_delete_failing_beyond_the_budget_keeps_the_queue_tracked_until_the_next_run(
    kube: KubeCluster, policy: None
) -> None:
    reconcile(kube.backend)
    services.cluster_queues.delete(actor=None, obj=ClusterQueue.objects.get(name="urgent"))
    delete = r"/clusterqueues/urgent$"
    kube.server.fail_next("DELETE", delete, 500, times=ATTEMPTS)
    run = reconcile(kube.backend)
    assert run.status == Status.PARTIAL
    [error] = run.errors
    assert (error["kind"], error["name"], error["action"], error["transient"]) == (
        "ClusterQueue",
        "urgent",
        "delete",
        True,
    )
    assert "500" in error["message"]
    assert len(calls_to(kube.server, "DELETE", delete)) == ATTEMPTS
    assert names(kube, "LocalQueue") == {"research"}  # its LocalQueue went first
    [urgent] = [q for q in kube.objects("ClusterQueue") if q["metadata"]["name"] == "urgent"]
    assert is_managed(urgent)  # still Berth's, so the next plan deletes it again

    following = reconcile(kube.backend)
    assert (following.status, following.deleted, following.errors) == (Status.SUCCEEDED, 1, [])
    assert names(kube, "ClusterQueue") == {"research"}
    assert_cluster_holds_intent(kube.backend)


# --- reads --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [r"^/apis/?$", r"/clusterqueues$"], ids=["discovery", "list"])
def test_a_transient_error_on_a_read_is_retried(kube: KubeCluster, policy: None, path: str) -> None:
    kube.server.fail_next("GET", path, 503)
    run = reconcile(kube.backend)
    assert run.status == Status.SUCCEEDED, run.message
    assert_cluster_holds_intent(kube.backend)


# --- 9: watch -----------------------------------------------------------------------------------


def workload(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"queueName": "research"},
    }


def test_a_watch_from_an_expired_resource_version_raises_watch_expired(kube: KubeCluster) -> None:
    workloads = TYPES["Workload"]
    _, old = kube.backend.list(workloads)
    kube.server.put_object(workload("w1"))
    kube.server.expire_watches()
    with pytest.raises(WatchExpired) as expired:
        list(kube.backend.watch(workloads, old, timeout_seconds=5))
    assert (expired.value.status, expired.value.transient) == (410, False)
    assert "watch workloads" in str(expired.value)
    items, fresh = kube.backend.list(workloads)  # relisting recovers
    assert [item["metadata"]["name"] for item in items] == ["w1"]
    events = kube.backend.watch(workloads, fresh, timeout_seconds=1)
    assert [event.type for event in events if event.type != "BOOKMARK"] == []


def test_an_open_watch_ends_with_watch_expired_when_the_server_expires_it(
    kube: KubeCluster,
) -> None:
    workloads = TYPES["Workload"]
    _, start = kube.backend.list(workloads)
    kube.server.put_object(workload("w1"))
    seen: list[str] = []
    with pytest.raises(WatchExpired) as expired:
        for event in kube.backend.watch(workloads, start, timeout_seconds=10):
            seen.append(event.type)
            if event.type == "ADDED":
                kube.server.expire_watches()
    assert "ADDED" in seen
    assert expired.value.status == 410
