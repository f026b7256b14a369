"""``/api/v1/policy/kueue-configuration/``: Kueue's manager configuration as
Berth keeps it, in Kueue's camelCase shape. A round trip, revisions and
If-Match, who may read and write, history, and every validation rule: each
refusal is a 400 naming the camelCase field path and the rule, and changes
nothing (the stored configuration, its revision and the history stay as they
were). Also the ClusterQueue's ``admission_mode``."""

from __future__ import annotations

import copy
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from queues import services
from queues.errors import PolicyInvalid
from queues.models import ClusterQueue, KueueConfiguration, PolicyChange
from tests.factories import cluster_queue, flavor, gpu_groups

pytestmark = pytest.mark.django_db

URL = "/api/v1/policy/kueue-configuration/"
HISTORY = "/api/v1/policy/history/"

DEFAULTS = {
    "fairSharing": {
        "enable": False,
        "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
    },
    "admissionFairSharing": None,
    "waitForPodsReady": None,
}

ALL_ON: dict[str, Any] = {
    "fairSharing": {"enable": True, "preemptionStrategies": ["LessThanInitialShare"]},
    "admissionFairSharing": {"usageHalfLifeTime": "168h", "usageSamplingInterval": "30s"},
    "waitForPodsReady": {
        "timeout": "10m",
        "blockAdmission": True,
        "requeuingStrategy": {
            "timestamp": "Creation",
            "backoffLimitCount": 5,
            "backoffBaseSeconds": 30,
            "backoffMaxSeconds": 1800,
        },
        "recoveryTimeout": "3m",
    },
}


def put(client: APIClient, body: Any, **headers: Any) -> Any:
    return client.put(URL, body, format="json", **headers)


def settings_of(body: dict[str, Any]) -> dict[str, Any]:
    return {key: body[key] for key in ("fairSharing", "admissionFairSharing", "waitForPodsReady")}


# --------------------------------------------------------------------------- round trip


def test_before_any_save_get_answers_kueues_defaults_at_revision_0(
    admin_client: APIClient,
) -> None:
    response = admin_client.get(URL)
    assert response.status_code == 200
    body = response.json()
    assert settings_of(body) == DEFAULTS
    assert (body["revision"], body["created_at"], body["updated_at"]) == (0, None, None)
    assert response["ETag"] == '"0"'
    assert not KueueConfiguration.objects.exists()


def test_put_stores_every_setting_and_get_answers_it_back(admin_client: APIClient) -> None:
    response = put(admin_client, ALL_ON)
    assert response.status_code == 200, response.content
    body = response.json()
    expected = copy.deepcopy(ALL_ON)
    expected["waitForPodsReady"]["enable"] = True  # answered in Kueue's shape
    assert settings_of(body) == expected
    assert body["revision"] == 1 and response["ETag"] == '"1"'
    assert settings_of(admin_client.get(URL).json()) == expected
    stored = KueueConfiguration.objects.get()
    assert stored.usage_half_life_time_ns == 168 * 3600 * 10**9  # Go's nanoseconds
    assert stored.wait_for_pods_ready_timeout_ns == 600 * 10**9


def test_what_get_returns_put_back_changes_nothing(admin_client: APIClient) -> None:
    put(admin_client, ALL_ON)
    body = admin_client.get(URL).json()
    changes = PolicyChange.objects.count()
    again = put(admin_client, body, HTTP_IF_MATCH=f'"{body["revision"]}"')
    assert again.status_code == 200, again.content
    assert again.json()["revision"] == 1
    assert PolicyChange.objects.count() == changes


def test_sections_left_out_return_to_their_defaults(admin_client: APIClient) -> None:
    put(admin_client, ALL_ON)
    response = put(admin_client, {"waitForPodsReady": {}})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["fairSharing"] == DEFAULTS["fairSharing"]
    assert body["admissionFairSharing"] is None
    assert body["waitForPodsReady"] == {
        "enable": True,
        "timeout": "5m",
        "blockAdmission": False,
        "requeuingStrategy": {
            "timestamp": "Eviction",
            "backoffLimitCount": None,
            "backoffBaseSeconds": 60,
            "backoffMaxSeconds": 3600,
        },
        "recoveryTimeout": None,
    }
    sampling = put(admin_client, {"admissionFairSharing": {"usageHalfLifeTime": "1h30m"}})
    assert sampling.json()["admissionFairSharing"] == {
        "usageHalfLifeTime": "1h30m",
        "usageSamplingInterval": "5m",
    }


def test_waitforpodsready_enable_false_is_off_as_in_kueue(admin_client: APIClient) -> None:
    put(admin_client, ALL_ON)
    response = put(admin_client, {**ALL_ON, "waitForPodsReady": {"enable": False, "timeout": "1m"}})
    assert response.status_code == 200, response.content
    assert response.json()["waitForPodsReady"] is None
    stored = KueueConfiguration.objects.get()
    assert stored.wait_for_pods_ready_timeout_ns == 300 * 10**9  # off keeps no values


def test_durations_are_answered_in_the_shortest_go_form(admin_client: APIClient) -> None:
    body = {"admissionFairSharing": {"usageHalfLifeTime": "1.5h", "usageSamplingInterval": "90s"}}
    answer = put(admin_client, body).json()["admissionFairSharing"]
    assert answer == {"usageHalfLifeTime": "1h30m", "usageSamplingInterval": "1m30s"}


# --------------------------------------------------------------------------- revisions


def test_a_stale_if_match_answers_412_and_changes_nothing(admin_client: APIClient) -> None:
    put(admin_client, ALL_ON, HTTP_IF_MATCH='"0"')  # "nobody saved one yet": holds
    before = admin_client.get(URL).json()
    changes = PolicyChange.objects.count()
    response = put(admin_client, DEFAULTS, HTTP_IF_MATCH='"0"')
    assert response.status_code == 412
    assert response.json()["rule"] == "stale-revision"
    assert admin_client.get(URL).json() == before
    assert PolicyChange.objects.count() == changes
    fresh = put(admin_client, DEFAULTS, HTTP_IF_MATCH='"1"')
    assert fresh.status_code == 200 and fresh.json()["revision"] == 2


def test_if_match_on_a_configuration_nobody_saved_must_be_0(admin_client: APIClient) -> None:
    response = put(admin_client, ALL_ON, HTTP_IF_MATCH='"1"')
    assert response.status_code == 412
    assert not KueueConfiguration.objects.exists()


# --------------------------------------------------------------------------- who


@pytest.mark.parametrize("who", ["member_a", "approver", "global_approver"])
def test_everyone_signed_in_reads_and_only_admins_write(
    clients: dict[str, APIClient], who: str
) -> None:
    assert clients[who].get(URL).status_code == 200
    response = put(clients[who], ALL_ON)
    assert response.status_code == 403
    assert not KueueConfiguration.objects.exists()


def test_anonymous_callers_are_refused(clients: dict[str, APIClient]) -> None:
    assert clients["anonymous"].get(URL).status_code in (401, 403)
    assert put(clients["anonymous"], ALL_ON).status_code in (401, 403)


# --------------------------------------------------------------------------- history


def test_each_save_is_in_the_history_with_before_and_after(
    admin_client: APIClient, clients: dict[str, APIClient]
) -> None:
    put(admin_client, DEFAULTS)
    put(admin_client, {**DEFAULTS, "fairSharing": {"enable": True}})
    entries = admin_client.get(HISTORY, {"kind": "kueue-configuration"}).json()["results"]
    assert [(e["action"], e["object_name"], e["actor"]) for e in entries] == [
        ("updated", "kueue-manager-config", "admin"),
        ("created", "kueue-manager-config", "admin"),
    ]
    updated, created = entries
    assert created["before"] is None and created["after"] == DEFAULTS
    assert updated["changed_fields"] == ["fairSharing"]
    assert updated["before"]["fairSharing"]["enable"] is False
    assert updated["after"]["fairSharing"]["enable"] is True
    # The policy history is everyone's to read, this kind included.
    seen = clients["member_a"].get(HISTORY, {"kind": "kueue-configuration"}).json()
    assert seen["count"] == 2


# --------------------------------------------------------------------------- rules


def with_change(path: str, value: Any) -> dict[str, Any]:
    """ALL_ON with the value at the dotted ``path`` replaced (or removed, for ...)."""
    body = copy.deepcopy(ALL_ON)
    *parents, leaf = path.split(".")
    node = body
    for key in parents:
        node = node[key]
    if value is ...:
        del node[leaf]
    else:
        node[leaf] = value
    return body


@pytest.mark.parametrize(
    ("path", "value", "rule"),
    [
        # fairSharing
        ("fairSharing.enable", "maybe", "invalid"),
        (
            "fairSharing.preemptionStrategies",
            ["LessThanInitialShare", "LessThanOrEqualToFinalShare"],
            "unsupported-value",
        ),
        ("fairSharing.preemptionStrategies", [], "unsupported-value"),
        (
            "fairSharing.preemptionStrategies",
            ["LessThanInitialShare", "LessThanInitialShare"],
            "unsupported-value",
        ),
        ("fairSharing.preemptionStrategies[0]", ["Fairest"], "unsupported-value"),
        ("fairSharing.weight", 2, "unknown-field"),
        # admissionFairSharing
        ("admissionFairSharing.usageHalfLifeTime", ..., "required"),
        ("admissionFairSharing.usageHalfLifeTime", "a week", "duration"),
        ("admissionFairSharing.usageHalfLifeTime", "168", "duration"),
        ("admissionFairSharing.usageHalfLifeTime", "7d", "duration"),
        ("admissionFairSharing.usageHalfLifeTime", "0s", "positive"),
        ("admissionFairSharing.usageHalfLifeTime", "-1h", "positive"),
        ("admissionFairSharing.usageSamplingInterval", "0", "positive"),
        ("admissionFairSharing.usageSamplingInterval", "5 minutes", "duration"),
        ("admissionFairSharing.resourceWeights", {"cpu": 1}, "unknown-field"),
        # waitForPodsReady
        ("waitForPodsReady.timeout", "0s", "positive"),
        ("waitForPodsReady.timeout", "-5m", "positive"),
        ("waitForPodsReady.timeout", "five minutes", "duration"),
        ("waitForPodsReady.timeout", 300, "duration"),
        ("waitForPodsReady.recoveryTimeout", "0m", "positive"),
        ("waitForPodsReady.recoveryTimeout", "3", "duration"),
        ("waitForPodsReady.blockAdmission", "sometimes", "invalid"),
        ("waitForPodsReady.requeuingStrategy.timestamp", "Admission", "unsupported-value"),
        ("waitForPodsReady.requeuingStrategy.backoffLimitCount", -1, "min-value"),
        ("waitForPodsReady.requeuingStrategy.backoffLimitCount", 2**31, "max-value"),
        ("waitForPodsReady.requeuingStrategy.backoffBaseSeconds", -1, "min-value"),
        ("waitForPodsReady.requeuingStrategy.backoffBaseSeconds", "soon", "invalid"),
        ("waitForPodsReady.requeuingStrategy.backoffMaxSeconds", 0, "min-value"),
        ("waitForPodsReady.requeuingStrategy.backoffMaxSeconds", 2**31, "max-value"),
        ("waitForPodsReady.requeuingStrategy.backoffDelay", 1, "unknown-field"),
        ("waitForPodsReady.podsReadyTimeout", "5m", "unknown-field"),
        # top level
        ("integrations", {"frameworks": ["batch/job"]}, "unknown-field"),
        ("waitForPodsReady", "yes", "invalid"),
    ],
)
def test_each_rule_is_refused_at_its_camelcase_path_and_nothing_changes(
    admin_client: APIClient, path: str, value: Any, rule: str
) -> None:
    put(admin_client, DEFAULTS)
    before = admin_client.get(URL).json()
    changes = PolicyChange.objects.count()
    field = path
    if path.endswith("[0]"):  # the list's first entry is refused by itself
        path = path.removesuffix("[0]")
    response = put(admin_client, with_change(path, value))
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert {"field": field, "rule": rule} in [{k: e[k] for k in ("field", "rule")} for e in errors]
    assert all(" " in e["message"] for e in errors)  # a sentence, not a code
    assert admin_client.get(URL).json() == before
    assert PolicyChange.objects.count() == changes


def test_every_broken_rule_is_reported_at_once(admin_client: APIClient) -> None:
    body = with_change("waitForPodsReady.timeout", "0s")
    body["admissionFairSharing"]["usageSamplingInterval"] = "forever"
    body["waitForPodsReady"]["requeuingStrategy"]["backoffMaxSeconds"] = 0
    response = put(admin_client, body)
    assert response.status_code == 400
    assert {e["field"] for e in response.json()["errors"]} == {
        "waitForPodsReady.timeout",
        "admissionFairSharing.usageSamplingInterval",
        "waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
    }
    assert not KueueConfiguration.objects.exists()


def test_a_duration_message_says_what_a_go_duration_looks_like(admin_client: APIClient) -> None:
    response = put(admin_client, with_change("waitForPodsReady.timeout", "5 minutes"))
    [error] = response.json()["errors"]
    assert "Go duration" in error["message"] and "1h30m" in error["message"]


def test_the_service_refuses_what_bypasses_the_serializer() -> None:
    """The rules live in the service: a caller without the serializer (the
    dashboard uses it too, but a script might not) gets the same refusals."""
    with pytest.raises(PolicyInvalid) as refused:
        services.kueue_configuration.update(
            actor=None,
            data={
                "fairSharing": {"enable": "yes"},
                "waitForPodsReady": {"requeuingStrategy": {"backoffBaseSeconds": True}},
            },
        )
    assert {(e.field, e.rule) for e in refused.value.errors} == {
        ("fairSharing.enable", "type"),
        ("waitForPodsReady.requeuingStrategy.backoffBaseSeconds", "type"),
    }
    assert not KueueConfiguration.objects.exists()


# --------------------------------------------------------------------------- schema


def test_the_openapi_schema_documents_the_endpoint(db: Any) -> None:
    out = StringIO()
    call_command("spectacular", stdout=out)
    schema = out.getvalue()
    assert "  /api/v1/policy/kueue-configuration/:" in schema
    for name in ("KueueConfiguration:", "WaitForPodsReady:", "RequeuingStrategy:"):
        assert f"    {name}" in schema, name
    assert "backoffLimitCount:" in schema and "usageHalfLifeTime:" in schema


# --------------------------------------------------------------------------- admission mode


def test_a_cluster_queues_admission_mode_round_trips(admin_client: APIClient) -> None:
    flavor("h100")
    created = admin_client.post(
        "/api/v1/cluster-queues/",
        {
            "name": "research",
            "admission_mode": "UsageBasedAdmissionFairSharing",
            "resource_groups": gpu_groups("h100"),
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["admission_mode"] == "UsageBasedAdmissionFairSharing"
    cleared = admin_client.patch(
        "/api/v1/cluster-queues/research/", {"admission_mode": ""}, format="json"
    )
    assert cleared.json()["admission_mode"] == ""
    assert ClusterQueue.objects.get(name="research").admission_mode == ""


def test_an_unknown_admission_mode_is_refused(admin_client: APIClient) -> None:
    flavor("h100")
    cluster_queue("research", resource_groups=gpu_groups("h100"))
    response = admin_client.patch(
        "/api/v1/cluster-queues/research/", {"admission_mode": "Fairest"}, format="json"
    )
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert (error["field"], error["rule"]) == ("admission_mode", "unsupported-value")
    assert "NoAdmissionFairSharing" in error["message"]
    assert ClusterQueue.objects.get(name="research").admission_mode == ""


def test_usage_based_admission_is_taken_while_admission_fair_sharing_is_off(
    admin_client: APIClient,
) -> None:
    """Kueue accepts it (the queue then orders as without it): so does Berth."""
    flavor("h100")
    response = admin_client.post(
        "/api/v1/cluster-queues/",
        {"name": "research", "admission_mode": "UsageBasedAdmissionFairSharing"},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert admin_client.get(URL).json()["admissionFairSharing"] is None
