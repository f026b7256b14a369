"""The cluster side of the REST API: rendered manifests, the plan, reconcile now,
and the run history; who may call what, and that a refusal changes nothing.

No broker is configured in tests, so the tasks the POSTs enqueue run eagerly and
the response carries the finished run."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from accounts.models import AccessDenial
from queues import services
from queues.backends import get_backend
from queues.kueue.render import MANAGED_BY, MANAGER, to_yaml_documents
from queues.models import ClusterQueue, ReconcileRun
from queues.reconcile import desired_objects, policy_version
from tests.factories import gpu_groups
from tests.reconcile.policy_support import on_cluster, small_policy

API = "/api/v1/policy/"
MANIFESTS, PLAN, RECONCILE, RUNS = (
    API + "manifests/",
    API + "plan/",
    API + "reconcile/",
    API + "reconcile-runs/",
)
SIGNED_IN = ["admin", "member_a", "member_b", "approver", "global_approver"]
NON_ADMINS = ["member_a", "member_b", "approver", "global_approver"]


@pytest.fixture
def policy(clients: dict[str, APIClient], settings: Any) -> None:
    """A small policy next to the role users' teams (alpha, beta)."""
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    small_policy(urgent=False)


def identities(objects: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects]


# --- manifests ----------------------------------------------------------------


def test_manifests_are_the_same_yaml_as_the_command(
    clients: dict[str, APIClient], policy: None
) -> None:
    response = clients["admin"].get(MANIFESTS)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    out = StringIO()
    call_command("kueue_manifests", stdout=out)
    assert response.content.decode() == out.getvalue()

    documents = [d for d in yaml.safe_load_all(response.content) if d is not None]
    assert identities(documents) == identities(desired_objects())
    assert {"ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "Namespace"} <= {
        d["kind"] for d in documents
    }
    for document in documents:
        assert document["metadata"]["labels"][MANAGED_BY] == MANAGER, document


def test_manifests_as_json_match_the_yaml(clients: dict[str, APIClient], policy: None) -> None:
    client = clients["member_a"]
    as_json = client.get(MANIFESTS, {"format": "json"})
    assert as_json.status_code == 200
    assert as_json["Content-Type"].startswith("application/json")
    as_yaml = [d for d in yaml.safe_load_all(client.get(MANIFESTS).content) if d is not None]
    assert as_json.json() == as_yaml
    [research] = [o for o in as_json.json() if o["kind"] == "ClusterQueue"]
    quota = research["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    assert quota["nominalQuota"] == "8"


def test_manifests_follow_the_policy(clients: dict[str, APIClient], policy: None) -> None:
    services.cluster_queues.update(
        actor=None,
        obj=ClusterQueue.objects.get(name="research"),
        data={"resource_groups": gpu_groups("h100", "16")},
    )
    body = clients["admin"].get(MANIFESTS, {"format": "json"}).json()
    [research] = [o for o in body if o["kind"] == "ClusterQueue"]
    assert research["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": "nvidia.com/gpu",
        "nominalQuota": "16",
    }


@pytest.mark.parametrize(
    ("query", "headers"),
    [({}, {"HTTP_ACCEPT": "application/yaml"}), ({"format": "yaml"}, {})],
    ids=["accept-header", "format-yaml"],
)
def test_manifests_can_be_asked_for_as_yaml(
    clients: dict[str, APIClient], policy: None, query: dict[str, str], headers: dict[str, Any]
) -> None:
    # The schema advertises the 200 response as application/yaml.
    response = clients["admin"].get(MANIFESTS, query, **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/yaml")
    assert response.content.decode() == to_yaml_documents(desired_objects())


# --- plan ---------------------------------------------------------------------


def test_no_plan_yet_is_404(clients: dict[str, APIClient], policy: None) -> None:
    response = clients["member_b"].get(PLAN)
    assert response.status_code == 404
    assert "No plan yet" in response.json()["detail"]


def test_posting_a_plan_records_a_dry_run_and_changes_nothing_on_the_cluster(
    clients: dict[str, APIClient], policy: None
) -> None:
    response = clients["admin"].post(PLAN)
    assert response.status_code == 202, response.content
    body = response.json()
    run = ReconcileRun.objects.get()
    assert body["id"] == run.pk
    assert (body["status"], body["trigger"], body["dry_run"], body["backend"]) == (
        "succeeded",
        "plan",
        True,
        "simulated",
    )
    assert body["policy_version"] == policy_version()
    planned = [(c["action"], c["kind"], c["namespace"] or "", c["name"]) for c in body["changes"]]
    assert sorted(planned) == sorted(("create", *i) for i in identities(desired_objects()))
    assert (body["created"], body["write_calls"]) == (0, 0)
    assert on_cluster("ClusterQueue") == set() and on_cluster("ResourceFlavor") == set()


def test_plan_get_shows_the_latest_plan_and_goes_stale_after_a_policy_change(
    clients: dict[str, APIClient], policy: None
) -> None:
    admin, reader = clients["admin"], clients["member_a"]
    first = admin.post(PLAN).json()
    second = admin.post(PLAN).json()
    assert second["id"] > first["id"]
    # A reconcile (not a dry run) and a skipped plan are not "the plan".
    admin.post(RECONCILE)
    ReconcileRun.objects.create(
        trigger=ReconcileRun.Trigger.PLAN,
        backend="simulated",
        dry_run=True,
        status=ReconcileRun.Status.SKIPPED,
        policy_version=policy_version(),
    )

    shown = reader.get(PLAN)
    assert shown.status_code == 200
    assert shown.json()["id"] == second["id"]
    assert shown.json()["stale"] is False

    services.resource_flavors.create(actor=None, data={"name": "a100"})
    stale = reader.get(PLAN).json()
    assert (stale["id"], stale["stale"]) == (second["id"], True)

    fresh = admin.post(PLAN).json()
    assert [(c["action"], c["kind"], c["name"]) for c in fresh["changes"]] == [
        ("create", "ResourceFlavor", "a100")
    ]
    assert reader.get(PLAN).json() | {"stale": None} == fresh | {"stale": None}
    assert reader.get(PLAN).json()["stale"] is False


# --- reconcile ----------------------------------------------------------------


def test_reconcile_applies_the_policy_and_a_repeat_changes_nothing(
    clients: dict[str, APIClient], policy: None
) -> None:
    admin = clients["admin"]
    response = admin.post(RECONCILE)
    assert response.status_code == 202, response.content
    body = response.json()
    wanted = len(desired_objects())
    assert (body["status"], body["trigger"], body["dry_run"]) == ("succeeded", "manual", False)
    assert body["created"] == body["write_calls"] == wanted
    assert body["policy_version"] == policy_version()
    assert on_cluster("ClusterQueue") == {"research"}
    assert on_cluster("ResourceFlavor") == {"h100"}
    assert on_cluster("Cohort") == {"org"}
    assert {"alpha", "beta", "research"} <= on_cluster("Namespace")

    again = admin.post(RECONCILE).json()
    assert (again["created"], again["write_calls"], again["unchanged"]) == (0, 0, wanted)
    assert again["message"] == "in sync: nothing to change"
    assert ReconcileRun.objects.filter(dry_run=False).count() == 2
    # After applying, a fresh plan has nothing left to do.
    assert admin.post(PLAN).json()["changes"] == []


# --- run history --------------------------------------------------------------


def test_runs_are_listed_newest_first_and_filtered(
    clients: dict[str, APIClient], policy: None
) -> None:
    admin = clients["admin"]
    plan = admin.post(PLAN).json()["id"]
    applied = admin.post(RECONCILE).json()["id"]
    replan = admin.post(PLAN).json()["id"]

    for role in SIGNED_IN:
        response = clients[role].get(RUNS)
        assert response.status_code == 200, (role, response.content)
        assert [r["id"] for r in response.json()["results"]] == [replan, applied, plan]

    def ids(**query: str) -> list[int]:
        return [r["id"] for r in admin.get(RUNS, query).json()["results"]]

    assert ids(dry_run="true") == [replan, plan]
    assert ids(dry_run="false") == [applied]
    assert ids(trigger="manual") == [applied]
    assert ids(status="succeeded") == [replan, applied, plan]
    assert ids(status="failed") == []
    assert ids(ordering="started_at") == [plan, applied, replan]
    assert admin.get(RUNS, {"status": "no-such-status"}).status_code == 400

    detail = clients["member_b"].get(f"{RUNS}{applied}/")
    assert detail.status_code == 200
    assert detail.json()["created"] == len(desired_objects())
    assert clients["admin"].get(f"{RUNS}999999/").status_code == 404


def test_run_history_is_read_only(clients: dict[str, APIClient], policy: None) -> None:
    run = clients["admin"].post(PLAN).json()["id"]
    assert clients["admin"].post(RUNS, {}, format="json").status_code == 405
    assert clients["admin"].delete(f"{RUNS}{run}/").status_code == 405
    assert ReconcileRun.objects.filter(pk=run).exists()


# --- permissions --------------------------------------------------------------


@pytest.mark.parametrize("role", SIGNED_IN)
@pytest.mark.parametrize("path", [MANIFESTS, PLAN, RUNS])
def test_every_signed_in_role_reads(
    clients: dict[str, APIClient], policy: None, role: str, path: str
) -> None:
    clients["admin"].post(PLAN)
    assert clients[role].get(path).status_code == 200


@pytest.mark.parametrize("path", [MANIFESTS, PLAN, RUNS, f"{RUNS}1/"])
def test_anonymous_reads_are_refused_401(
    clients: dict[str, APIClient], policy: None, path: str
) -> None:
    response = clients["anonymous"].get(path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="berth"'
    assert "apiVersion" not in response.content.decode()


@pytest.mark.parametrize("path", [PLAN, RECONCILE])
@pytest.mark.parametrize("role", [*NON_ADMINS, "anonymous"])
def test_refused_posts_change_nothing(
    clients: dict[str, APIClient], users: dict[str, Any], policy: None, role: str, path: str
) -> None:
    denials = AccessDenial.objects.count()
    response = clients[role].post(path)
    assert response.status_code == (401 if role == "anonymous" else 403), response.content
    assert ReconcileRun.objects.count() == 0
    assert on_cluster("ClusterQueue") == set() and on_cluster("Namespace") == set()
    assert AccessDenial.objects.count() == denials + 1
    row = AccessDenial.objects.order_by("-id").first()
    assert row is not None
    username = "" if users[role] is None else users[role].get_username()
    reason = "not-authenticated" if role == "anonymous" else "forbidden"
    assert (row.username, row.method, row.path, row.reason) == (username, "POST", path, reason)


@pytest.mark.parametrize("role", NON_ADMINS)
def test_non_admins_may_not_reconcile_even_after_an_admin_plan(
    clients: dict[str, APIClient], policy: None, role: str
) -> None:
    clients["admin"].post(PLAN)
    runs = list(ReconcileRun.objects.values_list("pk", flat=True))
    assert clients[role].post(RECONCILE).status_code == 403
    assert clients[role].post(PLAN).status_code == 403
    assert list(ReconcileRun.objects.values_list("pk", flat=True)) == runs
    assert on_cluster("ClusterQueue") == set()


@pytest.mark.parametrize("path", [PLAN, RECONCILE])
def test_an_unconfigured_cluster_is_reported_not_a_500(
    clients: dict[str, APIClient],
    policy: None,
    settings: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    # A kubernetes cluster, but no kubeconfig (HOME is empty) and not in a pod.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    settings.BERTH_CLUSTER = "kubernetes"
    get_backend.cache_clear()
    admin = clients["admin"]
    admin.raise_request_exception = False
    try:
        response = admin.post(path)
    finally:
        get_backend.cache_clear()
    assert response.status_code != 500
    assert "no cluster configuration could be loaded" in response.content.decode()
