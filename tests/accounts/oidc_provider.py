"""A real OpenID Connect provider on loopback for the single sign-on tests:
``oidc-provider-mock`` (authlib's authorization server in Flask), served from
a thread. Berth talks to it over HTTP exactly as to Keycloak or Okta:
discovery, the authorization endpoint, the token endpoint with the client's
secret, JWKS-signed RS256 ID tokens, userinfo.

- ``provider``: the running provider; Berth is registered as a confidential
  client (dynamic registration) with one exact redirect URI.
- ``Provider.set_user(sub, ...)``: the person's claims, groups included; change
  them between sign-ins as an IdP admin would.
- ``sso_on(settings, provider, ...)``: Berth's settings as the environment
  would give them (``accounts.sso_config`` reads them, like settings.py).
- ``sign_in(client, provider, sub)``: the code flow with Django's test client
  as the browser: Berth's redirect, the provider's authorize form answered as
  a person would (POST sub), and the callback. The browser test
  (tests/browser/test_oidc_browser.py) drives the same flow in Chromium.
"""

from __future__ import annotations

import importlib
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.test import Client

from accounts import oidc
from accounts.sso_config import authentication_backends, read_account_settings
from controlplane.env import Env

with warnings.catch_warnings():
    # The provider's own imports warn of authlib's deprecations: not Berth's concern.
    # authlib turns its warnings to "always" when imported; this filter goes after.
    importlib.import_module("authlib.deprecate")
    warnings.simplefilter("ignore", DeprecationWarning)
    from oidc_provider_mock import run_server_in_thread

# For the test modules: authlib warns at every ID token the provider signs.
QUIET_PROVIDER = pytest.mark.filterwarnings("ignore:get_jwt_config:DeprecationWarning")

PROVIDER_NAME = "Acme ID"
# The map the tests use: each kind of role once, and a viewer group.
GROUP_MAP = {
    "berth-admins": "platform-admin",
    "gpu-approvers": "approver",
    "ml-research": "team:research",
    "research-leads": ["team:research:approver"],
    "vision": "team:vision",
    "staff": "viewer",
}


@dataclass
class Provider:
    issuer: str
    client_id: str = ""
    client_secret: str = ""

    def register(self, redirect_uri: str) -> None:
        """Register Berth as a confidential client with this exact redirect URI."""
        answer = requests.post(
            f"{self.issuer}/oauth2/clients",
            json={
                "redirect_uris": [redirect_uri],
                "token_endpoint_auth_method": "client_secret_basic",
            },
            timeout=10,
        )
        answer.raise_for_status()
        self.client_id = answer.json()["client_id"]
        self.client_secret = answer.json()["client_secret"]

    def set_user(
        self, sub: str, *, username: str | None = None, groups: list[str], **claims: Any
    ) -> None:
        body = {
            "preferred_username": username or sub,
            "email": f"{username or sub}@example.com",
            "groups": groups,
            **claims,
        }
        requests.put(f"{self.issuer}/users/{sub}", json=body, timeout=10).raise_for_status()


@contextmanager
def running_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[Provider]:
    # authlib refuses plain http unless told it is a test; the provider is on loopback.
    monkeypatch.setenv("AUTHLIB_INSECURE_TRANSPORT", "1")
    with run_server_in_thread(require_client_registration=True) as server:
        oidc.forget_discovery()
        yield Provider(issuer=f"http://localhost:{server.server_port}")
    oidc.forget_discovery()


def sso_environment(provider: Provider, **extra: str) -> dict[str, str]:
    return {
        "BERTH_OIDC_ISSUER": provider.issuer,
        "BERTH_OIDC_CLIENT_ID": provider.client_id,
        "BERTH_OIDC_CLIENT_SECRET": provider.client_secret,
        "BERTH_OIDC_GROUP_MAP": json.dumps(GROUP_MAP),
        "BERTH_OIDC_PROVIDER_NAME": PROVIDER_NAME,
        **extra,
    }


def sso_on(settings: Any, provider: Provider, **extra: str) -> None:
    """Berth's settings for this provider, read from an environment the way
    controlplane/settings.py reads the real one."""
    accounts = read_account_settings(Env(sso_environment(provider, **extra)))
    settings.BERTH_SSO = accounts.sso
    settings.BERTH_LOCAL_ACCOUNTS = accounts.local_accounts
    settings.AUTHENTICATION_BACKENDS = authentication_backends(accounts)


def start(client: Client, next_url: str = "") -> str:
    """Berth's redirect to the provider: the authorization URL."""
    response = client.get("/oidc/authenticate/" + (f"?next={next_url}" if next_url else ""))
    assert response.status_code == 302, response
    return str(response["Location"])


def answer_at_provider(authorization_url: str, sub: str, *, deny: bool = False) -> str:
    """What the person does on the provider's page (sign in as ``sub``, or
    deny); returns where the provider sends the browser back."""
    form = {"action": "deny"} if deny else {"sub": sub}
    answer = requests.post(authorization_url, data=form, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text
    return str(answer.headers["Location"])


def follow_back(client: Client, callback_url: str) -> Any:
    parts = urlsplit(callback_url)
    return client.get(f"{parts.path}?{parts.query}")


def sign_in(client: Client, sub: str, next_url: str = "") -> Any:
    """The whole code flow; returns Berth's answer to the callback."""
    return follow_back(client, answer_at_provider(start(client, next_url), sub))
