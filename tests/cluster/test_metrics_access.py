"""Who may read GET /metrics: with BERTH_METRICS_TOKEN set, only that bearer
token (not loopback, not an admin session), every refusal recorded; without
it, loopback and platform admins only, never a forwarded address; GET only;
and the token may come from a file but must not be short."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth.models import Group
from django.test import Client

from accounts.models import AccessDenial
from tests.cluster.metrics_support import CONTENT_TYPE, URL
from tests.controlplane.test_startup import clean_env, run
from tests.factories import user
from tests.jobs.conftest import Org

TOKEN = "s3cret-metrics-token-0123456789"
REMOTE = "203.0.113.7"  # TEST-NET-3: not loopback


def test_with_a_token_set_only_the_bearer_token_opens_it(
    org: Org, client: Client, settings: Any
) -> None:
    settings.BERTH_METRICS_TOKEN = TOKEN
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}, {"HTTP_AUTHORIZATION": TOKEN}):
        response = client.get(URL, **headers)  # loopback does not help once a token is set
        assert response.status_code == 401, headers
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert b"BERTH_METRICS_TOKEN" in response.content
    client.force_login(org.users["admin"])  # nor does an admin session
    assert client.get(URL, REMOTE_ADDR=REMOTE).status_code == 401
    ok = client.get(URL, REMOTE_ADDR=REMOTE, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert ok.status_code == 200 and ok["Content-Type"] == CONTENT_TYPE
    assert client.get(URL, HTTP_AUTHORIZATION=f"bearer {TOKEN}").status_code == 200
    reasons = sorted(AccessDenial.objects.filter(path=URL).values_list("reason", flat=True))
    # A token without the Bearer scheme is no credential at all.
    assert reasons == ["bad-credentials", *["not-authenticated"] * 3]


def test_without_a_token_loopback_and_platform_admins_only(
    org: Org, client: Client, settings: Any
) -> None:
    settings.BERTH_METRICS_TOKEN = ""
    assert client.get(URL).status_code == 200  # the test client's 127.0.0.1
    assert client.get(URL, REMOTE_ADDR="::1").status_code == 200
    assert client.get(URL, REMOTE_ADDR="::ffff:127.0.0.1").status_code == 200

    refused = client.get(URL, REMOTE_ADDR=REMOTE)
    assert refused.status_code == 403
    assert refused["Content-Type"].startswith("text/plain")
    body = refused.content.decode()
    assert body.count("\n") == 1 and "set BERTH_METRICS_TOKEN" in body
    # Through a proxy on the same host the address is loopback, the header is not.
    assert client.get(URL, HTTP_X_FORWARDED_FOR=REMOTE).status_code == 403

    member = Client()
    member.force_login(org.users["alice"])
    assert member.get(URL, REMOTE_ADDR=REMOTE).status_code == 403

    admin = Client()
    admin.force_login(org.users["admin"])
    assert admin.get(URL, REMOTE_ADDR=REMOTE).status_code == 200

    grouped = user("carol")
    grouped.groups.add(Group.objects.get_or_create(name="platform-admins")[0])
    group_admin = Client()
    group_admin.force_login(grouped)
    assert group_admin.get(URL, REMOTE_ADDR=REMOTE).status_code == 200

    assert AccessDenial.objects.filter(path=URL, reason="forbidden").count() == 3


def test_only_get(db: Any, client: Client) -> None:
    assert client.post(URL).status_code == 405
    assert client.delete(URL).status_code == 405


def test_the_token_may_come_from_a_file_and_must_not_be_short(tmp_path: Path) -> None:
    show = [
        "-c",
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.BERTH_METRICS_TOKEN)",
    ]
    secret = tmp_path / "metrics-token"
    secret.write_text(TOKEN + "\n", encoding="utf-8")
    env = clean_env(tmp_path, BERTH_SECRET_KEY="k" * 40, BERTH_METRICS_TOKEN_FILE=str(secret))
    result = run(show, env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == TOKEN

    short = run(["manage.py", "check"], clean_env(tmp_path, BERTH_METRICS_TOKEN="short"))
    assert short.returncode == 2
    assert short.stderr.startswith("berth: configuration error: BERTH_METRICS_TOKEN is too short")
