"""The policy API's validation contract, continued: resource flavors, fair-sharing
weights, teams and their namespaces, local queues, If-Match and delete protection.

Same contract as ``test_validation_api.py`` (helpers in ``validation_support.py``):
400 with ``{"detail", "errors": [{"field", "rule", "message"}]}`` and nothing
changed in the database; 412 and 409 leave it unchanged too.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from queues.models import ResourceFlavor
from tests.factories import cluster_queue, cohort, flavor, gpu_groups, team, topology
from tests.queues.validation_support import (
    assert_refused,
    assert_unchanged,
    patch,
    post,
    snapshot,
    url,
)

pytestmark = pytest.mark.django_db


# --------------------------------------------------------------------------- 16. flavors


NINE_LABELS = {f"example.com/l{i}": "x" for i in range(9)}


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        (
            {"node_taints": [{"key": "gpu", "effect": "Sometimes"}]},
            "node_taints[0].effect",
            "taint-effect",
        ),
        (
            {"node_taints": [{"key": "gpu", "effect": "NoSchedule", "colour": "red"}]},
            "node_taints[0].colour",
            "unknown-field",
        ),
        (
            {"tolerations": [{"key": "gpu", "operator": "Maybe"}]},
            "tolerations[0].operator",
            "toleration-operator",
        ),
        (
            {"tolerations": [{"key": "", "operator": "Equal"}]},
            "tolerations[0].operator",
            "toleration-empty-key",
        ),
        ({"tolerations": [{"value": "yes"}]}, "tolerations[0].operator", "toleration-empty-key"),
        (
            {"tolerations": [{"key": "gpu", "operator": "Exists", "value": "yes"}]},
            "tolerations[0].value",
            "toleration-exists-value",
        ),
        (
            {
                "tolerations": [
                    {
                        "key": "gpu",
                        "operator": "Exists",
                        "effect": "NoSchedule",
                        "toleration_seconds": 30,
                    }
                ]
            },
            "tolerations[0].toleration_seconds",
            "toleration-seconds-no-execute",
        ),
        ({"node_labels": NINE_LABELS}, "node_labels", "max-node-labels"),
        ({"topology_name": "default"}, "topology_name", "topology-needs-node-label"),
        ({"capacity_type": "reserved"}, "capacity_type", "unsupported-value"),
    ],
)
def test_flavor_rules(admin_client: APIClient, body: dict[str, Any], field: str, rule: str) -> None:
    before = snapshot(admin_client)
    response = post(admin_client, "resource-flavors", {"name": "h100", **body})
    assert_refused(response, field, rule, before)


def test_flavor_rules_on_patch(admin_client: APIClient) -> None:
    flavor("h100", node_labels={"example.com/l0": "x"})
    before = snapshot(admin_client, url("resource-flavors", "h100"))
    response = patch(admin_client, "resource-flavors", "h100", {"node_labels": NINE_LABELS})
    assert_refused(response, "node_labels", "max-node-labels", before)


def test_valid_flavor_is_accepted(admin_client: APIClient) -> None:
    topology("default")
    body = {
        "name": "h100-spot",
        "node_labels": {f"example.com/l{i}": "x" for i in range(8)},
        "node_taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "tolerations": [
            {"operator": "Exists"},
            {
                "key": "spot",
                "operator": "Equal",
                "value": "true",
                "effect": "NoExecute",
                "toleration_seconds": 60,
            },
        ],
        "capacity_type": "spot",
        "topology_name": "default",
    }
    response = post(admin_client, "resource-flavors", body)
    assert response.status_code == 201, response.content
    shown = admin_client.get(url("resource-flavors", "h100-spot")).json()
    assert {key: shown[key] for key in body} == body


# --------------------------------------------------------------------------- 17. weights


@pytest.mark.parametrize(
    ("kind", "value", "rule"),
    [
        ("cluster-queues", "-1", "non-negative"),
        ("cohorts", "-0.5", "non-negative"),
        ("cluster-queues", "0.0001", "quantity-precision"),
        ("cohorts", "heavy", "quantity-format"),
    ],
)
def test_fair_sharing_weight(admin_client: APIClient, kind: str, value: str, rule: str) -> None:
    before = snapshot(admin_client)
    response = post(admin_client, kind, {"name": "x", "fair_sharing_weight": value})
    assert_refused(response, "fair_sharing_weight", rule, before)


@pytest.mark.parametrize(("value", "shown"), [("0.5", "0.5"), ("2500m", "2.5"), (0, "0")])
def test_fair_sharing_weight_accepted(admin_client: APIClient, value: Any, shown: str) -> None:
    response = post(admin_client, "cluster-queues", {"name": "q", "fair_sharing_weight": value})
    assert response.status_code == 201, response.content
    assert response.json()["fair_sharing_weight"] == shown


# --------------------------------------------------------------------------- 18. local queues


def test_dns_1123_label_local_queue_name(admin_client: APIClient) -> None:
    cluster_queue("q")
    before = snapshot(admin_client)
    body = {"namespace": "alpha", "name": "My_Queue", "cluster_queue": "q"}
    assert_refused(post(admin_client, "local-queues", body), "name", "dns-1123-label", before)


def test_unknown_namespace(admin_client: APIClient) -> None:
    cluster_queue("q")
    before = snapshot(admin_client)
    body = {"namespace": "nowhere", "name": "mine", "cluster_queue": "q"}
    error = assert_refused(
        post(admin_client, "local-queues", body), "namespace", "unknown-namespace", before
    )
    assert "nowhere" in error["message"]


def test_namespace_not_admitted(admin_client: APIClient) -> None:
    cluster_queue("q-beta", team="beta")
    before = snapshot(admin_client)
    body = {"namespace": "alpha", "name": "mine", "cluster_queue": "q-beta"}
    error = assert_refused(
        post(admin_client, "local-queues", body), "cluster_queue", "namespace-not-admitted", before
    )
    assert "beta" in error["message"] and "alpha" in error["message"]
    # The owning team's namespace is fine.
    body = {"namespace": "beta", "name": "mine", "cluster_queue": "q-beta"}
    assert post(admin_client, "local-queues", body).status_code == 201


def test_namespace_not_admitted_on_patch(admin_client: APIClient) -> None:
    cluster_queue("shared")
    cluster_queue("q-beta", team="beta")
    body = {"namespace": "alpha", "name": "mine", "cluster_queue": "shared"}
    created = post(admin_client, "local-queues", body)
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    before = snapshot(admin_client, url("local-queues", pk))
    response = patch(admin_client, "local-queues", pk, {"cluster_queue": "q-beta"})
    assert_refused(response, "cluster_queue", "namespace-not-admitted", before)


def test_namespace_not_admitted_when_queue_changes_team(admin_client: APIClient) -> None:
    cluster_queue("shared")
    body = {"namespace": "alpha", "name": "mine", "cluster_queue": "shared"}
    assert post(admin_client, "local-queues", body).status_code == 201
    before = snapshot(admin_client, url("cluster-queues", "shared"))
    response = patch(admin_client, "cluster-queues", "shared", {"team": "beta"})
    error = assert_refused(response, "team", "namespace-not-admitted", before)
    assert "alpha/mine" in error["message"]


# --------------------------------------------------------------------------- 15. immutable names


@pytest.mark.parametrize(
    ("kind", "lookup", "field"),
    [
        ("cluster-queues", "q", "name"),
        ("cohorts", "shared", "name"),
        ("resource-flavors", "h100", "name"),
        ("priority-classes", "high", "name"),
        ("queue-classes", "batch", "name"),
        ("teams", "alpha", "slug"),
    ],
)
def test_immutable_names(admin_client: APIClient, kind: str, lookup: str, field: str) -> None:
    flavor("h100")
    cohort("shared")
    cluster_queue("q")
    assert post(admin_client, "priority-classes", {"name": "high", "value": 10}).status_code == 201
    assert post(admin_client, "queue-classes", {"name": "batch"}).status_code == 201
    before = snapshot(admin_client, url(kind, lookup))
    response = patch(admin_client, kind, lookup, {field: "renamed"})
    assert_refused(response, field, "immutable", before)


def test_immutable_local_queue_name_and_namespace(admin_client: APIClient) -> None:
    cluster_queue("q")
    body = {"namespace": "alpha", "name": "mine", "cluster_queue": "q"}
    created = post(admin_client, "local-queues", body)
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    before = snapshot(admin_client, url("local-queues", pk))
    response = patch(admin_client, "local-queues", pk, {"name": "other"})
    assert_refused(response, "name", "immutable", before)
    response = patch(admin_client, "local-queues", pk, {"namespace": "beta"})
    assert_refused(response, "namespace", "immutable", before)


# --------------------------------------------------------------------------- 19. teams


def test_namespace_taken(admin_client: APIClient) -> None:
    before = snapshot(admin_client)
    body = {"slug": "gamma", "name": "Gamma", "namespaces": ["gamma", "alpha"]}
    error = assert_refused(
        post(admin_client, "teams", body), "namespaces[1]", "namespace-taken", before
    )
    assert "alpha" in error["message"]


def test_namespace_taken_on_patch(admin_client: APIClient) -> None:
    before = snapshot(admin_client, url("teams", "beta"), url("teams", "alpha"))
    response = patch(admin_client, "teams", "beta", {"namespaces": ["beta", "alpha"]})
    assert_refused(response, "namespaces[1]", "namespace-taken", before)


@pytest.mark.parametrize(
    "body",
    [
        {"slug": "gamma", "name": "Gamma", "namespaces": ["kube-system"]},
        # Namespaces default to [slug].
        {"slug": "kueue-system", "name": "Kueue"},
    ],
)
def test_reserved_namespace(admin_client: APIClient, body: dict[str, Any]) -> None:
    before = snapshot(admin_client)
    response = post(admin_client, "teams", body)
    assert_refused(response, "namespaces[0]", "reserved-namespace", before)


def test_valid_team_namespaces_are_accepted(admin_client: APIClient) -> None:
    team("gamma")
    response = patch(admin_client, "teams", "gamma", {"namespaces": ["gamma", "gamma-dev"]})
    assert response.status_code == 200, response.content
    assert response.json()["namespaces"] == ["gamma", "gamma-dev"]


# --------------------------------------------------------------------------- 20. If-Match


def test_if_match_stale_revision_is_refused(admin_client: APIClient) -> None:
    cluster_queue("q")
    assert patch(admin_client, "cluster-queues", "q", {"description": "v2"}).status_code == 200
    before = snapshot(admin_client, url("cluster-queues", "q"))
    assert before.views[url("cluster-queues", "q")]["revision"] == 2
    response = patch(
        admin_client, "cluster-queues", "q", {"description": "v3"}, HTTP_IF_MATCH='"1"'
    )
    assert response.status_code == 412, response.content
    assert response.json()["rule"] == "stale-revision"
    assert_unchanged(before)


def test_if_match_stale_revision_on_delete_is_refused(admin_client: APIClient) -> None:
    flavor("h100")
    assert patch(admin_client, "resource-flavors", "h100", {"description": "v2"}).status_code == 200
    before = snapshot(admin_client, url("resource-flavors", "h100"))
    response = admin_client.delete(url("resource-flavors", "h100"), HTTP_IF_MATCH='"1"')
    assert response.status_code == 412, response.content
    assert response.json()["rule"] == "stale-revision"
    assert_unchanged(before)


def test_if_match_current_revision_is_accepted(admin_client: APIClient) -> None:
    cluster_queue("q")
    current = admin_client.get(url("cluster-queues", "q"))
    etag = current.headers["ETag"]
    response = patch(admin_client, "cluster-queues", "q", {"description": "v2"}, HTTP_IF_MATCH=etag)
    assert response.status_code == 200, response.content
    assert response.json()["revision"] == current.json()["revision"] + 1
    assert response.json()["description"] == "v2"


# --------------------------------------------------------------------------- delete protection


def test_delete_flavor_in_use(admin_client: APIClient) -> None:
    flavor("h100")
    cluster_queue("q", resource_groups=gpu_groups())
    before = snapshot(admin_client, url("resource-flavors", "h100"), url("cluster-queues", "q"))
    response = admin_client.delete(url("resource-flavors", "h100"))
    assert response.status_code == 409, response.content
    assert response.json()["references"] == {"cluster_queues": ["q"]}
    assert_unchanged(before)


def test_delete_cohort_with_members(admin_client: APIClient) -> None:
    cohort("shared")
    cohort("child", parent="shared")
    cluster_queue("q", cohort="shared")
    before = snapshot(admin_client, url("cohorts", "shared"))
    response = admin_client.delete(url("cohorts", "shared"))
    assert response.status_code == 409, response.content
    assert response.json()["references"] == {"cohorts": ["child"], "cluster_queues": ["q"]}
    assert_unchanged(before)


def test_delete_unused_flavor_succeeds(admin_client: APIClient) -> None:
    flavor("h100")
    assert admin_client.delete(url("resource-flavors", "h100")).status_code == 204
    assert not ResourceFlavor.objects.filter(name="h100").exists()


# ---------------------------------------------------------------- edges that must not crash


def test_longest_qualified_resource_name_is_stored(admin_client: APIClient) -> None:
    flavor("h100")
    resource = "a" * 253 + "/" + "b" * 63
    response = admin_client.post(
        "/api/v1/cluster-queues/",
        {
            "name": "long",
            "resource_groups": [
                {
                    "covered_resources": [resource],
                    "flavors": [
                        {"name": "h100", "resources": [{"name": resource, "nominal_quota": "1"}]}
                    ],
                }
            ],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["resource_groups"][0]["covered_resources"] == [resource]


@pytest.mark.parametrize("weight", ["1e30", 10**32])
def test_huge_fair_sharing_weight_is_a_400(admin_client: APIClient, weight: Any) -> None:
    before = snapshot(admin_client)
    response = admin_client.post(
        "/api/v1/cohorts/", {"name": "w", "fair_sharing_weight": weight}, format="json"
    )
    assert_refused(response, "fair_sharing_weight", "range", before)


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({"node_labels": {"gpu\n": "x"}}, "node_labels.gpu\n", "label-key"),
        (
            {
                "node_taints": [
                    {"key": "a", "effect": "NoSchedule"},
                    {"key": "a", "value": "y", "effect": "NoSchedule"},
                ]
            },
            "node_taints[1]",
            "duplicate-taint",
        ),
        (
            {"tolerations": [{"key": "a", "value": "no spaces!"}]},
            "tolerations[0].value",
            "label-value",
        ),
        (
            {"tolerations": [{"key": "a", "effect": "NoExecute", "toleration_seconds": 10**30}]},
            "tolerations[0].toleration_seconds",
            "int64-range",
        ),
    ],
)
def test_flavor_inputs_kubernetes_would_refuse(
    admin_client: APIClient, body: dict[str, Any], field: str, rule: str
) -> None:
    before = snapshot(admin_client)
    response = admin_client.post("/api/v1/resource-flavors/", {"name": "f", **body}, format="json")
    assert_refused(response, field, rule, before)
