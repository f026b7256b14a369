"""Reading the single sign-on and local-account settings (docs/sso.md).

``BERTH_OIDC_ISSUER`` turns OpenID Connect sign-in on; with it come the client
(``BERTH_OIDC_CLIENT_ID``, ``BERTH_OIDC_CLIENT_SECRET``) and the group map
(``BERTH_OIDC_GROUP_MAP``, accounts/group_map.py). ``BERTH_LOCAL_ACCOUNTS=false``
turns password sign-in off. A value Berth cannot run with raises SettingError
naming the variable and the rule, which settings turns into a start-up error.

Pure: no Django, so settings can call it while they load.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from accounts.group_map import GroupMap, GroupMapError, parse_group_map

DEFAULT_SCOPES = "openid email profile"
SIGN_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "HS256")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
# Optional: each overrides what the provider's discovery document says.
ENDPOINT_VARIABLES = {
    "authorization": "BERTH_OIDC_AUTHORIZATION_ENDPOINT",
    "token": "BERTH_OIDC_TOKEN_ENDPOINT",
    "userinfo": "BERTH_OIDC_USERINFO_ENDPOINT",
    "jwks": "BERTH_OIDC_JWKS_URI",
}
# Meaningful only with BERTH_OIDC_ISSUER; set without it they are a mistake.
OIDC_VARIABLES = (
    "BERTH_OIDC_CLIENT_ID",
    "BERTH_OIDC_CLIENT_SECRET",
    "BERTH_OIDC_GROUP_MAP",
    "BERTH_OIDC_SCOPES",
    "BERTH_OIDC_GROUPS_CLAIM",
    "BERTH_OIDC_USERNAME_CLAIM",
    "BERTH_OIDC_PROVIDER_NAME",
    "BERTH_OIDC_SIGN_ALGO",
    "BERTH_OIDC_SESSION_HOURS",
    *ENDPOINT_VARIABLES.values(),
)


class SettingError(ValueError):
    """A single sign-on setting Berth cannot run with; the message names it."""


class EnvReader(Protocol):
    """What is needed of controlplane.env.Env (accounts may not import it)."""

    def raw(self, name: str) -> str | None: ...

    def flag(self, name: str, default: bool) -> bool: ...

    def number(self, name: str, default: int, *, minimum: int | None = None) -> int: ...


@dataclass(frozen=True)
class SingleSignOn:
    """One OpenID Connect provider, as configured."""

    issuer: str
    client_id: str
    client_secret: str
    scopes: str
    group_map: GroupMap
    groups_claim: str = "groups"
    username_claim: str = "preferred_username"
    provider_name: str = "SSO"
    sign_algo: str = "RS256"
    # Explicit endpoints ("" where discovery decides): authorization, token, userinfo, jwks.
    authorization_endpoint: str = ""
    token_endpoint: str = ""
    userinfo_endpoint: str = ""
    jwks_uri: str = ""
    # A session begun through the provider ends after this long; the next sign-in
    # reads the person's groups again.
    session_seconds: int = 12 * 60 * 60

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"


@dataclass(frozen=True)
class AccountSettings:
    local_accounts: bool
    sso: SingleSignOn | None


def _value(env: EnvReader, name: str) -> str:
    """The variable's value, stripped; unset and empty are both ''."""
    return (env.raw(name) or "").strip()


def provider_url(name: str, value: str) -> str:
    """An https URL (http only on a loopback host); raises SettingError."""
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
    except ValueError as exc:
        raise SettingError(f"{name}={value!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise SettingError(
            f"{name}={value!r} is not an http(s) URL: give the full address, "
            "e.g. https://login.example.com/realms/acme"
        )
    if parts.scheme == "http" and host not in LOOPBACK_HOSTS:
        raise SettingError(
            f"{name}={value!r} is plain http: Berth sends the client secret there and trusts "
            "the tokens it answers, so it must be https (http only on localhost)"
        )
    if parts.query or parts.fragment:
        raise SettingError(f"{name}={value!r} has a query or fragment: give the URL without them")
    return value


def _single_sign_on(env: EnvReader, issuer: str) -> SingleSignOn:
    provider_url("BERTH_OIDC_ISSUER", issuer)
    client_id = _value(env, "BERTH_OIDC_CLIENT_ID")
    client_secret = (env.raw("BERTH_OIDC_CLIENT_SECRET") or "").strip()
    for name, value in (
        ("BERTH_OIDC_CLIENT_ID", client_id),
        ("BERTH_OIDC_CLIENT_SECRET", client_secret),
    ):
        if not value:
            raise SettingError(
                f"{name} is not set: with BERTH_OIDC_ISSUER it is required; register Berth "
                "as a confidential client at the identity provider and give its client ID and "
                "secret (docs/sso.md)"
            )
    map_text = _value(env, "BERTH_OIDC_GROUP_MAP")
    if not map_text:
        raise SettingError(
            "BERTH_OIDC_GROUP_MAP is not set: with BERTH_OIDC_ISSUER it is required, or nobody "
            'could sign in; map groups to roles, e.g. {"berth-admins": "platform-admin"}'
        )
    try:
        group_map = parse_group_map(map_text)
    except GroupMapError as exc:
        raise SettingError(str(exc)) from None
    scopes = " ".join(re.split(r"[\s,]+", _value(env, "BERTH_OIDC_SCOPES") or DEFAULT_SCOPES))
    if "openid" not in scopes.split():
        raise SettingError(
            f"BERTH_OIDC_SCOPES={scopes!r} lacks 'openid': OpenID Connect needs it, "
            f"e.g. {DEFAULT_SCOPES!r}"
        )
    sign_algo = _value(env, "BERTH_OIDC_SIGN_ALGO") or "RS256"
    if sign_algo not in SIGN_ALGORITHMS:
        raise SettingError(
            f"BERTH_OIDC_SIGN_ALGO={sign_algo!r} is not supported: use one of "
            f"{', '.join(SIGN_ALGORITHMS)} (the provider's id_token_signing_alg)"
        )
    claims = {}
    for name, default in (
        ("BERTH_OIDC_GROUPS_CLAIM", "groups"),
        ("BERTH_OIDC_USERNAME_CLAIM", "preferred_username"),
    ):
        claim = _value(env, name) or default
        if claim in ("sub", "iss", "aud", "nonce"):
            raise SettingError(f"{name}={claim!r} is a protocol claim: name the claim to read")
        claims[name] = claim
    endpoints = {
        key: provider_url(name, value) if (value := _value(env, name)) else ""
        for key, name in ENDPOINT_VARIABLES.items()
    }
    hours = env.number("BERTH_OIDC_SESSION_HOURS", 12, minimum=1)
    return SingleSignOn(
        issuer=issuer,
        client_id=client_id,
        client_secret=client_secret,
        scopes=scopes,
        group_map=group_map,
        groups_claim=claims["BERTH_OIDC_GROUPS_CLAIM"],
        username_claim=claims["BERTH_OIDC_USERNAME_CLAIM"],
        provider_name=_value(env, "BERTH_OIDC_PROVIDER_NAME")[:40] or "SSO",
        sign_algo=sign_algo,
        authorization_endpoint=endpoints["authorization"],
        token_endpoint=endpoints["token"],
        userinfo_endpoint=endpoints["userinfo"],
        jwks_uri=endpoints["jwks"],
        session_seconds=hours * 60 * 60,
    )


def read_account_settings(env: EnvReader) -> AccountSettings:
    """Single sign-on (None unless BERTH_OIDC_ISSUER is set) and whether local
    accounts sign in with passwords; raises SettingError."""
    issuer = _value(env, "BERTH_OIDC_ISSUER")
    sso = _single_sign_on(env, issuer) if issuer else None
    if sso is None:
        stray = [name for name in OIDC_VARIABLES if _value(env, name)]
        if stray:
            raise SettingError(
                f"{stray[0]} is set but BERTH_OIDC_ISSUER is not: single sign-on is off "
                "without the issuer; set BERTH_OIDC_ISSUER too, or unset "
                f"{', '.join(stray)}"
            )
    local_accounts = env.flag("BERTH_LOCAL_ACCOUNTS", True)
    if not local_accounts and sso is None:
        raise SettingError(
            "BERTH_LOCAL_ACCOUNTS=false needs single sign-on, or nobody could sign in: set "
            "BERTH_OIDC_ISSUER (docs/sso.md), or leave local accounts on"
        )
    return AccountSettings(local_accounts=local_accounts, sso=sso)


def authentication_backends(accounts: AccountSettings) -> list[str]:
    """Django's AUTHENTICATION_BACKENDS for these settings."""
    return [
        # First: refuses a locked-out username or address before any password check.
        "axes.backends.AxesStandaloneBackend",
        # Passwords, unless local accounts are off: then nothing accepts one, and the
        # sessions begun with a password end (their backend is no longer listed).
        *(["django.contrib.auth.backends.ModelBackend"] if accounts.local_accounts else []),
        *(["accounts.oidc.SingleSignOnBackend"] if accounts.sso is not None else []),
    ]
