"""The Kubernetes API-server double, driven only through the real ``kubernetes`` client over
HTTP: no client method is patched anywhere."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from tests.kube.apiserver import FakeApiServer

KUEUE, V = "kueue.x-k8s.io", "v1beta2"
APPLY = "application/apply-patch+yaml"


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake
        assert fake.internal_errors == []


@pytest.fixture
def api(server: FakeApiServer) -> Iterator[client.ApiClient]:
    with server.api_client() as api_client:
        yield api_client


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


# --- discovery ---------------------------------------------------------------------------------


def test_discovery_serves_groups_versions_and_resources(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    groups = {group.name: group for group in client.ApisApi(api).get_api_versions().groups}
    assert {"batch", KUEUE, "jobset.x-k8s.io", "kubeflow.org", "trainer.kubeflow.org"} <= set(
        groups
    )
    assert groups[KUEUE].preferred_version.version == "v1beta2"
    assert [v.version for v in groups[KUEUE].versions] == ["v1beta2", "v1beta1"]
    assert client.CoreApi(api).get_api_versions().versions == ["v1"]
    assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    assert client.BatchApi(api).get_api_group().preferred_version.group_version == "batch/v1"
    response = api.call_api("GET", f"{server.url}/apis/{KUEUE}")
    response.read()
    assert json.loads(response.data)["preferredVersion"]["groupVersion"] == f"{KUEUE}/v1beta2"

    kueue = client.CustomObjectsApi(api).get_api_resources(KUEUE, "v1beta2").resources
    by_name = {resource.name: resource for resource in kueue}
    assert by_name["clusterqueues"].kind == "ClusterQueue"
    assert not by_name["clusterqueues"].namespaced and by_name["workloads"].namespaced
    assert {"create", "get", "list", "patch", "watch"} <= set(by_name["localqueues"].verbs)
    assert "workloads/status" in by_name and "resourceflavors/status" not in by_name
    assert client.CustomObjectsApi(api).get_api_resources(KUEUE, "v1beta1").resources
    core = {r.name: r for r in client.CoreV1Api(api).get_api_resources().resources}
    assert not core["namespaces"].namespaced and core["pods"].namespaced
    jobsets = client.CustomObjectsApi(api).get_api_resources("jobset.x-k8s.io", "v1alpha2")
    assert [r.name for r in jobsets.resources] == ["jobsets", "jobsets/status"]


def test_without_kueue_the_group_is_not_served() -> None:
    with FakeApiServer(kueue=False) as server, server.api_client() as api:
        names = {group.name for group in client.ApisApi(api).get_api_versions().groups}
        assert KUEUE not in names and "jobset.x-k8s.io" in names
        with pytest.raises(ApiException) as error:
            client.CustomObjectsApi(api).list_cluster_custom_object(KUEUE, V, "clusterqueues")
        assert error.value.status == 404 and status_of(error)["reason"] == "NotFound"


def test_dynamic_client_discovers_and_applies(api: client.ApiClient, tmp_path: Any) -> None:
    dynamic = DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    queues = dynamic.resources.get(api_version=f"{KUEUE}/{V}", kind="ClusterQueue")
    assert queues.namespaced is False
    queues.server_side_apply(
        body=cluster_queue("a", {"cohortName": "all"}), name="a", field_manager="berth"
    )
    assert [item.metadata.name for item in queues.get().items] == ["a"]


# --- CRUD --------------------------------------------------------------------------------------


def test_create_answers_201_then_409_already_exists(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(api)
    created, code, _ = custom.create_cluster_custom_object_with_http_info(
        KUEUE, V, "clusterqueues", cluster_queue("team-a", {"cohortName": "org"})
    )
    assert code == 201
    meta = created["metadata"]
    assert meta["generation"] == 1 and meta["uid"] and meta["creationTimestamp"]
    assert int(meta["resourceVersion"]) > 0
    with pytest.raises(ApiException) as error:
        custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("team-a"))
    assert error.value.status == 409
    assert status_of(error)["reason"] == "AlreadyExists"
    assert server.write_calls()[0][:2] == ("POST", f"/apis/{KUEUE}/{V}/clusterqueues")


def test_get_and_delete_answer_404_when_missing(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    for call in (custom.get_cluster_custom_object, custom.delete_cluster_custom_object):
        with pytest.raises(ApiException) as error:
            call(KUEUE, V, "clusterqueues", "nope")
        assert error.value.status == 404
        assert status_of(error)["message"] == f'clusterqueues.{KUEUE} "nope" not found'


def test_list_and_delete(server: FakeApiServer, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    for name in ("b", "a"):
        custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue(name))
    listed = custom.list_cluster_custom_object(KUEUE, V, "clusterqueues")
    assert listed["kind"] == "ClusterQueueList" and listed["apiVersion"] == f"{KUEUE}/{V}"
    assert [item["metadata"]["name"] for item in listed["items"]] == ["a", "b"]
    assert listed["metadata"]["resourceVersion"] == str(server.store.rv)
    deleted = custom.delete_cluster_custom_object(KUEUE, V, "clusterqueues", "a")
    assert deleted["status"] == "Success" and deleted["details"]["name"] == "a"
    assert [obj["metadata"]["name"] for obj in server.objects("clusterqueues")] == ["b"]


def test_namespaced_objects_need_their_namespace(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    queue = {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "LocalQueue",
        "metadata": {"name": "q"},
        "spec": {"clusterQueue": "team-a"},
    }
    with pytest.raises(ApiException) as error:
        custom.create_namespaced_custom_object(KUEUE, V, "team-a", "localqueues", queue)
    assert error.value.status == 404
    assert status_of(error)["message"] == 'namespaces "team-a" not found'
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "team-a"}})
    created = custom.create_namespaced_custom_object(KUEUE, V, "team-a", "localqueues", queue)
    assert created["metadata"]["namespace"] == "team-a"
    every = custom.list_cluster_custom_object(KUEUE, V, "localqueues")
    assert [item["metadata"]["name"] for item in every["items"]] == ["q"]


def test_finalizers_hold_a_deleted_object_until_removed(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(api)
    body = cluster_queue("held")
    body["metadata"]["finalizers"] = ["kueue.x-k8s.io/resource-in-use"]
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)
    marked = custom.delete_cluster_custom_object(KUEUE, V, "clusterqueues", "held")
    assert marked["metadata"]["deletionTimestamp"]
    assert server.get_object(KUEUE, "clusterqueues", "held") is not None
    patch = {"metadata": {"finalizers": None}}
    custom.patch_cluster_custom_object(KUEUE, V, "clusterqueues", "held", patch)
    assert server.get_object(KUEUE, "clusterqueues", "held") is None


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


# --- status subresource, generation, optimistic concurrency ------------------------------------


def test_status_subresource_is_isolated(server: FakeApiServer, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    body = cluster_queue("team-a", {"cohortName": "org"}) | {"status": {"pendingWorkloads": 9}}
    created = custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)
    assert "status" not in created  # status is dropped on create

    status_patch = {"status": {"pendingWorkloads": 3}, "spec": {"cohortName": "ignored"}}
    after = custom.patch_cluster_custom_object_status(
        KUEUE, V, "clusterqueues", "team-a", status_patch
    )
    assert after["status"] == {"pendingWorkloads": 3} and after["spec"]["cohortName"] == "org"
    assert after["metadata"]["generation"] == 1

    main_patch = {"status": {"pendingWorkloads": 0}, "spec": {"cohortName": "org2"}}
    after = custom.patch_cluster_custom_object(KUEUE, V, "clusterqueues", "team-a", main_patch)
    assert after["status"] == {"pendingWorkloads": 3} and after["spec"]["cohortName"] == "org2"
    assert after["metadata"]["generation"] == 2

    after["status"] = {"pendingWorkloads": 100}
    replaced = custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", "team-a", after)
    assert replaced["status"] == {"pendingWorkloads": 3}
    replaced["status"] = {"pendingWorkloads": 1}
    replaced = custom.replace_cluster_custom_object_status(
        KUEUE, V, "clusterqueues", "team-a", replaced
    )
    assert replaced["status"] == {"pendingWorkloads": 1}
    stored = server.get_object(KUEUE, "clusterqueues", "team-a")
    assert stored is not None and stored["metadata"]["generation"] == 2


def test_put_with_a_stale_resource_version_conflicts(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    current = custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("a"))
    stale = json.loads(json.dumps(current))
    current["spec"] = {"cohortName": "first"}
    custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", "a", current)
    stale["spec"] = {"cohortName": "second"}
    with pytest.raises(ApiException) as error:
        custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", "a", stale)
    assert error.value.status == 409 and "has been modified" in status_of(error)["message"]
    del stale["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as error:
        custom.replace_cluster_custom_object(KUEUE, V, "clusterqueues", "a", stale)
    assert error.value.status == 422  # custom resources need a resourceVersion on update


def test_resource_versions_come_from_one_global_counter(api: client.ApiClient) -> None:
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    first = custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("a"))
    namespace = core.create_namespace({"metadata": {"name": "team-a"}})
    second = custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("b"))
    versions = [
        first["metadata"]["resourceVersion"],
        namespace.metadata.resource_version,
        second["metadata"]["resourceVersion"],
    ]
    assert [int(v) for v in versions] == sorted(int(v) for v in versions)
    assert len(set(versions)) == 3


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


# --- selectors ---------------------------------------------------------------------------------


def test_label_selectors(server: FakeApiServer, api: client.ApiClient) -> None:
    for name, labels in {
        "a": {"team": "a", "tier": "gold"},
        "b": {"team": "b", "tier": "silver"},
        "c": {"team": "c"},
    }.items():
        server.put_object(cluster_queue(name, **labels))
    custom = client.CustomObjectsApi(api)

    def names(selector: str) -> list[str]:
        found = custom.list_cluster_custom_object(
            KUEUE, V, "clusterqueues", label_selector=selector
        )
        return [item["metadata"]["name"] for item in found["items"]]

    assert names("team=a") == ["a"]
    assert names("team==b") == ["b"]
    assert names("team!=a") == ["b", "c"]
    assert names("tier") == ["a", "b"]
    assert names("!tier") == ["c"]
    assert names("team in (a, c)") == ["a", "c"]
    assert names("team notin (a)") == ["b", "c"]
    assert names("team in (a,b),tier!=gold") == ["b"]
    assert names("") == ["a", "b", "c"]
    with pytest.raises(ApiException) as error:
        names("team in a")
    assert error.value.status == 400
    by_field = custom.list_cluster_custom_object(
        KUEUE, V, "clusterqueues", field_selector="metadata.name=b"
    )
    assert [item["metadata"]["name"] for item in by_field["items"]] == ["b"]


# --- watch -------------------------------------------------------------------------------------


def test_watch_from_a_list_resource_version_sees_later_changes_in_order(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("before"))
    listed = custom.list_cluster_custom_object(KUEUE, V, "clusterqueues")
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("a"))
    custom.patch_cluster_custom_object(KUEUE, V, "clusterqueues", "a", {"spec": {"x": 1}})
    custom.delete_cluster_custom_object(KUEUE, V, "clusterqueues", "before")
    client.CoreV1Api(api).create_namespace({"metadata": {"name": "other-kind"}})

    def later() -> None:
        time.sleep(0.3)
        server.put_object(cluster_queue("live"))

    threading.Thread(target=later).start()
    events = [
        (event["type"], event["object"]["metadata"]["name"], event["object"].get("spec"))
        for event in watch.Watch().stream(
            custom.list_cluster_custom_object,
            KUEUE,
            V,
            "clusterqueues",
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=1,
        )
    ]
    assert events == [
        ("ADDED", "a", {}),
        ("MODIFIED", "a", {"x": 1}),
        ("DELETED", "before", {}),
        ("ADDED", "live", {}),
    ]


def test_watch_with_a_label_selector_sees_objects_enter_and_leave(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    start = core.list_namespace().metadata.resource_version
    core.create_namespace({"metadata": {"name": "team-a", "labels": {"berth": "yes"}}})
    core.create_namespace({"metadata": {"name": "unrelated"}})
    core.patch_namespace("team-a", {"metadata": {"labels": {"berth": None}}})
    core.patch_namespace("unrelated", {"metadata": {"labels": {"berth": "yes"}}})
    seen = [
        (event["type"], event["object"].metadata.name)
        for event in watch.Watch().stream(
            core.list_namespace,
            label_selector="berth=yes",
            resource_version=start,
            timeout_seconds=1,
        )
    ]
    assert seen == [("ADDED", "team-a"), ("DELETED", "team-a"), ("ADDED", "unrelated")]


def test_watch_sends_bookmarks(server: FakeApiServer, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("a"))
    started = time.monotonic()
    stream = watch.Watch()
    events = list(
        stream.stream(
            custom.list_cluster_custom_object,
            KUEUE,
            V,
            "clusterqueues",
            allow_watch_bookmarks=True,
            timeout_seconds=3,
        )
    )
    assert time.monotonic() - started < 4
    types = [event["type"] for event in events]
    assert types[0] == "ADDED" and types[1:] in (["BOOKMARK"] * 2, ["BOOKMARK"] * 3)
    bookmark = events[1]["raw_object"]
    assert bookmark == {
        "kind": "ClusterQueue",
        "apiVersion": f"{KUEUE}/{V}",
        "metadata": {"resourceVersion": str(server.store.rv)},
    }
    assert stream.resource_version == str(server.store.rv)


def test_watch_from_an_expired_resource_version_raises_410(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(api)
    old = custom.list_cluster_custom_object(KUEUE, V, "clusterqueues")["metadata"]
    custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("a"))
    server.expire_watches()
    for extra in ({}, {"timeout_seconds": 1}):  # with and without the client's one retry
        with pytest.raises(ApiException) as error:
            list(
                watch.Watch().stream(
                    custom.list_cluster_custom_object,
                    KUEUE,
                    V,
                    "clusterqueues",
                    resource_version=old["resourceVersion"],
                    **extra,
                )
            )
        assert error.value.status == 410
    fresh = custom.list_cluster_custom_object(KUEUE, V, "clusterqueues")["metadata"]
    events = watch.Watch().stream(
        custom.list_cluster_custom_object,
        KUEUE,
        V,
        "clusterqueues",
        resource_version=fresh["resourceVersion"],
        timeout_seconds=1,
    )
    assert list(events) == []  # re-listing recovers


def test_bounded_history_expires_old_resource_versions() -> None:
    with FakeApiServer(history_limit=3) as server, server.api_client() as api:
        core = client.CoreV1Api(api)
        for index in range(5):
            core.create_namespace({"metadata": {"name": f"ns-{index}"}})
        with pytest.raises(ApiException) as error:
            list(watch.Watch().stream(core.list_namespace, resource_version="5", timeout_seconds=1))
        assert error.value.status == 410
        recent = str(server.store.rv - 2)
        names = [
            event["object"].metadata.name
            for event in watch.Watch().stream(
                core.list_namespace, resource_version=recent, timeout_seconds=1
            )
        ]
        assert names == ["ns-3", "ns-4"]


def test_expire_watches_ends_an_open_watch(server: FakeApiServer, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    start = custom.list_cluster_custom_object(KUEUE, V, "clusterqueues")["metadata"]
    threading.Timer(0.3, server.expire_watches).start()
    with pytest.raises(ApiException) as error:
        for _ in watch.Watch().stream(
            custom.list_cluster_custom_object,
            KUEUE,
            V,
            "clusterqueues",
            resource_version=start["resourceVersion"],
            timeout_seconds=5,
        ):
            pass
    assert error.value.status == 410


# --- fault injection ---------------------------------------------------------------------------


def test_fail_next_answers_an_error_status_then_recovers(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    server.fail_next("PATCH", r"/clusterqueues/team-a$", 500)
    with pytest.raises(ApiException) as error:
        apply_cq(api, cluster_queue("team-a"))
    assert error.value.status == 500 and status_of(error)["reason"] == "InternalError"
    assert server.get_object(KUEUE, "clusterqueues", "team-a") is None
    apply_cq(api, cluster_queue("team-a"))
    assert server.get_object(KUEUE, "clusterqueues", "team-a") is not None
    assert [call.method for call in server.write_calls()] == ["PATCH", "PATCH"]

    server.fail_next("PATCH", "/namespaces/team-a$", 429, body="slow down")
    with pytest.raises(ApiException) as error:
        client.CoreV1Api(api).patch_namespace("team-a", {}, field_manager="b", _content_type=APPLY)
    assert error.value.status == 429 and error.value.headers["Retry-After"] == "1"
    assert status_of(error)["message"] == "slow down"
    # urllib3 retries a GET answered 429 with Retry-After (default Retry), so the client never
    # sees this one
    server.reset_calls()
    server.fail_next("GET", "/namespaces$", 429)
    assert client.CoreV1Api(api).list_namespace().items
    assert [call.method for call in server.calls] == ["GET", "GET"]
    server.reset_calls()
    assert server.calls == []


def test_delay_next_trips_the_client_timeout(server: FakeApiServer, api: client.ApiClient) -> None:
    server.delay_next("PATCH", "/clusterqueues/slow$", 1.0)
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        apply_cq(api, cluster_queue("slow"), _request_timeout=0.2)
    # the server still finishes the write the client gave up on, as a real one may
    deadline = time.monotonic() + 3
    while server.get_object(KUEUE, "clusterqueues", "slow") is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)

    # urllib3 retries idempotent reads after a read timeout (default Retry: 3 attempts)
    server.delay_next("GET", "/clusterqueues$", 1.0, times=4)
    with pytest.raises(urllib3.exceptions.MaxRetryError):
        client.CustomObjectsApi(api).list_cluster_custom_object(
            KUEUE, V, "clusterqueues", _request_timeout=0.2
        )
    assert [call.method for call in server.calls].count("GET") == 4


# --- more fidelity -----------------------------------------------------------------------------


def test_kueue_versions_share_one_stored_object(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(api)
    old_version = cluster_queue("a", {"cohortName": "org"}) | {"apiVersion": f"{KUEUE}/v1beta1"}
    created = custom.create_cluster_custom_object(KUEUE, "v1beta1", "clusterqueues", old_version)
    assert created["apiVersion"] == f"{KUEUE}/v1beta1"
    assert custom.get_cluster_custom_object(KUEUE, V, "clusterqueues", "a")["apiVersion"] == (
        f"{KUEUE}/{V}"
    )
    old_version["metadata"]["name"] = "b"
    client.CustomObjectsApi(api).patch_cluster_custom_object(
        KUEUE,
        "v1beta1",
        "clusterqueues",
        "b",
        old_version,
        field_manager="berth",
        _content_type=APPLY,
    )
    assert [obj["metadata"]["name"] for obj in server.objects("clusterqueues")] == ["a", "b"]
    with pytest.raises(ApiException) as error:  # body and URL disagree on the version
        custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", old_version)
    assert error.value.status == 400


def test_create_refuses_a_resource_version_and_bad_names(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    body = cluster_queue("a")
    body["metadata"]["resourceVersion"] = "7"
    with pytest.raises(ApiException) as error:
        custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", body)
    assert error.value.status == 500 and "should not be set" in status_of(error)["message"]
    with pytest.raises(ApiException) as error:
        custom.create_cluster_custom_object(KUEUE, V, "clusterqueues", cluster_queue("Team_A"))
    assert error.value.status == 422 and status_of(error)["reason"] == "Invalid"


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


def test_deleting_a_namespace_deletes_its_contents(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": "team-a"}})
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    created = core.create_namespaced_pod("team-a", pod)
    assert created.status.phase == "Pending"
    core.delete_namespace("team-a")  # simplified: gone at once, no Terminating phase
    assert server.get_object("", "namespaces", "team-a") is None
    assert server.objects("pods") == []


def test_list_pages_with_limit_and_continue(server: FakeApiServer, api: client.ApiClient) -> None:
    for index in range(5):
        server.put_object(cluster_queue(f"q{index}"))
    custom, names, token = client.CustomObjectsApi(api), [], None
    while True:
        kwargs = {"_continue": token} if token else {}
        page = custom.list_cluster_custom_object(KUEUE, V, "clusterqueues", limit=2, **kwargs)
        names += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == ["q0", "q1", "q2", "q3", "q4"]


def test_watch_a_namespace_sees_other_actors(server: FakeApiServer, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    server.put_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    start = str(server.store.rv)
    workload = {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "team-a"},
        "spec": {},
    }
    server.put_object(workload)
    server.put_object(workload | {"metadata": {"name": "w", "namespace": "default"}})
    admitted = server.get_object(KUEUE, "workloads", "w", "team-a")
    assert admitted is not None
    admitted["status"] = {"admission": {"clusterQueue": "team-a"}}
    server.put_object(admitted)
    assert server.delete_object(KUEUE, "workloads", "w", "team-a")
    seen = [
        (event["type"], event["object"].get("status"))
        for event in watch.Watch().stream(
            custom.list_namespaced_custom_object,
            KUEUE,
            V,
            "team-a",
            "workloads",
            resource_version=start,
            timeout_seconds=1,
        )
    ]
    admission = {"admission": {"clusterQueue": "team-a"}}
    assert seen == [("ADDED", None), ("MODIFIED", admission), ("DELETED", admission)]


def test_stop_ends_open_watches(server: FakeApiServer) -> None:
    api = server.api_client()
    done = threading.Event()

    def run() -> None:
        with contextlib.suppress(Exception):
            list(watch.Watch().stream(client.CoreV1Api(api).list_namespace))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    time.sleep(0.3)
    server.stop()
    assert done.wait(3)
    with pytest.raises(RuntimeError):
        _ = server.url
