"""The policy API's validation contract, rule by rule, through HTTP as the platform admin.

Every refused request answers 400 with ``{"detail", "errors": [{"field", "rule",
"message"}]}``, the field given as a path such as
``resource_groups[0].flavors[1].resources[0].lending_limit``, and leaves the
database exactly as it was: row counts of every policy model and of
``PolicyChange``, and for updates the object's GET representation. Positive cases
show valid input passes, so each test can fail in both directions. Flavor, team,
local queue, fair-sharing and immutability rules, If-Match and delete protection
are in ``test_validation_api_flavors.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from rest_framework.test import APIClient

from queues.models import (
    PolicyChange,
    Quota,
    WorkloadPriorityClass,
)
from tests.factories import GPU, cluster_queue, cohort, flavor, gpu_groups
from tests.queues.validation_support import (
    assert_refused,
    gpu,
    group,
    patch,
    post,
    snapshot,
    url,
)

if TYPE_CHECKING:
    # The test client's response (with .json()), as the DRF stubs name it.
    pass

pytestmark = pytest.mark.django_db


# --------------------------------------------------------------------------- 1. names


@pytest.mark.parametrize(
    ("kind", "body", "field", "rule"),
    [
        ("cluster-queues", {"name": "Research_GPU"}, "name", "dns-1123-label"),
        ("cluster-queues", {"name": "research.gpu"}, "name", "dns-1123-label"),
        # The serializer's length limit answers before the name rule does.
        ("cluster-queues", {"name": "x" * 64}, "name", "dns-1123-label"),
        ("resource-flavors", {"name": "H100_SXM"}, "name", "dns-1123-subdomain"),
        ("resource-flavors", {"name": "a" * 254}, "name", "dns-1123-subdomain"),
        ("cohorts", {"name": "Shared Pool"}, "name", "dns-1123-subdomain"),
        ("cohorts", {"name": "-shared"}, "name", "dns-1123-subdomain"),
        ("priority-classes", {"name": "high.", "value": 10}, "name", "dns-1123-subdomain"),
        ("queue-classes", {"name": "batch.jobs"}, "name", "dns-1123-label"),
        ("teams", {"slug": "ML-Team", "name": "ML"}, "slug", "dns-1123-label"),
        ("teams", {"slug": "ml.team", "name": "ML"}, "slug", "dns-1123-label"),
        (
            "teams",
            {"slug": "gamma", "name": "Gamma", "namespaces": ["gamma", "Gamma_Prod"]},
            "namespaces[1]",
            "dns-1123-label",
        ),
    ],
)
def test_dns_1123_names(
    admin_client: APIClient, kind: str, body: dict[str, Any], field: str, rule: str
) -> None:
    before = snapshot(admin_client)
    assert_refused(post(admin_client, kind, body), field, rule, before)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("cluster-queues", {"name": "x" * 63}),
        ("resource-flavors", {"name": "gpu.h100-" + "a" * 200}),
        ("cohorts", {"name": "org.research"}),
        ("priority-classes", {"name": "team.high", "value": 10}),
        ("teams", {"slug": "gamma", "name": "Gamma", "namespaces": ["gamma", "gamma-prod"]}),
    ],
)
def test_valid_names_are_accepted(admin_client: APIClient, kind: str, body: dict[str, Any]) -> None:
    response = post(admin_client, kind, body)
    assert response.status_code == 201, response.content
    assert PolicyChange.objects.filter(action="created").exists()


# --------------------------------------------------------------------------- 2. quantities


def test_quantities_are_parsed_exactly_and_shown_canonically(admin_client: APIClient) -> None:
    flavor("a")
    flavor("b")
    resources = ["cpu", "memory", GPU]
    body = {
        "name": "q",
        "resource_groups": [
            group(
                resources,
                (
                    "a",
                    [
                        {"name": "cpu", "nominal_quota": "500m"},
                        {"name": "memory", "nominal_quota": "4Ti"},
                        {"name": GPU, "nominal_quota": "64"},
                    ],
                ),
                (
                    "b",
                    [
                        {"name": "cpu", "nominal_quota": "1.5"},
                        {"name": "memory", "nominal_quota": "1536Mi"},
                        {"name": GPU, "nominal_quota": 8},
                    ],
                ),
            )
        ],
    }
    assert post(admin_client, "cluster-queues", body).status_code == 201
    shown = admin_client.get(url("cluster-queues", "q")).json()["resource_groups"]
    assert shown[0]["covered_resources"] == resources
    quotas = [[r["nominal_quota"] for r in f["resources"]] for f in shown[0]["flavors"]]
    assert quotas == [["500m", "4Ti", "64"], ["1500m", "1536Mi", "8"]]
    stored = Quota.objects.filter(cluster_queue__name="q").order_by(
        "flavor_index", "resource_index"
    )
    assert [q.nominal_quota for q in stored] == [500, 4 * 2**40, 64, 1500, 1536 * 2**20, 8]


@pytest.mark.parametrize(
    ("resource", "value", "rule"),
    [
        ("memory", "12XB", "quantity-format"),
        (GPU, "1.5", "quantity-precision"),
        ("cpu", "0.0001", "quantity-precision"),
        ("memory", "0.5", "quantity-precision"),
        (GPU, "1e40", "quantity-range"),
    ],
)
def test_quantity_rules(admin_client: APIClient, resource: str, value: str, rule: str) -> None:
    flavor("a")
    before = snapshot(admin_client)
    body = {
        "name": "q",
        "resource_groups": [group([resource], ("a", [{"name": resource, "nominal_quota": value}]))],
    }
    error = assert_refused(
        post(admin_client, "cluster-queues", body),
        "resource_groups[0].flavors[0].resources[0].nominal_quota",
        rule,
        before,
    )
    assert value in error["message"]


# --------------------------------------------------------------------------- 3-4. limits


@pytest.mark.parametrize("limit", ["borrowing_limit", "lending_limit"])
def test_limit_needs_cohort_on_cluster_queue(admin_client: APIClient, limit: str) -> None:
    flavor("h100")
    before = snapshot(admin_client)
    body = {"name": "q", "resource_groups": gpu_groups(**{limit: "2"})}
    rule = f"{limit.split('_')[0]}-limit-needs-cohort"
    error = assert_refused(
        post(admin_client, "cluster-queues", body),
        f"resource_groups[0].flavors[0].resources[0].{limit}",
        rule,
        before,
    )
    assert "cohort" in error["message"]


@pytest.mark.parametrize("limit", ["borrowing_limit", "lending_limit"])
def test_limit_needs_cohort_on_root_cohort(admin_client: APIClient, limit: str) -> None:
    flavor("h100")
    before = snapshot(admin_client)
    body = {"name": "root", "resource_groups": gpu_groups(**{limit: "2"})}
    assert_refused(
        post(admin_client, "cohorts", body),
        f"resource_groups[0].flavors[0].resources[0].{limit}",
        f"{limit.split('_')[0]}-limit-needs-cohort",
        before,
    )


def test_limit_needs_cohort_when_patch_removes_the_cohort(admin_client: APIClient) -> None:
    flavor("h100")
    cohort("shared")
    cluster_queue("q", cohort="shared", resource_groups=gpu_groups(lending_limit="2"))
    before = snapshot(admin_client, url("cluster-queues", "q"))
    assert_refused(
        patch(admin_client, "cluster-queues", "q", {"cohort": None}),
        "resource_groups[0].flavors[0].resources[0].lending_limit",
        "lending-limit-needs-cohort",
        before,
    )


@pytest.mark.parametrize(
    ("kind", "reference"), [("cluster-queues", "cohort"), ("cohorts", "parent")]
)
@pytest.mark.parametrize("limit", ["borrowing_limit", "lending_limit"])
def test_limit_needs_cohort_when_cohort_is_blank(
    admin_client: APIClient, kind: str, reference: str, limit: str
) -> None:
    """The serializer takes "" for "no cohort" (allow_blank) and the object is then
    stored without one, so a limit must be refused exactly as for null."""
    flavor("h100")
    before = snapshot(admin_client)
    body = {"name": "x", reference: "", "resource_groups": gpu_groups(**{limit: "2"})}
    assert_refused(
        post(admin_client, kind, body),
        f"resource_groups[0].flavors[0].resources[0].{limit}",
        f"{limit.split('_')[0]}-limit-needs-cohort",
        before,
    )


def test_limit_needs_cohort_when_patch_blanks_the_cohort(admin_client: APIClient) -> None:
    flavor("h100")
    cohort("shared")
    cluster_queue("q", cohort="shared", resource_groups=gpu_groups(borrowing_limit="2"))
    before = snapshot(admin_client, url("cluster-queues", "q"))
    assert_refused(
        patch(admin_client, "cluster-queues", "q", {"cohort": ""}),
        "resource_groups[0].flavors[0].resources[0].borrowing_limit",
        "borrowing-limit-needs-cohort",
        before,
    )


def test_limits_with_a_cohort_are_accepted(admin_client: APIClient) -> None:
    flavor("h100")
    cohort("shared")
    body = {
        "name": "q",
        "cohort": "shared",
        "resource_groups": gpu_groups(nominal="8", borrowing_limit="4", lending_limit="8"),
    }
    response = post(admin_client, "cluster-queues", body)
    assert response.status_code == 201, response.content
    resources = response.json()["resource_groups"][0]["flavors"][0]["resources"]
    assert resources == [
        {"name": GPU, "nominal_quota": "8", "borrowing_limit": "4", "lending_limit": "8"}
    ]


def test_lending_limit_above_nominal(admin_client: APIClient) -> None:
    flavor("h100")
    cohort("shared")
    before = snapshot(admin_client)
    body = {"name": "q", "cohort": "shared", "resource_groups": gpu_groups("8", lending_limit="9")}
    error = assert_refused(
        post(admin_client, "cluster-queues", body),
        "resource_groups[0].flavors[0].resources[0].lending_limit",
        "lending-limit-above-nominal",
        before,
    )
    assert "9" in error["message"] and "8" in error["message"]


# --------------------------------------------------------------------------- 5-7. groups


def test_max_resource_groups(admin_client: APIClient) -> None:
    for i in range(17):
        flavor(f"f{i}")
    before = snapshot(admin_client)
    groups = [
        group([f"example.com/r{i}"], (f"f{i}", [{"name": f"example.com/r{i}", "nominal_quota": 1}]))
        for i in range(17)
    ]
    response = post(admin_client, "cluster-queues", {"name": "q", "resource_groups": groups})
    error = assert_refused(response, "resource_groups", "max-resource-groups", before)
    assert "16" in error["message"]
    # 16 is the limit, not over it.
    response = post(admin_client, "cluster-queues", {"name": "q", "resource_groups": groups[:16]})
    assert response.status_code == 201, response.content


def test_max_flavors_per_group(admin_client: APIClient) -> None:
    for i in range(65):
        flavor(f"f{i}")
    before = snapshot(admin_client)
    flavors = [(f"f{i}", gpu(1)) for i in range(65)]
    body = {"name": "q", "resource_groups": [group([GPU], *flavors)]}
    error = assert_refused(
        post(admin_client, "cluster-queues", body),
        "resource_groups[0].flavors",
        "max-flavors-per-group",
        before,
    )
    assert "64" in error["message"]
    body = {"name": "q", "resource_groups": [group([GPU], *flavors[:64])]}
    assert post(admin_client, "cluster-queues", body).status_code == 201


def test_resource_in_two_groups(admin_client: APIClient) -> None:
    flavor("a")
    flavor("b")
    before = snapshot(admin_client)
    groups = [group([GPU], ("a", gpu())), group([GPU], ("b", gpu()))]
    assert_refused(
        post(admin_client, "cluster-queues", {"name": "q", "resource_groups": groups}),
        "resource_groups[1].covered_resources[0]",
        "resource-in-two-groups",
        before,
    )


def test_flavor_in_two_groups(admin_client: APIClient) -> None:
    flavor("a")
    before = snapshot(admin_client)
    groups = [
        group(["cpu"], ("a", [{"name": "cpu", "nominal_quota": "4"}])),
        group([GPU], ("a", gpu())),
    ]
    assert_refused(
        post(admin_client, "cluster-queues", {"name": "q", "resource_groups": groups}),
        "resource_groups[1].flavors[0].name",
        "flavor-in-two-groups",
        before,
    )


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        # One quota short.
        ([{"name": GPU, "nominal_quota": "8"}], "resources"),
        # Right count, wrong order.
        (
            [{"name": GPU, "nominal_quota": "8"}, {"name": "cpu", "nominal_quota": "4"}],
            "resources[0].name",
        ),
    ],
)
def test_resources_match_covered(
    admin_client: APIClient, resources: list[dict[str, Any]], field: str
) -> None:
    flavor("a")
    flavor("b")
    before = snapshot(admin_client)
    ok = [{"name": "cpu", "nominal_quota": "4"}, {"name": GPU, "nominal_quota": "8"}]
    groups = [group(["cpu", GPU], ("a", ok), ("b", resources))]
    assert_refused(
        post(admin_client, "cluster-queues", {"name": "q", "resource_groups": groups}),
        f"resource_groups[0].flavors[1].{field}",
        "resources-match-covered",
        before,
    )


# --------------------------------------------------------------------------- 8. cohort cycles


def test_cohort_cycle_self_parent(admin_client: APIClient) -> None:
    before = snapshot(admin_client)
    response = post(admin_client, "cohorts", {"name": "a", "parent": "a"})
    assert_refused(response, "parent", "cohort-cycle", before)


def test_cohort_cycle_self_parent_on_patch(admin_client: APIClient) -> None:
    cohort("a")
    before = snapshot(admin_client, url("cohorts", "a"))
    response = patch(admin_client, "cohorts", "a", {"parent": "a"})
    assert_refused(response, "parent", "cohort-cycle", before)


def test_cohort_cycle_through_a_child(admin_client: APIClient) -> None:
    assert post(admin_client, "cohorts", {"name": "a"}).status_code == 201
    assert post(admin_client, "cohorts", {"name": "b", "parent": "a"}).status_code == 201
    assert post(admin_client, "cohorts", {"name": "c", "parent": "b"}).status_code == 201
    before = snapshot(admin_client, url("cohorts", "a"), url("cohorts", "b"))
    error = assert_refused(
        patch(admin_client, "cohorts", "a", {"parent": "c"}), "parent", "cohort-cycle", before
    )
    assert "a → c → b → a" in error["message"]


# --------------------------------------------------------------------------- 9-11. scalars


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_int32_range_priority_value(admin_client: APIClient, value: int) -> None:
    before = snapshot(admin_client)
    response = post(admin_client, "priority-classes", {"name": "p", "value": value})
    error = assert_refused(response, "value", "int32-range", before)
    assert str(value) in error["message"]


@pytest.mark.parametrize("value", [2**31 - 1, -(2**31), 0])
def test_int32_range_edges_are_accepted(admin_client: APIClient, value: int) -> None:
    response = post(admin_client, "priority-classes", {"name": "p", "value": value})
    assert response.status_code == 201, response.content
    assert WorkloadPriorityClass.objects.get(name="p").value == value


@pytest.mark.parametrize(("value", "status"), [(2**31, 400), (2**31 - 1, 201)])
def test_int32_range_borrow_threshold(admin_client: APIClient, value: int, status: int) -> None:
    before = snapshot(admin_client)
    body = {
        "name": "q",
        "reclaim_within_cohort": "Any",
        "borrow_within_cohort_policy": "LowerPriority",
        "borrow_within_cohort_max_priority_threshold": value,
    }
    response = post(admin_client, "cluster-queues", body)
    if status == 400:
        field = "borrow_within_cohort_max_priority_threshold"
        assert_refused(response, field, "int32-range", before)
    else:
        assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    ("limit", "value"),
    [("nominal_quota", "-1"), ("borrowing_limit", "-2"), ("lending_limit", "-1")],
)
def test_non_negative_quota(admin_client: APIClient, limit: str, value: str) -> None:
    flavor("h100")
    cohort("shared")
    before = snapshot(admin_client)
    resource = {"name": GPU, "nominal_quota": "8", limit: value}
    body = {
        "name": "q",
        "cohort": "shared",
        "resource_groups": [group([GPU], ("h100", [resource]))],
    }
    assert_refused(
        post(admin_client, "cluster-queues", body),
        f"resource_groups[0].flavors[0].resources[0].{limit}",
        "non-negative",
        before,
    )


def test_borrow_needs_reclaim(admin_client: APIClient) -> None:
    before = snapshot(admin_client)
    body = {"name": "q", "borrow_within_cohort_policy": "LowerPriority"}
    error = assert_refused(
        post(admin_client, "cluster-queues", body),
        "borrow_within_cohort_policy",
        "borrow-needs-reclaim",
        before,
    )
    assert "reclaim_within_cohort" in error["message"]


def test_borrow_needs_reclaim_on_patch(admin_client: APIClient) -> None:
    body = {
        "name": "q",
        "reclaim_within_cohort": "LowerPriority",
        "borrow_within_cohort_policy": "LowerPriority",
    }
    assert post(admin_client, "cluster-queues", body).status_code == 201
    before = snapshot(admin_client, url("cluster-queues", "q"))
    assert_refused(
        patch(admin_client, "cluster-queues", "q", {"reclaim_within_cohort": "Never"}),
        "borrow_within_cohort_policy",
        "borrow-needs-reclaim",
        before,
    )


def test_queueing_strategy_names_allowed_values(admin_client: APIClient) -> None:
    before = snapshot(admin_client)
    response = post(admin_client, "cluster-queues", {"name": "q", "queueing_strategy": "LIFO"})
    # Refused by the serializer's choice field, hence DRF's code as the rule.
    error = assert_refused(response, "queueing_strategy", "unsupported-value", before)
    assert "LIFO" in error["message"]
    assert "BestEffortFIFO" in error["message"] and "StrictFIFO" in error["message"]
