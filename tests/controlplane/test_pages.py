"""The browser-facing pages: sign-in, home, admin, API docs and schema."""

from __future__ import annotations

import re
import time
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from queues.models import ClusterQueue

pytestmark = pytest.mark.django_db


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_home_needs_sign_in_and_shows_the_policy(users: dict[str, Any]) -> None:
    assert Client().get("/").status_code == 302
    login = Client().post("/login/", {"username": "member-a", "password": "member-a-password"})
    assert login.status_code == 302 and login["Location"] == "/"
    page = signed_in(users["member_a"]).get("/")
    assert page.status_code == 200
    assert b"Cluster backend: <strong>simulated</strong>" in page.content
    assert b"your teams' Berth jobs running" in page.content  # a member sees their teams' jobs


def test_admin_sees_the_policy_read_only_with_history(users: dict[str, Any]) -> None:
    admin = signed_in(users["admin"])
    assert admin.get("/admin/").status_code == 200
    assert admin.get("/admin/queues/team/").status_code == 200
    team_id = users["member_a"].team_memberships.get().team_id
    page = admin.get(f"/admin/queues/team/{team_id}/change/")
    assert page.status_code == 200
    assert b'name="_save"' not in page.content  # read-only: no save button
    assert admin.get("/admin/queues/team/add/").status_code == 403
    history = admin.get("/admin/queues/policychange/")
    assert history.status_code == 200 and b"team-membership" in history.content
    assert admin.get("/admin/accounts/accessdenial/").status_code == 200
    # Members are not staff: no admin for them.
    assert signed_in(users["member_a"]).get("/admin/").status_code == 302


def test_cluster_queue_admin_shows_resource_groups(users: dict[str, Any]) -> None:
    from tests.factories import cluster_queue, flavor, gpu_groups

    flavor("h100")
    cluster_queue("q", resource_groups=gpu_groups("h100", "8"))
    page = signed_in(users["admin"]).get(
        f"/admin/queues/clusterqueue/{ClusterQueue.objects.get().pk}/change/"
    )
    assert page.status_code == 200
    assert b"nominal_quota" in page.content and b"h100" in page.content


def test_openapi_schema_is_valid_and_complete(users: dict[str, Any]) -> None:
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    schema = out.getvalue()
    for path in (
        "/api/v1/cluster-queues/",
        "/api/v1/cohorts/",
        "/api/v1/resource-flavors/",
        "/api/v1/local-queues/",
        "/api/v1/priority-classes/",
        "/api/v1/queue-classes/",
        "/api/v1/teams/{slug}/members/",
        "/api/v1/policy/history/",
        "/api/v1/tokens/",
        "/api/v1/me/",
        "/api/v1/access-denials/",
    ):
        assert f"  {path}:" in schema, path
    assert "scheme: bearer" in schema
    served = signed_in(users["member_a"]).get("/api/schema/")
    assert served.status_code == 200 and b"openapi: 3" in served.content


def test_api_docs_page_uses_bundled_assets_not_a_cdn(users: dict[str, Any]) -> None:
    page = signed_in(users["member_a"]).get("/api/docs/")
    assert page.status_code == 200
    assets = re.findall(rb'(?:src|href)="([^"]+)"', page.content)
    assert assets, "the docs page references no assets"
    assert all(not a.startswith((b"http://", b"https://", b"//")) for a in assets), assets
    script = next(a for a in assets if a.endswith(b"swagger-ui-bundle.js"))
    assert Client().get(script.decode()).status_code == 200


def test_healthz_reports_the_database(db: Any) -> None:
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "postgresql"}


def test_home_shows_the_cluster_after_a_reconcile_and_a_sync(users: dict[str, Any]) -> None:
    from cluster.snapshots import snapshot_cluster
    from cluster.sync import sync_workloads
    from queues.backends.simulated import SimulatedBackend
    from queues.reconcile import reconcile
    from queues.simulation.kueue import SimulatedKueue
    from queues.simulation.load import job

    page = signed_in(users["member_a"]).get("/")
    assert b"Not reconciled yet" in page.content
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())
    backend = SimulatedBackend()
    reconcile(backend)
    backend.create(job("research", "train", "research", 8, runtime=600))
    SimulatedKueue(backend).tick(time.time())
    sync_workloads(backend)
    snapshot_cluster(backend)

    page = signed_in(users["member_a"]).get("/")
    text = page.content.decode()
    assert re.search(r'Last reconcile <strong class="good">succeeded</strong>', text)
    assert 'data-figure-name="allocated">8<' in text
    queues = signed_in(users["member_a"]).get("/queues/").content.decode()
    row = queues[queues.index('data-queue="research"') :].split("</tr>")[0]
    assert 'data-col="usage">8<' in row
