"""Helpers shared by the API-server double's tests: ClusterQueue bodies, a server-side
apply the way Berth calls it, and readers for ``Status`` errors and ``managedFields``.

They were private to one ``test_apiserver.py``; the split test modules all use them, so
they live in this plain module (no tests, no fixtures; those are in ``conftest.py``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

KUEUE, V = "kueue.x-k8s.io", "v1beta2"
APPLY = "application/apply-patch+yaml"


def cluster_queue(name: str, spec: dict[str, Any] | None = None, **labels: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name} | ({"labels": labels} if labels else {})
    return {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "ClusterQueue",
        "metadata": metadata,
        "spec": spec or {},
    }


def apply_cq(api: client.ApiClient, body: dict[str, Any], **kwargs: Any) -> Any:
    """Server-side apply of a ClusterQueue, the way Berth calls it."""
    kwargs = {"field_manager": "berth", "force": True} | kwargs
    return client.CustomObjectsApi(api).patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", body["metadata"]["name"], body, _content_type=APPLY, **kwargs
    )


def status_of(error: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    body = json.loads(error.value.body)
    assert body["kind"] == "Status" and body["status"] == "Failure"
    assert body["code"] == error.value.status
    return body


def owners(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{entry['manager']}/{entry['operation']}": entry["fieldsV1"]
        for entry in obj["metadata"].get("managedFields", [])
    }
