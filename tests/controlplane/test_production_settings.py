"""Production settings can be made safe, and the production overlay makes them
so: `manage.py check --deploy --fail-level WARNING` passes with the overlay's
settings, HTTP is redirected (the probes' /healthz excepted), cookies are
Secure, and every answer carries the Content-Security-Policy."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client

from controlplane.content_security import POLICY
from tests.factories import user

REPO = Path(__file__).resolve().parents[2]


def production_overlay_settings() -> dict[str, str]:
    """The BERTH_* literals the production overlay merges into berth-config."""
    kustomization = yaml.safe_load(
        (REPO / "deploy/overlays/production/kustomization.yaml").read_text()
    )
    literals = kustomization["configMapGenerator"][0]["literals"]
    return dict(literal.split("=", 1) for literal in literals)


def check_deploy(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BERTH_SECRET_KEY": secrets.token_urlsafe(50), **extra}
    env.pop("BERTH_DEBUG", None)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_check_deploy_passes_with_the_production_overlay() -> None:
    overlay = production_overlay_settings()
    assert overlay["BERTH_SECURE_COOKIES"] == "true"
    result = check_deploy(overlay)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_names_what_is_missing_without_them() -> None:
    result = check_deploy({"BERTH_ALLOWED_HOSTS": "berth.example.com"})
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr + result.stdout


@pytest.fixture
def behind_tls(settings: Any) -> None:
    settings.SECURE_SSL_REDIRECT = True
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")


def test_plain_http_is_redirected_but_the_probe_is_not(db: Any, behind_tls: None) -> None:
    browser = Client()
    redirected = browser.get("/login/")
    assert redirected.status_code == 301
    assert redirected["Location"] == "https://testserver/login/"
    assert browser.get("/healthz").status_code in (200, 503)  # answered, not redirected
    over_tls = browser.get("/login/", HTTP_X_FORWARDED_PROTO="https")
    assert over_tls.status_code == 200
    assert over_tls["Strict-Transport-Security"].startswith("max-age=31536000")


def test_the_session_cookie_is_secure_behind_tls(db: Any, behind_tls: None) -> None:
    user("hana")
    browser = Client()
    signed_in = browser.post(
        "/login/",
        {"username": "hana", "password": "hana-password"},
        HTTP_X_FORWARDED_PROTO="https",
    )
    assert signed_in.status_code == 302
    assert signed_in.cookies["sessionid"]["secure"]


@pytest.mark.parametrize("path", ["/login/", "/api/v1/me/", "/api/docs/", "/healthz"])
def test_every_answer_carries_the_content_security_policy(db: Any, path: str) -> None:
    response = Client().get(path)
    assert response["Content-Security-Policy"] == POLICY
    directives = dict(d.strip().split(" ", 1) for d in POLICY.split(";"))
    assert directives["script-src"] == "'self'"  # no inline or injected script runs
    assert directives["frame-ancestors"] == "'none'"
