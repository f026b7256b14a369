"""Topologies through the policy API, rule by rule: the Topology CRD's limits and
CEL rules (1 to 16 levels, each a node label key, no repeats, the hostname only
last, levels fixed once created), names, delete protection while a flavor
names one, and the flavor's side (a ``topology_name`` must name a topology,
and Kueue freezes it once set).

Same contract as ``test_validation_api.py`` (helpers in ``validation_support.py``):
400 naming the field and rule with nothing changed; 409 and 412 change nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from queues.models import PolicyChange, ResourceFlavor, Topology
from tests.factories import RACK_LEVELS, flavor, topology
from tests.queues.validation_support import (
    assert_refused,
    assert_unchanged,
    patch,
    post,
    snapshot,
    url,
)

pytestmark = pytest.mark.django_db

BLOCK, RACK, HOST = RACK_LEVELS
# A valid label key one character longer than the CRD's 316: a 253-character
# DNS prefix, '/', and a 63-character name.
PREFIX = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
LONGEST_KEY = f"{PREFIX}/{'n' * 63}"


# --------------------------------------------------------------------------- create, read


def test_a_topology_is_created_and_read_back_as_sent(admin_client: APIClient) -> None:
    body = {"name": "gpu-racks", "levels": RACK_LEVELS, "description": "racks of 4"}
    created = post(admin_client, "topologies", body)
    assert created.status_code == 201, created.content
    assert created.headers["ETag"] == '"1"'
    shown = admin_client.get(url("topologies", "gpu-racks")).json()
    assert {key: shown[key] for key in body} == body
    assert shown["revision"] == 1
    listed = admin_client.get(url("topologies")).json()["results"]
    assert [t["name"] for t in listed] == ["gpu-racks"]
    entry = PolicyChange.objects.get(kind="topology", object_name="gpu-racks")
    assert (entry.action, entry.actor_username, entry.after) == (
        "created",
        "admin",
        {"name": "gpu-racks", "description": "racks of 4", "levels": RACK_LEVELS},
    )


def test_one_level_is_enough(admin_client: APIClient) -> None:
    response = post(admin_client, "topologies", {"name": "hosts", "levels": [HOST]})
    assert response.status_code == 201, response.content


def test_sixteen_levels_and_the_longest_key_kueue_takes_are_accepted(
    admin_client: APIClient,
) -> None:
    levels = [f"example.com/level-{i}" for i in range(15)] + [LONGEST_KEY[:-1]]
    response = post(admin_client, "topologies", {"name": "deep", "levels": levels})
    assert response.status_code == 201, response.content
    assert Topology.objects.get(name="deep").levels == levels


def test_the_api_schema_describes_topologies(admin_client: APIClient) -> None:
    schema = admin_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert set(schema["paths"]["/api/v1/topologies/"]) >= {"get", "post"}
    assert set(schema["paths"]["/api/v1/topologies/{name}/"]) >= {
        "get",
        "put",
        "patch",
        "delete",
    }
    fields = schema["components"]["schemas"]["Topology"]
    assert "levels" in fields["required"]
    assert fields["properties"]["levels"]["type"] == "array"


# --------------------------------------------------------------------------- level rules


@pytest.mark.parametrize(
    ("levels", "field", "rule"),
    [
        ([], "levels", "min-levels"),
        ([f"example.com/l{i}" for i in range(17)], "levels", "max-levels"),
        ([BLOCK, "Rack Label"], "levels[1]", "label-key"),
        ([BLOCK, ""], "levels[1]", "label-key"),
        (["Example.com/rack"], "levels[0]", "label-key"),
        ([LONGEST_KEY], "levels[0]", "level-length"),
        ([BLOCK, RACK, BLOCK], "levels[2]", "duplicate-level"),
        ([HOST, RACK], "levels[0]", "hostname-last"),
        ([BLOCK, HOST, RACK], "levels[1]", "hostname-last"),
    ],
)
def test_level_rules(admin_client: APIClient, levels: list[str], field: str, rule: str) -> None:
    before = snapshot(admin_client)
    response = post(admin_client, "topologies", {"name": "t", "levels": levels})
    error = assert_refused(response, field, rule, before)
    if rule == "hostname-last":
        assert "kubernetes.io/hostname" in error["message"]


def test_levels_are_required(admin_client: APIClient) -> None:
    before = snapshot(admin_client)
    assert_refused(post(admin_client, "topologies", {"name": "t"}), "levels", "required", before)


def test_levels_must_be_a_list(admin_client: APIClient) -> None:
    before = snapshot(admin_client)
    response = post(admin_client, "topologies", {"name": "t", "levels": RACK})
    assert_refused(response, "levels", "not_a_list", before)


@pytest.mark.parametrize(
    ("name", "rule"),
    [("GPU_Racks", "dns-1123-subdomain"), ("-racks", "dns-1123-subdomain"), ("", "blank")],
)
def test_topology_names(admin_client: APIClient, name: str, rule: str) -> None:
    before = snapshot(admin_client)
    response = post(admin_client, "topologies", {"name": name, "levels": RACK_LEVELS})
    assert_refused(response, "name", rule, before)


def test_topology_names_are_unique(admin_client: APIClient) -> None:
    topology("gpu-racks")
    before = snapshot(admin_client)
    response = post(admin_client, "topologies", {"name": "gpu-racks", "levels": [HOST]})
    assert_refused(response, "name", "unique", before)


# --------------------------------------------------------------------------- immutability


@pytest.mark.parametrize(
    "levels",
    [[BLOCK, RACK], [RACK, BLOCK, HOST], [*RACK_LEVELS[:2], "example.com/host"]],
)
def test_levels_cannot_change_once_created(admin_client: APIClient, levels: list[str]) -> None:
    topology("gpu-racks")
    before = snapshot(admin_client, url("topologies", "gpu-racks"))
    response = patch(admin_client, "topologies", "gpu-racks", {"levels": levels})
    error = assert_refused(response, "levels", "immutable", before)
    assert "create a new topology" in error["message"]


def test_put_with_other_levels_is_refused_too(admin_client: APIClient) -> None:
    topology("gpu-racks")
    before = snapshot(admin_client, url("topologies", "gpu-racks"))
    response = admin_client.put(
        url("topologies", "gpu-racks"), {"name": "gpu-racks", "levels": [HOST]}, format="json"
    )
    assert_refused(response, "levels", "immutable", before)


def test_the_name_cannot_change(admin_client: APIClient) -> None:
    topology("gpu-racks")
    before = snapshot(admin_client, url("topologies", "gpu-racks"))
    response = patch(admin_client, "topologies", "gpu-racks", {"name": "gpu-racks-2"})
    assert_refused(response, "name", "immutable", before)


def test_the_description_may_change_and_is_recorded(admin_client: APIClient) -> None:
    topology("gpu-racks")
    got = admin_client.get(url("topologies", "gpu-racks")).json()
    response = admin_client.put(
        url("topologies", "gpu-racks"), {**got, "description": "racks"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["revision"] == 2 and response.json()["levels"] == RACK_LEVELS
    entry = PolicyChange.objects.filter(kind="topology").order_by("-pk").first()
    assert entry is not None and entry.changed_fields == ["description"]


def test_a_stale_if_match_is_refused(admin_client: APIClient) -> None:
    topology("gpu-racks")
    assert patch(admin_client, "topologies", "gpu-racks", {"description": "v2"}).status_code == 200
    before = snapshot(admin_client, url("topologies", "gpu-racks"))
    response = patch(
        admin_client, "topologies", "gpu-racks", {"description": "v3"}, HTTP_IF_MATCH='"1"'
    )
    assert response.status_code == 412, response.content
    assert response.json()["rule"] == "stale-revision"
    assert_unchanged(before)


# --------------------------------------------------------------------------- delete


def test_a_topology_a_flavor_names_cannot_be_deleted(admin_client: APIClient) -> None:
    topology("gpu-racks")
    flavor("h100", node_labels={"gpu": "h100"}, topology_name="gpu-racks")
    before = snapshot(admin_client, url("topologies", "gpu-racks"))
    response = admin_client.delete(url("topologies", "gpu-racks"))
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["rule"] == "in-use"
    assert body["references"] == {"resource_flavors": ["h100"]}
    assert "resource flavor h100" in body["detail"]
    assert_unchanged(before)


def test_an_unused_topology_is_deleted_and_recorded(admin_client: APIClient) -> None:
    topology("gpu-racks")
    flavor("h100", node_labels={"gpu": "h100"})  # names no topology
    assert admin_client.delete(url("topologies", "gpu-racks")).status_code == 204
    assert not Topology.objects.exists()
    entry = PolicyChange.objects.filter(kind="topology").order_by("-pk").first()
    assert entry is not None and (entry.action, entry.after) == ("deleted", None)


# --------------------------------------------------------------------------- the flavor side


def test_a_flavor_must_name_a_topology_that_exists(admin_client: APIClient) -> None:
    topology("gpu-racks")
    topology("pods", levels=[HOST])
    before = snapshot(admin_client)
    body = {"name": "h100", "node_labels": {"gpu": "h100"}, "topology_name": "gpu-rack"}
    error = assert_refused(
        post(admin_client, "resource-flavors", body), "topology_name", "unknown-topology", before
    )
    assert "'gpu-rack'" in error["message"] and "gpu-racks, pods" in error["message"]


def test_without_topologies_the_refusal_says_to_create_one(admin_client: APIClient) -> None:
    flavor("h100", node_labels={"gpu": "h100"})
    before = snapshot(admin_client, url("resource-flavors", "h100"))
    response = patch(admin_client, "resource-flavors", "h100", {"topology_name": "gpu-racks"})
    error = assert_refused(response, "topology_name", "unknown-topology", before)
    assert "no topologies yet" in error["message"]


def test_a_flavor_takes_a_topology_later_and_kueue_then_freezes_it(
    admin_client: APIClient,
) -> None:
    topology("gpu-racks")
    topology("hosts", levels=[HOST])
    flavor("h100", node_labels={"gpu": "h100"})
    response = patch(admin_client, "resource-flavors", "h100", {"topology_name": "gpu-racks"})
    assert response.status_code == 200, response.content
    assert ResourceFlavor.objects.get(name="h100").topology_name == "gpu-racks"
    for change in (
        {"topology_name": "hosts"},
        {"topology_name": ""},
        {"node_labels": {"gpu": "h200"}},
        {"tolerations": [{"operator": "Exists"}]},
    ):
        before = snapshot(admin_client, url("resource-flavors", "h100"))
        response = patch(admin_client, "resource-flavors", "h100", change)
        [field] = change
        assert_refused(response, field, "immutable", before)
    described = patch(admin_client, "resource-flavors", "h100", {"description": "racked"})
    assert described.status_code == 200, described.content


def test_a_malformed_topology_name_gets_its_own_error_only(admin_client: APIClient) -> None:
    before = snapshot(admin_client)
    body: dict[str, Any] = {"name": "h100", "node_labels": {"gpu": "x"}, "topology_name": "Racks"}
    response = post(admin_client, "resource-flavors", body)
    assert_refused(response, "topology_name", "dns-1123-subdomain", before)
    assert [e["rule"] for e in response.json()["errors"]] == ["dns-1123-subdomain"]
