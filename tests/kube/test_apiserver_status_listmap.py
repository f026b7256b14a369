"""Status list-maps on the API-server double, through the real ``kubernetes`` client: a
Workload's ``status.admissionChecks`` (keyed by ``name``) and ``conditions`` (keyed by
``type``) are shared by several controllers, so server-side apply merges them entry by entry,
tracks who owns each entry and refuses another manager's entry unless forced; and status
writes of Workloads meet the CRD's rules (maxItems, required fields, the state enum, the
message's maxLength) or get the API server's 422."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kube.apiserver import FakeApiServer
from tests.kube.apiserver_listmaps import (
    CHECK_REQUIRED,
    CHECK_STATES,
    LIST_MAPS,
    MAX_CHECKS,
    MAX_MESSAGE,
)
from tests.kube.client_helpers import APPLY, KUEUE, V, status_of
from tests.kueue.crds import schema

MERGE = "application/merge-patch+json"
AT = "2026-05-01T10:00:00Z"
LATER = "2026-05-01T10:05:00Z"
BERTH_ENTRY = 'k:{"name":"berth-approval"}'
ENTRY_FIELDS: dict[str, Any] = {
    ".": {},
    "f:lastTransitionTime": {},
    "f:message": {},
    "f:name": {},
    "f:state": {},
}


def check(name: str, state: str = "Pending", message: str = "", at: str = AT) -> dict[str, Any]:
    return {"name": name, "state": state, "message": message, "lastTransitionTime": at}


def condition(kind: str, reason: str, at: str = AT) -> dict[str, Any]:
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": "",
        "lastTransitionTime": at,
    }


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    api_client = client.CustomObjectsApi(api)
    workload = {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "default"},
        "spec": {"queueName": "urgent", "podSets": [{"name": "main", "count": 1}]},
    }
    api_client.create_namespaced_custom_object(KUEUE, V, "default", "workloads", workload)
    return api_client


def kueue_sets(custom: client.CustomObjectsApi, status: dict[str, Any]) -> Any:
    """Kueue's own write: a merge patch of the status (an Update, manager kueue)."""
    return custom.patch_namespaced_custom_object_status(
        KUEUE, V, "default", "workloads", "wl", {"status": status},
        field_manager="kueue", _content_type=MERGE,
    )  # fmt: skip


def apply_status(
    custom: client.CustomObjectsApi,
    status: dict[str, Any],
    manager: str = "berth",
    force: bool = True,
) -> Any:
    """A check controller's write: server-side apply of the entries it owns."""
    body = {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "default"},
        "status": status,
    }
    return custom.patch_namespaced_custom_object_status(
        KUEUE, V, "default", "workloads", "wl", body,
        field_manager=manager, force=force, _content_type=APPLY,
    )  # fmt: skip


def stored(server: FakeApiServer) -> dict[str, Any]:
    obj = server.get_object(KUEUE, "workloads", "wl", "default")
    assert obj is not None
    return obj


def status_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``fieldsV1`` of the status subresource's managers, by manager/operation."""
    return {
        f"{entry['manager']}/{entry['operation']}": entry["fieldsV1"]["f:status"]
        for entry in obj["metadata"].get("managedFields", [])
        if entry.get("subresource") == "status"
    }


def reserved(custom: client.CustomObjectsApi) -> None:
    """Kueue reserves quota and adds both checks, Pending."""
    kueue_sets(
        custom,
        {
            "conditions": [condition("QuotaReserved", "QuotaReserved")],
            "admissionChecks": [check("berth-approval"), check("provision-gpus")],
        },
    )


# --- merge by key, ownership per entry ---------------------------------------------------------


def test_an_applied_entry_merges_by_key_and_keeps_the_other_controllers_entries(
    server: FakeApiServer, custom: client.CustomObjectsApi
) -> None:
    reserved(custom)
    apply_status(
        custom, {"admissionChecks": [check("provision-gpus", "Ready", "capacity provisioned")]},
        manager="provisioning",
    )  # fmt: skip
    answer = apply_status(custom, {"admissionChecks": [check("berth-approval", "Ready", "ok")]})
    assert answer["status"]["admissionChecks"] == [
        check("berth-approval", "Ready", "ok"),  # replaced in place: the order is kept
        check("provision-gpus", "Ready", "capacity provisioned"),
    ]
    obj = stored(server)
    assert obj["status"]["conditions"] == [condition("QuotaReserved", "QuotaReserved")]
    owned = status_fields(obj)
    assert owned["berth/Apply"] == {"f:admissionChecks": {BERTH_ENTRY: ENTRY_FIELDS}}
    assert owned["provisioning/Apply"] == {
        "f:admissionChecks": {'k:{"name":"provision-gpus"}': ENTRY_FIELDS}
    }
    # Kueue keeps what nobody took from it: its condition, no longer the two checks
    assert owned["kueue/Update"] == {
        "f:conditions": {
            'k:{"type":"QuotaReserved"}': {
                ".": {},
                "f:lastTransitionTime": {},
                "f:message": {},
                "f:reason": {},
                "f:status": {},
                "f:type": {},
            }
        }
    }
    [berth] = [e for e in obj["metadata"]["managedFields"] if e["manager"] == "berth"]
    assert (berth["operation"], berth["subresource"]) == ("Apply", "status")
    assert berth["apiVersion"] == f"{KUEUE}/{V}"

    # the same configuration again changes nothing; a new state replaces the entry
    rv = obj["metadata"]["resourceVersion"]
    apply_status(custom, {"admissionChecks": [check("berth-approval", "Ready", "ok")]})
    assert stored(server)["metadata"]["resourceVersion"] == rv
    rejected = check("berth-approval", "Rejected", "no", LATER)
    checks = apply_status(custom, {"admissionChecks": [rejected]})["status"]["admissionChecks"]
    assert checks == [rejected, check("provision-gpus", "Ready", "capacity provisioned")]


def test_another_managers_entry_is_a_409_conflict_unless_forced(
    server: FakeApiServer, custom: client.CustomObjectsApi
) -> None:
    reserved(custom)
    before = stored(server)
    with pytest.raises(ApiException) as error:
        apply_status(custom, {"admissionChecks": [check("berth-approval", "Ready")]}, force=False)
    assert error.value.status == 409
    body = status_of(error)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Apply failed with 1 conflict: conflict with "kueue": '
        '.status.admissionChecks[name="berth-approval"]'
    )
    assert body["details"]["causes"] == [
        {
            "type": "FieldManagerConflict",
            "message": 'conflict with "kueue"',
            "field": '.status.admissionChecks[name="berth-approval"]',
        }
    ]
    assert stored(server) == before

    # the value Kueue wrote is no conflict: both own the entry then
    apply_status(custom, {"admissionChecks": [check("berth-approval")]}, force=False)
    owned = status_fields(stored(server))
    assert BERTH_ENTRY in owned["berth/Apply"]["f:admissionChecks"]
    assert BERTH_ENTRY in owned["kueue/Update"]["f:admissionChecks"]

    # forced, the entry moves to berth; Kueue keeps the entry it still alone owns
    apply_status(custom, {"admissionChecks": [check("berth-approval", "Ready")]})
    owned = status_fields(stored(server))
    assert list(owned["berth/Apply"]["f:admissionChecks"]) == [BERTH_ENTRY]
    assert list(owned["kueue/Update"]["f:admissionChecks"]) == ['k:{"name":"provision-gpus"}']

    # Kueue resetting the check (an eviction) takes the entry back, and only that entry
    kueue_sets(
        custom, {"admissionChecks": [check("berth-approval", at=LATER), check("provision-gpus")]}
    )
    owned = status_fields(stored(server))
    assert "berth/Apply" not in owned  # berth owns nothing any more
    assert sorted(owned["kueue/Update"]["f:admissionChecks"]) == [
        BERTH_ENTRY,
        'k:{"name":"provision-gpus"}',
    ]


def test_an_entry_left_out_of_the_next_apply_goes_unless_another_manager_owns_it(
    server: FakeApiServer, api: client.ApiClient
) -> None:
    custom = client.CustomObjectsApi(api)
    head: dict[str, Any] = {"apiVersion": f"{KUEUE}/{V}", "kind": "AdmissionCheck"}
    head["metadata"] = {"name": "berth-approval"}
    custom.patch_cluster_custom_object(
        KUEUE, V, "admissionchecks", "berth-approval",
        head | {"spec": {"controllerName": "berth.dev/approval"}},
        field_manager="berth", force=True, _content_type=APPLY,
    )  # fmt: skip

    def apply_conditions(*conditions: dict[str, Any]) -> Any:
        return custom.patch_cluster_custom_object_status(
            KUEUE, V, "admissionchecks", "berth-approval",
            head | {"status": {"conditions": list(conditions)}},
            field_manager="berth", force=True, _content_type=APPLY,
        )  # fmt: skip

    active, extra = condition("Active", "Active"), condition("Extra", "Testing")
    apply_conditions(active, extra)
    theirs = condition("SingleInstanceInClusterQueue", "Kueue")
    custom.patch_cluster_custom_object_status(
        KUEUE, V, "admissionchecks", "berth-approval",
        {"status": {"conditions": [active, extra, theirs]}},
        field_manager="kueue", _content_type=MERGE,
    )  # fmt: skip
    answer = apply_conditions(active)
    assert answer["status"]["conditions"] == [active, theirs]
    obj = server.get_object(KUEUE, "admissionchecks", "berth-approval")
    assert obj is not None
    owned = status_fields(obj)
    assert list(owned["berth/Apply"]["f:conditions"]) == ['k:{"type":"Active"}']
    assert list(owned["kueue/Update"]["f:conditions"]) == [
        'k:{"type":"SingleInstanceInClusterQueue"}'
    ]
    # the last entry gone leaves no empty list behind
    custom.patch_cluster_custom_object_status(
        KUEUE, V, "admissionchecks", "berth-approval", {"status": {"conditions": [active]}},
        field_manager="kueue", _content_type=MERGE,
    )  # fmt: skip
    answer = apply_conditions()
    assert "conditions" not in answer.get("status", {})


# --- validation --------------------------------------------------------------------------------


def refused(server: FakeApiServer, write: Any) -> dict[str, Any]:
    """Run ``write``, expect a 422 that stores nothing, return its Status."""
    rv = server.store.rv
    with pytest.raises(ApiException) as error:
        write()
    assert error.value.status == 422
    assert server.store.rv == rv
    body = status_of(error)
    assert body["reason"] == "Invalid"
    assert (body["details"]["name"], body["details"]["kind"]) == ("wl", "Workload")
    assert body["details"]["group"] == KUEUE
    return body


def causes(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in body["details"]["causes"]]


def test_a_bad_state_is_refused_with_the_field_path_and_the_supported_values(
    server: FakeApiServer, custom: client.CustomObjectsApi
) -> None:
    reserved(custom)
    body = refused(
        server,
        lambda: apply_status(custom, {"admissionChecks": [check("berth-approval", "Approved")]}),
    )
    assert body["message"] == (
        'Workload.kueue.x-k8s.io "wl" is invalid: status.admissionChecks[0].state: '
        'Unsupported value: "Approved": supported values: "Pending", "Ready", "Retry", "Rejected"'
    )
    assert causes(body) == [("status.admissionChecks[0].state", "FieldValueNotSupported")]


def test_required_fields_and_the_message_length(
    server: FakeApiServer, custom: client.CustomObjectsApi
) -> None:
    reserved(custom)
    body = refused(
        server,
        lambda: apply_status(custom, {"admissionChecks": [{"name": "berth-approval"}]}),
    )
    assert causes(body) == [
        ("status.admissionChecks[0].lastTransitionTime", "FieldValueRequired"),
        ("status.admissionChecks[0].message", "FieldValueRequired"),
        ("status.admissionChecks[0].state", "FieldValueRequired"),
    ]
    assert body["message"].startswith(
        'Workload.kueue.x-k8s.io "wl" is invalid: [status.admissionChecks[0].lastTransitionTime: '
        "Required value, status.admissionChecks[0].message: Required value, "
    )

    too_long = check("berth-approval", "Ready", "x" * (MAX_MESSAGE + 1))
    body = refused(server, lambda: apply_status(custom, {"admissionChecks": [too_long]}))
    assert causes(body) == [("status.admissionChecks[0].message", "FieldValueTooLong")]
    assert "Too long: may not be more than 32768 bytes" in body["message"]
    # maxLength counts characters: 32768 three-byte characters pass
    longest = check("berth-approval", "Ready", "€" * MAX_MESSAGE)
    assert apply_status(custom, {"admissionChecks": [longest]})["status"]["admissionChecks"][0] == (
        longest
    )

    body = refused(
        server,
        lambda: apply_status(custom, {"admissionChecks": [check("berth-approval", at="now")]}),
    )
    assert causes(body) == [("status.admissionChecks[0].lastTransitionTime", "FieldValueInvalid")]
    assert 'Invalid value: "now"' in body["message"] and "date-time" in body["message"]


def test_at_most_eight_checks_counting_the_merged_result(
    server: FakeApiServer, custom: client.CustomObjectsApi
) -> None:
    seven = [check(f"check-{n}") for n in range(MAX_CHECKS - 1)]
    kueue_sets(custom, {"admissionChecks": seven})
    apply_status(custom, {"admissionChecks": [check("berth-approval")]})  # the eighth
    body = refused(
        server,
        lambda: apply_status(custom, {"admissionChecks": [check("one-more")]}, manager="other"),
    )
    assert body["message"] == (
        'Workload.kueue.x-k8s.io "wl" is invalid: status.admissionChecks: '
        "Too many: 9: must have at most 8 items"
    )
    assert causes(body) == [("status.admissionChecks", "FieldValueTooMany")]
    body = refused(  # a merge patch is held to the same rules
        server, lambda: kueue_sets(custom, {"admissionChecks": [*seven, check("a"), check("b")]})
    )
    assert causes(body) == [("status.admissionChecks", "FieldValueTooMany")]


def test_list_map_keys_are_required_and_unique(
    server: FakeApiServer, custom: client.CustomObjectsApi
) -> None:
    twice = [check("berth-approval"), check("berth-approval", "Ready")]
    body = refused(server, lambda: apply_status(custom, {"admissionChecks": twice}))
    assert causes(body) == [("status.admissionChecks[1]", "FieldValueDuplicate")]
    assert 'Duplicate value: map[string]interface {}{"name":"berth-approval"}' in body["message"]
    nameless = {k: v for k, v in check("x").items() if k != "name"}
    body = refused(server, lambda: kueue_sets(custom, {"admissionChecks": [nameless]}))
    assert causes(body) == [("status.admissionChecks[0].name", "FieldValueRequired")]
    body = refused(
        server,
        lambda: kueue_sets(custom, {"conditions": [condition("A", "X"), condition("A", "Y")]}),
    )
    assert causes(body) == [("status.conditions[1]", "FieldValueDuplicate")]


def test_the_double_knows_the_list_maps_and_rules_of_the_kueue_crds() -> None:
    for (_, kind), fields in LIST_MAPS.items():
        status = schema(kind)["properties"]["status"]["properties"]
        for field, key in fields.items():
            assert status[field]["x-kubernetes-list-type"] == "map", (kind, field)
            assert status[field]["x-kubernetes-list-map-keys"] == [key], (kind, field)
    checks = schema("Workload")["properties"]["status"]["properties"]["admissionChecks"]
    assert checks["maxItems"] == MAX_CHECKS
    item = checks["items"]
    assert tuple(item["required"]) == CHECK_REQUIRED
    assert tuple(item["properties"]["state"]["enum"]) == CHECK_STATES
    assert item["properties"]["message"]["maxLength"] == MAX_MESSAGE
