"""The API-server double's reads that span many objects, driven through the real
``kubernetes`` client over HTTP: label and field selectors, paged lists, and watches
(ordering, selector enter/leave, bookmarks, 410 Gone, bounded history, stopping). Watches
are timing-sensitive, so they sit together in one module of their own."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.kube.apiserver import FakeApiServer
from tests.kube.client_helpers import KUEUE, V, cluster_queue

# --- selectors and paging ----------------------------------------------------------------------


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
        server.wait_for_watches()  # "live" arrives live, not in the replay
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


def test_stop_ends_open_watches(server: FakeApiServer) -> None:
    api = server.api_client()
    done = threading.Event()

    def run() -> None:
        with contextlib.suppress(Exception):
            list(watch.Watch().stream(client.CoreV1Api(api).list_namespace))
        done.set()

    threading.Thread(target=run, daemon=True).start()
    server.wait_for_watches()  # stopping a server with no watch open would prove nothing
    server.stop()
    assert done.wait(3)
    with pytest.raises(RuntimeError):
        _ = server.url
