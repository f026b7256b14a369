"""The policy API's validation contract, continued: unknown fields and references.

Same contract as ``test_validation_api.py``: 400 naming the field and the rule,
nothing changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from rest_framework.test import APIClient

from tests.factories import GPU, cluster_queue, flavor, gpu_groups
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

# --------------------------------------------------------------------------- 13-14. shape


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "q", "colour": "blue"}, "colour"),
        (
            {"name": "q", "resource_groups": [group([GPU], ("h100", gpu(borowing_limit="2")))]},
            "resource_groups[0].flavors[0].resources[0].borowing_limit",
        ),
        (
            {"name": "q", "resource_groups": [{**gpu_groups()[0], "covered": [GPU]}]},
            "resource_groups[0].covered",
        ),
    ],
)
def test_unknown_field(admin_client: APIClient, body: dict[str, Any], field: str) -> None:
    flavor("h100")
    before = snapshot(admin_client)
    error = assert_refused(
        post(admin_client, "cluster-queues", body), field, "unknown-field", before
    )
    assert "not a known field" in error["message"]


def test_unknown_field_on_patch(admin_client: APIClient) -> None:
    cluster_queue("q")
    before = snapshot(admin_client, url("cluster-queues", "q"))
    response = patch(admin_client, "cluster-queues", "q", {"quota": "8"})
    assert_refused(response, "quota", "unknown-field", before)


def test_unknown_flavor(admin_client: APIClient) -> None:
    flavor("h100")
    before = snapshot(admin_client)
    groups = [group([GPU], ("h100", gpu()), ("a100", gpu()))]
    error = assert_refused(
        post(admin_client, "cluster-queues", {"name": "q", "resource_groups": groups}),
        "resource_groups[0].flavors[1].name",
        "unknown-flavor",
        before,
    )
    assert "a100" in error["message"]


@pytest.mark.parametrize(
    ("kind", "body", "field"),
    [
        ("cluster-queues", {"name": "q", "cohort": "nope"}, "cohort"),
        ("cluster-queues", {"name": "q", "team": "nope"}, "team"),
        ("cluster-queues", {"name": "q", "queue_class": "nope"}, "queue_class"),
        (
            "cluster-queues",
            {"name": "q", "default_priority_class": "nope"},
            "default_priority_class",
        ),
        ("cohorts", {"name": "c", "parent": "nope"}, "parent"),
        (
            "queue-classes",
            {"name": "c", "default_priority_class": "nope"},
            "default_priority_class",
        ),
        (
            "local-queues",
            {"namespace": "alpha", "name": "lq", "cluster_queue": "nope"},
            "cluster_queue",
        ),
    ],
)
def test_unknown_reference(
    admin_client: APIClient, kind: str, body: dict[str, Any], field: str
) -> None:
    before = snapshot(admin_client)
    error = assert_refused(post(admin_client, kind, body), field, "unknown-reference", before)
    assert "nope" in error["message"]
