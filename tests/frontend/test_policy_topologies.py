"""Topologies in the policy editor: listed on /policy/ with their levels in
words, created from the index page's form (Plan first, then Create), refused
naming the level that breaks a rule, edited with their levels shown read-only
(Kueue fixes them), deleted only once no flavor names them; and the flavor
form, which offers the topologies for ``topology_name`` and then shows what
Kueue freezes as read-only. Forms are read and posted as a browser would
(``policy_editor_support.form_data``)."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client

from queues.models import PolicyChange, ResourceFlavor, Topology
from tests.factories import RACK_LEVELS, flavor, topology
from tests.frontend.policy_editor_support import admin, footprint, form_data, org, text

__all__ = ["admin", "org"]  # fixtures, imported for pytest to find

HOST = "kubernetes.io/hostname"
URL = "/policy/topology/gpu-racks/"


def visible(html: str) -> str:
    """The page's text, without tags, scripts or attribute values."""
    html = re.sub(r"<script.*?</script>", "", html, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_index_lists_topologies_with_their_levels_in_order(
    org: dict[str, Any], admin: Client
) -> None:
    topology("gpu-racks", description="blocks of racks")
    flavor("h100-racked", node_labels={"gpu": "h100"}, topology_name="gpu-racks")
    page = text(admin.get("/policy/"))
    words = visible(page)
    assert (
        "gpu-racks blocks of racks topology.berth.dev/block › topology.berth.dev/rack › "
        "kubernetes.io/hostname h100-racked Edit" in words
    )
    assert "['" not in words and "[]" not in words  # no Python lists on the page
    assert 'href="/policy/topology/gpu-racks/"' in page
    assert 'href="/policy/flavor/h100-racked/"' in page
    assert 'action="/policy/new/topology/"' in page
    assert 'href="/policy/#topologies"' in page  # in the editor's navigation
    # The new-flavor form offers the topology.
    new_flavor = form_data(page, "new-flavor")
    assert new_flavor["topology_name"] == ""
    assert '<option value="gpu-racks">gpu-racks</option>' in page


def test_a_topology_is_planned_then_created_from_the_index_form(
    org: dict[str, Any], admin: Client
) -> None:
    data = form_data(text(admin.get("/policy/")), "new-topology")
    data.update(name="gpu-racks", levels="\n".join(RACK_LEVELS) + "\n", action="plan")
    before = footprint()
    response = admin.post("/policy/new/topology/", data)
    assert response.status_code == 200
    [change] = response.context["plan"].changes
    assert (change.action, change.kind, change.name) == ("create", "Topology", "gpu-racks")
    assert "nodeLabel: topology.berth.dev/rack" in change.manifest
    assert footprint() == before and not Topology.objects.exists()

    response = admin.post("/policy/new/topology/", {**data, "action": "apply"})
    assert response.status_code == 302
    assert Topology.objects.get(name="gpu-racks").levels == RACK_LEVELS
    entry = PolicyChange.objects.get(kind="topology", object_name="gpu-racks")
    assert (entry.action, entry.actor) == ("created", org["admin"])
    assert response["Location"] == f"{URL}?applied={entry.pk}"
    shown = visible(text(admin.get(response["Location"])))
    assert "Applied." in shown
    assert "['" not in shown


def test_a_refused_topology_names_the_level(admin: Client) -> None:
    before = footprint()
    response = admin.post(
        "/policy/new/topology/",
        {"name": "bad", "levels": f"{HOST}\ntopology.berth.dev/rack", "action": "plan"},
    )
    assert response.status_code == 200
    assert [(e.field, e.rule) for e in response.context["errors"]] == [
        ("levels[0]", "hostname-last")
    ]
    assert 'name="levels" rows="3" class="invalid"' in text(response)
    assert footprint() == before and not Topology.objects.exists()
    response = admin.post("/policy/new/topology/", {"name": "none", "action": "plan"})
    assert [(e.field, e.rule) for e in response.context["errors"]] == [("levels", "required")]


def test_the_edit_form_shows_levels_read_only_and_changes_the_description(
    org: dict[str, Any], admin: Client
) -> None:
    topology("gpu-racks")
    page = text(admin.get(URL))
    assert re.search(r'<textarea name="levels" rows="3" readonly>\s*topology.berth.dev/block', page)
    assert "Kueue fixes a topology&#x27;s levels once it exists" in page
    data = form_data(page)
    assert "levels" not in data  # read-only: nothing to change
    response = admin.post(URL, {**data, "description": "16 nodes a block", "action": "apply"})
    assert response.status_code == 302
    stored = Topology.objects.get(name="gpu-racks")
    assert (stored.description, stored.levels, stored.revision) == (
        "16 nodes a block",
        RACK_LEVELS,
        2,
    )
    # A crafted post with other levels is refused by the same rule as the API.
    again = form_data(text(admin.get(URL)))
    response = admin.post(URL, {**again, "levels": HOST, "action": "plan"})
    assert [(e.field, e.rule) for e in response.context["errors"]] == [("levels", "immutable")]


def test_deleting_a_topology_waits_until_no_flavor_names_it(
    org: dict[str, Any], admin: Client
) -> None:
    topology("gpu-racks")
    flavor("h100-racked", node_labels={"gpu": "h100"}, topology_name="gpu-racks")
    revision = str(Topology.objects.get(name="gpu-racks").revision)
    response = admin.post(URL, {"action": "plan-delete", "revision": revision})
    assert response.status_code == 200
    assert "still used by resource flavor h100-racked" in text(response)
    assert Topology.objects.filter(name="gpu-racks").exists()

    ResourceFlavor.objects.get(name="h100-racked").delete()  # as if deleted first
    response = admin.post(URL, {"action": "plan-delete", "revision": revision})
    [change] = response.context["plan"].changes
    assert (change.action, change.kind, change.name) == ("delete", "Topology", "gpu-racks")
    response = admin.post(URL, {"action": "delete", "revision": revision})
    assert response.status_code == 302
    assert not Topology.objects.exists()


def test_the_flavor_form_offers_topologies_and_then_shows_what_kueue_freezes(
    org: dict[str, Any], admin: Client
) -> None:
    topology("gpu-racks")
    flavor_url = "/policy/flavor/h100/"
    page = text(admin.get(flavor_url))
    assert '<option value="gpu-racks">gpu-racks</option>' in page
    data = form_data(page)
    assert data["topology_name"] == ""
    data.update(node_labels="gpu=h100", topology_name="gpu-racks", action="plan")
    [change] = admin.post(flavor_url, data).context["plan"].changes
    assert {f.path: f.new for f in change.fields} == {
        "spec.nodeLabels": {"gpu": "h100"},
        "spec.topologyName": "gpu-racks",
    }
    assert admin.post(flavor_url, {**data, "action": "apply"}).status_code == 302
    assert ResourceFlavor.objects.get(name="h100").topology_name == "gpu-racks"

    page = text(admin.get(flavor_url))
    assert '<input name="topology_name" value="gpu-racks" readonly>' in page
    assert re.search(r'<textarea name="node_labels" rows="3" readonly>\s*gpu=h100', page)
    assert "Kueue fixes it once topology_name is set" in page
    data = form_data(page)
    response = admin.post(flavor_url, {**data, "description": "racked", "action": "apply"})
    assert response.status_code == 302
    assert ResourceFlavor.objects.get(name="h100").description == "racked"
    # The index links the flavor's topology.
    assert 'href="/policy/topology/gpu-racks/">gpu-racks</a>' in text(admin.get("/policy/"))


def test_history_links_a_topologys_changes_to_its_page(admin: Client) -> None:
    topology("gpu-racks")
    response = admin.get("/policy/")
    [row] = [r for r in response.context["history_rows"] if r["entry"].kind == "topology"]
    assert row["link"] == URL
    assert [(c.path, c.new_text) for c in row["changes"]] == [
        ("name", "gpu-racks"),
        ("levels", "topology.berth.dev/block, topology.berth.dev/rack, kubernetes.io/hostname"),
    ]
    shown = visible(text(response))
    assert "levels : topology.berth.dev/block, topology.berth.dev/rack, " in shown
