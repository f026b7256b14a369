"""Helpers for the validation API tests: refuse-and-nothing-changed assertions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rest_framework.test import APIClient

from queues.models import (
    ClusterQueue,
    Cohort,
    LocalQueue,
    PolicyChange,
    QueueClass,
    Quota,
    ResourceFlavor,
    Team,
    TeamMembership,
    TeamNamespace,
    Topology,
    WorkloadPriorityClass,
)
from tests.factories import GPU

if TYPE_CHECKING:
    # The test client's response (with .json()), as the DRF stubs name it.
    from rest_framework.response import _MonkeyPatchedResponse as Response

API = "/api/v1"
COUNTED = (
    ClusterQueue,
    Cohort,
    LocalQueue,
    PolicyChange,
    QueueClass,
    Quota,
    ResourceFlavor,
    Team,
    TeamMembership,
    TeamNamespace,
    Topology,
    WorkloadPriorityClass,
)


@dataclass(frozen=True)
class Snapshot:
    """Row counts of the policy models plus the GET bodies of some objects."""

    client: APIClient
    counts: dict[str, int]
    views: dict[str, Any] = field(default_factory=dict)


def url(kind: str, name: str | int | None = None) -> str:
    return f"{API}/{kind}/" if name is None else f"{API}/{kind}/{name}/"


def snapshot(client: APIClient, *urls: str) -> Snapshot:
    views: dict[str, Any] = {}
    for address in urls:
        response = client.get(address)
        assert response.status_code == 200, (address, response.content)
        views[address] = response.json()
    counts = {model.__name__: model._default_manager.count() for model in COUNTED}
    return Snapshot(client, counts, views)


def assert_unchanged(before: Snapshot) -> None:
    after = snapshot(before.client, *before.views)
    assert after.counts == before.counts
    assert after.views == before.views


def assert_refused(
    response: Response, field: str, rule: str, snapshot_before: Snapshot
) -> dict[str, str]:
    """400 in the documented shape, naming ``field`` and ``rule``; nothing changed.
    Returns the matching error so a test can check its message."""
    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) == {"detail", "errors"}, body
    assert isinstance(body["detail"], str) and body["detail"]
    assert body["errors"], body
    for error in body["errors"]:
        assert set(error) == {"field", "rule", "message"}, error
        assert all(isinstance(value, str) and value for value in error.values()), error
        assert " " in error["message"], error  # a sentence, not a code
    found = [e for e in body["errors"] if e["field"] == field and e["rule"] == rule]
    assert found, f"no error {field!r}/{rule!r} in {body['errors']}"
    assert_unchanged(snapshot_before)
    return found[0]


def post(client: APIClient, kind: str, body: dict[str, Any]) -> Response:
    return client.post(url(kind), body, format="json")


def patch(
    client: APIClient, kind: str, name: str | int, body: dict[str, Any], **headers: Any
) -> Response:
    return client.patch(url(kind, name), body, format="json", **headers)


def group(covered: list[str], *flavors: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "covered_resources": covered,
        "flavors": [{"name": name, "resources": res} for name, res in flavors],
    }


def gpu(nominal: Any = "8", **limits: Any) -> list[dict[str, Any]]:
    return [{"name": GPU, "nominal_quota": nominal, **limits}]
