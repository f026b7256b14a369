"""The API-server double's discovery documents and plain CRUD, driven through the real
``kubernetes`` client over HTTP: what is served, create/get/list/replace/delete, namespaces,
finalizers, the status subresource and optimistic concurrency. Split from the double's other
tests (apply and patches, list and watch, faults) to keep each module readable."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient

from tests.kube.apiserver import FakeApiServer
from tests.kube.client_helpers import APPLY, KUEUE, V, cluster_queue, status_of

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
