"""OpenID Connect sign-in, on mozilla-django-oidc (docs/sso.md).

- ``/oidc/authenticate/`` (``SingleSignOnStart``) sends the browser to the
  provider's authorization endpoint with a fresh state, nonce and PKCE
  challenge kept in the session.
- ``/oidc/callback/`` (``SingleSignOnCallback``) checks the state, and
  ``SingleSignOnBackend`` trades the code for tokens (client_secret_basic),
  verifies the ID token (signature from the provider's JWKS, issuer, audience,
  expiry, nonce), reads the userinfo endpoint for the same subject, and hands
  the claims to ``accounts.sso.sign_in``, which finds the user and applies the
  roles of their groups.

The provider's endpoints come from its discovery document
(``<issuer>/.well-known/openid-configuration``), read when first needed and
kept for an hour, not at start-up: Berth starts, and its password and token
sign-ins work, while the provider is down. ``BERTH_OIDC_*_ENDPOINT`` settings
override single endpoints.

A refused sign-in (the provider's error, a state that does not match, a token
that does not verify, no mapped group, ...) is recorded in the access log like
any failed sign-in (``login-failed``, detail ``single sign-on refused (<code>)``)
and shown on the sign-in page with what to do. Refusals are not counted by
django-axes: they are not password guesses. An address axes has locked out is
refused here too (429).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, resolve_url
from django.urls import reverse
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import absolutify, import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationRequestView

from accounts.models import AccessDenial
from accounts.services import record_access_denial
from accounts.sso import SingleSignOnRefused, sign_in
from accounts.sso_config import SettingError, SingleSignOn, provider_url

logger = logging.getLogger(__name__)

# Seconds to wait for the provider (discovery, token, JWKS, userinfo).
TIMEOUT = 10
DISCOVERY_SECONDS = 60 * 60
# The message the sign-in page shows after a refused single sign-on.
REFUSAL_SESSION_KEY = "berth_sso_refusal"
# The URL names mozilla-django-oidc's views reverse.
START_URL_NAME = "oidc_authentication_init"
CALLBACK_URL_NAME = "oidc_authentication_callback"


class SingleSignOnUnavailable(Exception):
    """The provider cannot be used right now (unreachable, or its discovery
    document does not fit the settings); the message says which."""


@dataclass(frozen=True)
class Endpoints:
    authorization: str
    token: str
    userinfo: str
    jwks: str


_discovered: dict[str, tuple[float, dict[str, Any]]] = {}
_discovery_lock = threading.Lock()


def forget_discovery() -> None:
    """Drop the discovery documents read so far (tests; a changed provider)."""
    with _discovery_lock:
        _discovered.clear()


def discover(config: SingleSignOn) -> dict[str, Any]:
    """The provider's discovery document, read at most once an hour."""
    url = config.discovery_url
    with _discovery_lock:
        cached = _discovered.get(url)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    try:
        response = requests.get(url, timeout=TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        raise SingleSignOnUnavailable(
            f"the discovery document {url} could not be read ({exc}): check BERTH_OIDC_ISSUER "
            "and that Berth reaches the provider"
        ) from exc
    if not isinstance(document, dict):
        raise SingleSignOnUnavailable(f"the discovery document {url} is not a JSON object")
    if document.get("issuer") != config.issuer:
        raise SingleSignOnUnavailable(
            f"the discovery document {url} names the issuer {document.get('issuer')!r}, not "
            f"BERTH_OIDC_ISSUER={config.issuer!r}: set BERTH_OIDC_ISSUER to exactly the "
            "provider's issuer (the ID tokens' 'iss')"
        )
    with _discovery_lock:
        _discovered[url] = (time.monotonic() + DISCOVERY_SECONDS, document)
    return document


def endpoints(config: SingleSignOn) -> Endpoints:
    """The provider's endpoints: the explicit settings, else discovery's."""
    explicit = {
        "authorization_endpoint": (
            config.authorization_endpoint,
            "BERTH_OIDC_AUTHORIZATION_ENDPOINT",
        ),
        "token_endpoint": (config.token_endpoint, "BERTH_OIDC_TOKEN_ENDPOINT"),
        "userinfo_endpoint": (config.userinfo_endpoint, "BERTH_OIDC_USERINFO_ENDPOINT"),
        "jwks_uri": (config.jwks_uri, "BERTH_OIDC_JWKS_URI"),
    }
    document = {} if all(value for value, _ in explicit.values()) else discover(config)
    found = {}
    for key, (value, name) in explicit.items():
        url = value or document.get(key)
        if not isinstance(url, str) or not url:
            raise SingleSignOnUnavailable(
                f"the provider's discovery document has no {key}: set {name}"
            )
        try:
            found[key] = provider_url(f"{key} of {config.discovery_url}", url)
        except SettingError as exc:
            raise SingleSignOnUnavailable(str(exc)) from None
    return Endpoints(
        authorization=found["authorization_endpoint"],
        token=found["token_endpoint"],
        userinfo=found["userinfo_endpoint"],
        jwks=found["jwks_uri"],
    )


def configured() -> SingleSignOn:
    config: SingleSignOn | None = settings.BERTH_SSO
    if config is None:
        raise Http404("Single sign-on is not configured (BERTH_OIDC_ISSUER).")
    return config


def mozilla_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, from Berth's (settings.BERTH_SSO)."""
    config: SingleSignOn | None = settings.BERTH_SSO
    fixed: dict[str, Any] = {
        "OIDC_USE_NONCE": True,
        "OIDC_USE_PKCE": True,
        "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
        # Every provider must accept HTTP Basic for the client (RFC 6749 2.3.1).
        "OIDC_TOKEN_USE_BASIC_AUTH": True,
        "OIDC_TIMEOUT": TIMEOUT,
        "OIDC_VERIFY_SSL": True,
        "OIDC_PROXY": None,
        "OIDC_STORE_ACCESS_TOKEN": False,
        "OIDC_STORE_ID_TOKEN": False,
        "OIDC_ALLOW_UNSECURED_JWT": False,
        "OIDC_RP_IDP_SIGN_KEY": None,
        "OIDC_AUTHENTICATION_CALLBACK_URL": CALLBACK_URL_NAME,
        "OIDC_AUTH_REQUEST_EXTRA_PARAMS": {},
    }
    if config is not None:
        fixed |= {
            "OIDC_RP_CLIENT_ID": config.client_id,
            "OIDC_RP_CLIENT_SECRET": config.client_secret,
            "OIDC_RP_SCOPES": config.scopes,
            "OIDC_RP_SIGN_ALGO": config.sign_algo,
        }
    if attr in fixed:
        return fixed[attr]
    return import_from_settings(attr, *default)


def _refused(code: str, message: str, exc: BaseException) -> SingleSignOnRefused:
    return SingleSignOnRefused(code, message, f"{type(exc).__name__}: {exc}"[:400])


class SingleSignOnBackend(OIDCAuthenticationBackend):
    """Signs in the person the provider's verified tokens name (code flow only:
    a username and password never get past the first check)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Django builds backends for every authenticate() and for each request's
        # session user: no settings, discovery or network here.
        self.UserModel = get_user_model()

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return mozilla_setting(attr, *args)

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        config: SingleSignOn | None = settings.BERTH_SSO
        # Only SingleSignOnCallback passes a nonce; password sign-ins pass through.
        if config is None or request is None or "nonce" not in kwargs:
            return None
        code, state = request.GET.get("code"), request.GET.get("state")
        if not code or not state:
            return None
        self.request = request
        found = endpoints(config)
        self.OIDC_OP_TOKEN_ENDPOINT = found.token
        self.OIDC_OP_USER_ENDPOINT = found.userinfo
        self.OIDC_OP_JWKS_ENDPOINT = found.jwks
        self.OIDC_RP_CLIENT_ID = config.client_id
        self.OIDC_RP_CLIENT_SECRET = config.client_secret
        self.OIDC_RP_SIGN_ALGO = config.sign_algo
        self.OIDC_RP_IDP_SIGN_KEY = None
        provider = config.provider_name
        token_request = {
            "client_id": config.client_id,
            "client_secret": config.client_secret,
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": absolutify(request, reverse(CALLBACK_URL_NAME)),
        }
        if kwargs.get("code_verifier"):
            token_request["code_verifier"] = kwargs["code_verifier"]
        try:
            tokens = self.get_token(token_request)
        except (requests.RequestException, ValueError) as exc:
            raise _refused(
                "token-exchange",
                f"Berth could not complete the sign-in with {provider}: its token endpoint "
                "refused the code or did not answer. Start again; if it keeps failing, tell "
                "your platform team (Berth's access log says why).",
                exc,
            ) from exc
        id_token, access_token = tokens.get("id_token"), tokens.get("access_token")
        if not isinstance(id_token, str) or not isinstance(access_token, str):
            raise SingleSignOnRefused(
                "invalid-token",
                f"{provider} answered without an ID token. Tell your platform team: the client "
                "may not be set up for OpenID Connect (scope 'openid').",
                "the token response has no id_token or access_token",
            )
        try:
            claims = self.verify_token(id_token, nonce=kwargs["nonce"])
            userinfo = self.get_userinfo(access_token, id_token, claims)
        except (SuspiciousOperation, jwt.PyJWTError, requests.RequestException, KeyError) as exc:
            raise _refused(
                "invalid-token",
                f"Berth could not verify {provider}'s answer, so it did not sign you in. Start "
                "again; if it keeps failing, tell your platform team (Berth's access log says "
                "why).",
                exc,
            ) from exc
        if not isinstance(userinfo, dict) or userinfo.get("sub") != claims.get("sub"):
            raise SingleSignOnRefused(
                "invalid-token",
                f"{provider}'s user information is about someone else than its ID token, so "
                "Berth did not sign you in. Tell your platform team.",
                "userinfo 'sub' differs from the ID token's",
            )
        # The ID token's claims, with the userinfo endpoint's on top: some providers
        # put groups only in the ID token (Entra ID), others only in userinfo.
        return sign_in({**claims, **userinfo}, config)

    def retrieve_matching_jwk(self, token: str) -> Any:
        """The provider's key that signed ``token``: the one with its ``kid``, or
        the only signing key when the token names none (OpenID Connect Core 10.1;
        mozilla-django-oidc insists on a kid)."""
        response = requests.get(self.OIDC_OP_JWKS_ENDPOINT, timeout=TIMEOUT)
        response.raise_for_status()
        keys = response.json().get("keys")
        header = jwt.get_unverified_header(token)
        kid, alg = header.get("kid"), header.get("alg")
        candidates = [
            key
            for key in (keys if isinstance(keys, list) else [])
            if isinstance(key, dict)
            and key.get("use", "sig") == "sig"
            and key.get("alg", alg) == alg
            and (kid is None or key.get("kid") == kid)
        ]
        if len(candidates) != 1:
            raise SuspiciousOperation(
                f"the provider's JWKS has {len(candidates)} keys for kid={kid!r} alg={alg!r}"
            )
        return jwt.PyJWK(candidates[0], algorithm=alg)

    def _verify_jws(self, payload: str, key: Any) -> dict[str, Any]:
        """The token's claims once its signature, algorithm, issuer, audience and
        expiry are right (mozilla-django-oidc checks neither issuer nor audience)."""
        config = configured()
        try:
            header = jwt.get_unverified_header(payload)
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"the token is not a JWT: {exc}") from exc
        if header.get("alg") != config.sign_algo:
            raise SuspiciousOperation(
                f"the token is signed with {header.get('alg')!r}, not BERTH_OIDC_SIGN_ALGO="
                f"{config.sign_algo!r}"
            )
        try:
            claims: dict[str, Any] = jwt.decode(
                payload,
                key,
                algorithms=[config.sign_algo],
                audience=config.client_id,
                issuer=config.issuer,
                leeway=60,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"the token does not verify: {exc}") from exc
        audience = claims["aud"]
        several = isinstance(audience, list) and len(audience) > 1
        if several and claims.get("azp") != config.client_id:
            raise SuspiciousOperation("the token is for several clients, and not issued to Berth")
        return claims


def refuse(request: HttpRequest, refusal: SingleSignOnRefused) -> HttpResponse:
    """Record a refused single sign-on and show why on the sign-in page."""
    record_access_denial(
        request,
        reason=AccessDenial.Reason.LOGIN_FAILED,
        username=refusal.username,
        detail=f"single sign-on refused ({refusal.code}): {refusal.detail or refusal.message}",
    )
    logger.warning("single sign-on refused (%s): %s", refusal.code, refusal.detail)
    request.session[REFUSAL_SESSION_KEY] = refusal.message
    return redirect(settings.LOGIN_URL)


def unavailable(request: HttpRequest, config: SingleSignOn, exc: Exception) -> HttpResponse:
    logger.error("single sign-on is unavailable: %s", exc)
    request.session[REFUSAL_SESSION_KEY] = (
        f"Sign-in with {config.provider_name} is not working right now: Berth cannot use the "
        "identity provider. Try again in a minute; if it persists, tell your platform team "
        "(Berth's log says why)."
    )
    return redirect(settings.LOGIN_URL)


class SingleSignOnStart(OIDCAuthenticationRequestView):
    """Send the browser to the provider (``/oidc/authenticate/?next=…``)."""

    def __init__(self, **kwargs: Any) -> None:
        # The parent reads the endpoint here; Berth finds it per request (discovery).
        View.__init__(self, **kwargs)

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return mozilla_setting(attr, *args)

    def get(self, request: HttpRequest) -> HttpResponse:
        config = configured()
        try:
            found = endpoints(config)
        except SingleSignOnUnavailable as exc:
            return unavailable(request, config, exc)
        self.OIDC_OP_AUTH_ENDPOINT = found.authorization
        self.OIDC_RP_CLIENT_ID = config.client_id
        response: HttpResponse = super().get(request)
        return response


class SingleSignOnCallback(View):
    """Where the provider sends the browser back (``/oidc/callback/``)."""

    http_method_names = ["get"]

    def get(self, request: HttpRequest) -> HttpResponse:
        config = configured()
        provider = config.provider_name
        states = request.session.get("oidc_states")
        if not isinstance(states, dict):
            states = {}
        started = bool(states)
        state = request.GET.get("state", "")
        # A state is used once, whatever comes of it (no replay).
        entry = states.pop(state, None) if state else None
        if entry is not None:
            request.session.modified = True
        if request.GET.get("error"):
            error = request.GET["error"][:100]
            description = request.GET.get("error_description", "")[:200]
            return refuse(
                request,
                SingleSignOnRefused(
                    "provider-error",
                    f"{provider} did not sign you in ({description or error}). Start again; if "
                    f"{provider} keeps refusing, ask its administrators.",
                    f"the provider answered error={error!r} {description!r}",
                ),
            )
        if not request.GET.get("code") or not state:
            return refuse(
                request,
                SingleSignOnRefused(
                    "bad-callback",
                    f"This address is where {provider} sends you back after signing in; it was "
                    "opened without an answer from it. Sign in with the button below.",
                    "the callback has no code or state",
                ),
            )
        if not started:
            return refuse(
                request,
                SingleSignOnRefused(
                    "no-sign-in-started",
                    "This browser has no sign-in in progress: it was started in another browser, "
                    "took too long, or cookies are blocked for Berth. Sign in again with the "
                    "button below.",
                    "no state in the session (expired, another browser, or no cookies)",
                ),
            )
        if entry is None:
            return refuse(
                request,
                SingleSignOnRefused(
                    "state-mismatch",
                    f"The answer from {provider} does not belong to the sign-in this browser "
                    "started (state mismatch), so Berth ignored it. If you followed a link to "
                    "get here, do not trust it; sign in again with the button below.",
                    f"state {state[:40]!r} is not one this session started",
                ),
            )
        try:
            user = auth.authenticate(
                request=request, nonce=entry.get("nonce"), code_verifier=entry.get("code_verifier")
            )
        except SingleSignOnRefused as refusal:
            return refuse(request, refusal)
        except SingleSignOnUnavailable as exc:
            return unavailable(request, config, exc)
        if user is None:
            if getattr(request, "axes_locked_out", False):
                # django-axes' middleware answers this with its 429 (accounts.lockout).
                return HttpResponse(status=429)
            return refuse(
                request,
                SingleSignOnRefused(
                    "not-signed-in",
                    f"Berth could not sign you in with {provider}. Tell your platform team.",
                    "no backend accepted the verified sign-in",
                ),
            )
        auth.login(request, user)
        # The next sign-in reads the person's groups again.
        request.session.set_expiry(config.session_seconds)
        next_url = request.session.pop("oidc_login_next", None)
        return HttpResponseRedirect(next_url or resolve_url(settings.LOGIN_REDIRECT_URL))
