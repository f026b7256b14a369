"""The API-server double's server-side apply and patch formats, driven through the real
``kubernetes`` client over HTTP: apply creating and merging, field ownership and conflicts,
dry runs, apply to the status subresource, and merge/JSON/strategic patches. Kept apart
because apply is what Berth relies on most and has the most cases."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kube.apiserver import FakeApiServer
from tests.kube.client_helpers import APPLY, KUEUE, V, apply_cq, cluster_queue, owners, status_of

# --- server-side apply -------------------------------------------------------------------------


def test_apply_creates_a_missing_object(server: FakeApiServer, api: client.ApiClient) -> None:
    _, code, _ = client.CustomObjectsApi(api).patch_cluster_custom_object_with_http_info(
        KUEUE,
        V,
        "clusterqueues",
        "team-a",
        cluster_queue("team-a", {"cohortName": "org"}),
        field_manager="berth",
        force=True,
        _content_type=APPLY,
    )
    assert code == 201
    stored = server.get_object(KUEUE, "clusterqueues", "team-a")
    assert stored is not None and stored["spec"] == {"cohortName": "org"}
    assert owners(stored) == {"berth/Apply": {"f:spec": {"f:cohortName": {}}}}
    call = server.write_calls()[-1]
    assert call.method == "PATCH" and call.content_type == APPLY
    assert call.query == {"fieldManager": "berth", "force": "true"}


def test_client_returns_none_when_apply_creates(api: client.ApiClient) -> None:
    """kubernetes v37 maps only 200 for patch_*_custom_object: a 201 from SSA reads as None."""
    assert apply_cq(api, cluster_queue("team-a")) is None
    assert apply_cq(api, cluster_queue("team-a"))["metadata"]["name"] == "team-a"


def test_apply_merges_and_removes_fields_it_no_longer_sends(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    spec = {"cohortName": "org", "queueingStrategy": "BestEffortFIFO", "namespaceSelector": {}}
    apply_cq(api, cluster_queue("team-a", spec, team="a", tier="gold"))
    kueue_patch = {"spec": {"stopPolicy": "Hold"}, "metadata": {"labels": {"kueue": "yes"}}}
    client.CustomObjectsApi(api).patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", "team-a", kueue_patch, field_manager="kueue"
    )
    rv = server.get_object(KUEUE, "clusterqueues", "team-a")["metadata"]["resourceVersion"]

    applied = apply_cq(api, cluster_queue("team-a", {"cohortName": "org2"}, team="a"))

    assert applied["spec"] == {"cohortName": "org2", "stopPolicy": "Hold"}
    assert applied["metadata"]["labels"] == {"team": "a", "kueue": "yes"}
    assert applied["metadata"]["generation"] == 3
    assert int(applied["metadata"]["resourceVersion"]) > int(rv)
    fields = owners(applied)
    assert fields["berth/Apply"]["f:spec"] == {"f:cohortName": {}}
    assert fields["kueue/Update"]["f:spec"] == {"f:stopPolicy": {}}


def test_applying_the_same_configuration_writes_nothing(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    first = apply_cq(api, cluster_queue("team-a", {"cohortName": "org"}))
    first = first or server.get_object(KUEUE, "clusterqueues", "team-a")
    again = apply_cq(api, cluster_queue("team-a", {"cohortName": "org"}))
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_apply_conflicts_without_force_and_takes_over_with_force(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    server.put_object(cluster_queue("team-a", {"cohortName": "org", "x": 1}), "kubectl-edit")
    with pytest.raises(ApiException) as error:
        apply_cq(api, cluster_queue("team-a", {"cohortName": "other"}), force=False)
    assert error.value.status == 409
    status = status_of(error)
    assert status["reason"] == "Conflict" and "kubectl-edit" in status["message"]
    assert status["details"]["causes"] == [
        {
            "type": "FieldManagerConflict",
            "message": 'conflict with "kubectl-edit"',
            "field": ".spec.cohortName",
        }
    ]
    same = apply_cq(api, cluster_queue("team-a", {"cohortName": "org"}), force=False)
    assert same["spec"]["cohortName"] == "org"  # an equal value is shared, not a conflict

    forced = apply_cq(api, cluster_queue("team-a", {"cohortName": "other"}), force=True)
    assert forced["spec"] == {"cohortName": "other", "x": 1}
    assert owners(forced)["berth/Apply"] == {"f:spec": {"f:cohortName": {}}}
    assert owners(forced)["kubectl-edit/Update"] == {"f:spec": {"f:x": {}}}


def test_apply_needs_a_field_manager(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as error:
        client.CustomObjectsApi(api).patch_cluster_custom_object(
            KUEUE, V, "clusterqueues", "a", cluster_queue("a"), _content_type=APPLY
        )
    assert error.value.status == 400 and "fieldManager" in status_of(error)["message"]


def test_apply_a_namespace_and_a_namespaced_object(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "labels": {"berth.io/team": "a"}},
    }
    created = core.patch_namespace("team-a", namespace, field_manager="berth", _content_type=APPLY)
    assert created.metadata.labels == {"berth.io/team": "a"} and created.status.phase == "Active"
    queue = {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": "team-a"},
        "spec": {"clusterQueue": "team-a"},
    }
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        KUEUE,
        V,
        "team-a",
        "localqueues",
        "default",
        queue,
        field_manager="berth",
        force=True,
        _content_type=APPLY,
    )
    stored = server.get_object(KUEUE, "localqueues", "default", "team-a")
    assert stored is not None and stored["spec"] == {"clusterQueue": "team-a"}


def test_apply_to_the_status_subresource(server: FakeApiServer, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    apply_cq(api, cluster_queue("a", {"cohortName": "org"}))
    status = cluster_queue("a") | {"status": {"pendingWorkloads": 2}}
    del status["spec"]
    custom.patch_cluster_custom_object_status(
        KUEUE,
        V,
        "clusterqueues",
        "a",
        status,
        field_manager="kueue",
        force=True,
        _content_type=APPLY,
    )
    stored = server.get_object(KUEUE, "clusterqueues", "a")
    assert stored is not None
    assert stored["status"] == {"pendingWorkloads": 2} and stored["spec"] == {"cohortName": "org"}
    entry = next(e for e in stored["metadata"]["managedFields"] if e["manager"] == "kueue")
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {"f:status": {"f:pendingWorkloads": {}}}


def test_dry_run_returns_the_result_without_storing_it(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    apply_cq(api, cluster_queue("team-a", {"cohortName": "org"}))
    before = server.get_object(KUEUE, "clusterqueues", "team-a")
    rv = server.store.rv
    preview = apply_cq(api, cluster_queue("team-a", {"cohortName": "new"}), dry_run="All")
    assert preview["spec"] == {"cohortName": "new"}
    assert server.get_object(KUEUE, "clusterqueues", "team-a") == before
    created = client.CustomObjectsApi(api).create_cluster_custom_object(
        KUEUE, V, "clusterqueues", cluster_queue("ghost"), dry_run="All"
    )
    assert created["metadata"]["name"] == "ghost" and "resourceVersion" not in created["metadata"]
    assert server.get_object(KUEUE, "clusterqueues", "ghost") is None
    assert server.store.rv == rv


# --- patches -----------------------------------------------------------------------------------


def test_merge_json_and_strategic_patches(server: FakeApiServer, api: client.ApiClient) -> None:
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    custom.create_cluster_custom_object(
        KUEUE, V, "clusterqueues", cluster_queue("a", {"cohortName": "org", "x": [1, 2]})
    )
    merged = custom.patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", "a", {"spec": {"x": None, "y": {"z": 1}}}
    )
    assert merged["spec"] == {"cohortName": "org", "y": {"z": 1}}
    ops = [
        {"op": "add", "path": "/spec/list", "value": [1]},
        {"op": "add", "path": "/spec/list/-", "value": 2},
        {"op": "replace", "path": "/spec/cohortName", "value": "new"},
        {"op": "remove", "path": "/spec/y"},
    ]
    patched = custom.patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", "a", ops, _content_type="application/json-patch+json"
    )
    assert patched["spec"] == {"cohortName": "new", "list": [1, 2]}
    with pytest.raises(ApiException) as error:
        custom.patch_cluster_custom_object(
            KUEUE,
            V,
            "clusterqueues",
            "a",
            [{"op": "remove", "path": "/spec/nope"}],
            _content_type="application/json-patch+json",
        )
    assert error.value.status == 422
    with pytest.raises(ApiException) as error:  # custom resources refuse strategic merge
        custom.patch_cluster_custom_object(
            KUEUE,
            V,
            "clusterqueues",
            "a",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert error.value.status == 415

    core.create_namespace({"metadata": {"name": "team-a", "labels": {"a": "1"}}})
    server.reset_calls()
    labelled = core.patch_namespace("team-a", {"metadata": {"labels": {"b": "2"}}})
    assert labelled.metadata.labels == {"a": "1", "b": "2"}
    # v37 defaults core patches to json-patch and switches a dict body to strategic merge
    assert server.calls[-1].content_type == "application/strategic-merge-patch+json"
