"""Single sign-on against a real OpenID Connect provider on loopback
(tests/accounts/oidc_provider.py): discovery, the code flow, the roles the
provider's groups give and take away, the refusals (logged, and shown with
what to do), and local accounts turned off while API tokens keep working.

Django's test client is the browser here; tests/browser/test_oidc_browser.py
drives the same flow in Chromium.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from axes.backends import AxesStandaloneBackend
from django.contrib.auth import get_backends, get_user_model
from django.core.exceptions import SuspiciousOperation
from django.test import Client, RequestFactory

from accounts import oidc
from accounts.models import AccessDenial, SingleSignOnIdentity
from accounts.roles import APPROVERS_GROUP, PLATFORM_ADMINS_GROUP, is_global_approver
from accounts.roles import is_platform_admin as platform_admin
from accounts.sso_config import read_account_settings
from controlplane.env import Env
from queues import services
from queues.models import PolicyChange, TeamMembership
from tests import factories
from tests.accounts.oidc_provider import (
    PROVIDER_NAME,
    QUIET_PROVIDER,
    Provider,
    answer_at_provider,
    follow_back,
    running_provider,
    sign_in,
    sso_environment,
    sso_on,
    start,
)

pytestmark = QUIET_PROVIDER
REDIRECT_URI = "http://testserver/oidc/callback/"


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[Provider]:
    with running_provider(monkeypatch) as running:
        running.register(REDIRECT_URI)
        yield running


@pytest.fixture
def sso(settings: Any, provider: Provider) -> Provider:
    sso_on(settings, provider)
    return provider


@pytest.fixture
def teams(db: Any) -> None:
    factories.team("research")
    factories.team("vision")
    factories.team("beta")


def user_named(username: str) -> Any:
    return get_user_model().objects.get(username=username)


def team_roles(user: Any) -> set[tuple[str, str]]:
    return set(TeamMembership.objects.filter(user=user).values_list("team__slug", "role"))


def refusals() -> list[str]:
    return list(
        AccessDenial.objects.filter(reason=AccessDenial.Reason.LOGIN_FAILED).values_list(
            "detail", flat=True
        )
    )


def shown_refusal(client: Client, response: Any) -> str:
    """The sign-in page the browser lands on after a refusal, and its message."""
    assert response.status_code == 302 and response["Location"] == "/login/", response
    page = client.get("/login/")
    assert page.status_code == 200
    return str(page.context["sso_refusal"])


# Discovery


def test_discovery_reads_the_providers_endpoints(sso: Provider) -> None:
    config = read_account_settings(Env(sso_environment(sso))).sso
    assert config is not None
    found = oidc.endpoints(config)
    assert found == oidc.Endpoints(
        authorization=f"{sso.issuer}/oauth2/authorize",
        token=f"{sso.issuer}/oauth2/token",
        userinfo=f"{sso.issuer}/userinfo",
        jwks=f"{sso.issuer}/jwks",
    )
    # An explicit endpoint overrides what discovery says.
    overridden = read_account_settings(
        Env(sso_environment(sso, BERTH_OIDC_USERINFO_ENDPOINT="https://idp.example.com/me"))
    ).sso
    assert overridden is not None
    assert oidc.endpoints(overridden).userinfo == "https://idp.example.com/me"


def test_discovery_refuses_a_provider_naming_another_issuer(
    settings: Any, provider: Provider, db: Any
) -> None:
    """The provider's issuer is http://localhost:PORT; configured with a trailing
    slash it is not the same issuer (ID tokens would not match), and the page says so."""
    sso_on(settings, Provider(f"{provider.issuer}/", provider.client_id, "s"))
    config = settings.BERTH_SSO
    with pytest.raises(oidc.SingleSignOnUnavailable, match="names the issuer"):
        oidc.endpoints(config)
    client = Client()
    response = client.get("/oidc/authenticate/")
    assert "is not working right now" in shown_refusal(client, response)


def test_an_unreachable_provider_is_explained_not_a_crash(settings: Any, db: Any) -> None:
    sso_on(settings, Provider("http://127.0.0.1:9", "berth", "secret"))  # nothing listens
    client = Client()
    response = client.get("/oidc/authenticate/")
    assert f"Sign-in with {PROVIDER_NAME} is not working right now" in shown_refusal(
        client, response
    )


# The code flow and the roles of the groups


def test_the_code_flow_signs_in_with_pkce_nonce_and_state(sso: Provider, teams: None) -> None:
    sso.set_user("u-1", username="alice", groups=["ml-research"], name="Alice")
    client = Client()
    authorization = start(client, next_url="/queues/")
    query = parse_qs(urlsplit(authorization).query)
    assert authorization.startswith(f"{sso.issuer}/oauth2/authorize?")
    assert query["client_id"] == [sso.client_id]
    assert query["redirect_uri"] == [REDIRECT_URI]
    assert query["scope"] == ["openid email profile"]
    assert query["code_challenge_method"] == ["S256"]
    assert {"state", "nonce", "code_challenge"} <= query.keys()

    response = follow_back(client, answer_at_provider(authorization, "u-1"))
    assert response.status_code == 302 and response["Location"] == "/queues/"
    alice = user_named("alice")
    assert client.get("/api/v1/me/").json()["username"] == "alice"
    assert alice.email == "alice@example.com"
    assert not alice.has_usable_password()
    identity = SingleSignOnIdentity.objects.get(user=alice)
    assert (identity.issuer, identity.subject, identity.groups) == (
        sso.issuer,
        "u-1",
        ["ml-research"],
    )
    # The session ends with the provider's sign-in: the next one reads the groups again.
    assert 0 < client.session.get_expiry_age() <= 12 * 60 * 60


@pytest.mark.parametrize(
    ("groups", "admin", "approver", "memberships"),
    [
        (["berth-admins"], True, False, set()),
        (["gpu-approvers"], False, True, set()),
        (["ml-research"], False, False, {("research", "member")}),
        (["research-leads"], False, False, {("research", "approver")}),
        (
            ["ml-research", "vision", "gpu-approvers", "unrelated"],
            False,
            True,
            {("research", "member"), ("vision", "member")},
        ),
        (["staff"], False, False, set()),  # a viewer: signed in, no role
    ],
    ids=["admin", "approver", "member", "team-approver", "several", "viewer"],
)
def test_groups_give_the_mapped_roles(
    sso: Provider,
    teams: None,
    groups: list[str],
    admin: bool,
    approver: bool,
    memberships: set[tuple[str, str]],
) -> None:
    sso.set_user("u-2", username="bo", groups=groups)
    client = Client()
    assert sign_in(client, "u-2").status_code == 302
    bo = user_named("bo")
    assert platform_admin(bo) is admin
    assert (bo.is_superuser, bo.is_staff) == (admin, admin)  # the admin console opens
    assert is_global_approver(bo) is approver
    assert team_roles(bo) == memberships
    me = client.get("/api/v1/me/")
    assert me.status_code == 200 and me.json()["username"] == "bo"


def test_the_provider_taking_a_group_away_takes_its_role_away(sso: Provider, teams: None) -> None:
    sso.set_user("u-3", username="cy", groups=["berth-admins", "ml-research", "gpu-approvers"])
    assert sign_in(Client(), "u-3").status_code == 302
    cy = user_named("cy")
    assert platform_admin(cy) and is_global_approver(cy)
    # Berth's own admin puts cy in team beta, which the map does not name.
    services.set_membership(
        actor=None, team=factories.team("gamma"), username="cy", role="member", present=True
    )

    sso.set_user("u-3", username="cy", groups=["research-leads"])
    assert sign_in(Client(), "u-3").status_code == 302
    cy = user_named("cy")
    assert not platform_admin(cy)
    assert not (cy.is_superuser or cy.is_staff)
    assert not cy.groups.filter(name__in=[PLATFORM_ADMINS_GROUP, APPROVERS_GROUP]).exists()
    assert team_roles(cy) == {("research", "approver"), ("gamma", "member")}
    # The membership changes are policy history, saying where they came from.
    notes = set(
        PolicyChange.objects.filter(kind="team-membership", object_name="research").values_list(
            "note", flat=True
        )
    )
    assert notes == {f"single sign-on: cy's groups at {PROVIDER_NAME}"}


def test_nobody_gets_a_role_from_a_group_the_map_does_not_name(sso: Provider, teams: None) -> None:
    sso.set_user("u-4", username="di", groups=["marketing", "berth-admins-old"])
    client = Client()
    message = shown_refusal(client, sign_in(client, "u-4"))
    assert "none of the groups that give access to Berth" in message
    assert "berth-admins-old, marketing" in message
    assert "Ask your platform team" in message
    assert not get_user_model().objects.filter(username="di").exists()
    assert client.get("/api/v1/me/").status_code in (401, 403)
    assert refusals() == [
        "single sign-on refused (no-mapped-group): no group in BERTH_OIDC_GROUP_MAP; "
        "claim 'groups': berth-admins-old, marketing"
    ]


def test_dropped_from_every_mapped_group_loses_the_roles_at_the_refused_attempt(
    sso: Provider, teams: None
) -> None:
    sso.set_user("u-5", username="ed", groups=["berth-admins", "vision"])
    assert sign_in(Client(), "u-5").status_code == 302
    token = factories.token_client(user_named("ed"))
    assert token.get("/api/v1/access-denials/").status_code == 200  # an admin's view

    sso.set_user("u-5", username="ed", groups=["left-the-company"])
    client = Client()
    assert "none of the groups" in shown_refusal(client, sign_in(client, "u-5"))
    ed = user_named("ed")
    assert not platform_admin(ed) and team_roles(ed) == set()
    # The token the person made while an admin carries no admin right any more.
    assert token.get("/api/v1/access-denials/").status_code == 403
    (detail,) = refusals()
    assert "removed -platform-admin, -member of team vision" in detail


def test_a_team_the_map_names_but_berth_lacks_gives_nothing(
    sso: Provider, db: Any, caplog: pytest.LogCaptureFixture
) -> None:
    sso.set_user("u-6", username="fay", groups=["vision"])  # no team "vision" here
    assert sign_in(Client(), "u-6").status_code == 302
    assert team_roles(user_named("fay")) == set()
    assert "team 'vision', which does not exist in Berth" in caplog.text


# Existing local accounts


def test_an_existing_local_user_is_linked_by_username(sso: Provider, teams: None) -> None:
    dora = factories.user("dora")
    sso.set_user("u-7", username="dora", groups=["ml-research"])
    assert sign_in(Client(), "u-7").status_code == 302
    assert SingleSignOnIdentity.objects.get(user=dora).subject == "u-7"
    assert team_roles(dora) == {("research", "member")}
    # Local accounts are on: dora's password still works.
    password = Client().post("/login/", {"username": "dora", "password": "dora-password"})
    assert password.status_code == 302

    # Another person at the provider given the username "dora" gets nothing of hers.
    sso.set_user("u-8", username="dora", groups=["berth-admins"])
    client = Client()
    message = shown_refusal(client, sign_in(client, "u-8"))
    assert "already belongs to another Acme ID identity" in message
    assert not platform_admin(user_named("dora"))
    assert "identity-conflict" in refusals()[0]


def test_a_deactivated_user_is_refused(sso: Provider, teams: None) -> None:
    sso.set_user("u-9", username="gus", groups=["ml-research"])
    assert sign_in(Client(), "u-9").status_code == 302
    get_user_model().objects.filter(username="gus").update(is_active=False)
    client = Client()
    assert "is deactivated" in shown_refusal(client, sign_in(client, "u-9"))
    assert client.get("/api/v1/me/").status_code in (401, 403)


# Refusals of the protocol


def test_a_state_this_browser_did_not_start_is_refused(sso: Provider, teams: None) -> None:
    sso.set_user("u-10", username="hal", groups=["ml-research"])
    client = Client()
    callback = answer_at_provider(start(client), "u-10")
    forged = callback.replace("state=", "state=forged")
    message = shown_refusal(client, follow_back(client, forged))
    assert "state mismatch" in message and "sign in again" in message
    assert "state-mismatch" in refusals()[0]
    assert not get_user_model().objects.filter(username="hal").exists()


def test_a_callback_in_another_browser_is_refused(sso: Provider, teams: None) -> None:
    sso.set_user("u-11", username="ivy", groups=["ml-research"])
    callback = answer_at_provider(start(Client()), "u-11")
    other = Client()  # a link sent to someone else: no sign-in in progress there
    assert "no sign-in in progress" in shown_refusal(other, follow_back(other, callback))
    assert "no-sign-in-started" in refusals()[0]


def test_a_state_is_used_once(sso: Provider, teams: None) -> None:
    """A replayed callback is refused by Berth before it reaches the provider,
    even while the browser has another sign-in in progress (a second tab)."""
    sso.set_user("u-12", username="jo", groups=["ml-research"])
    client = Client()
    start(client)  # the other tab
    callback = answer_at_provider(start(client), "u-12")
    assert follow_back(client, callback)["Location"] == "/"
    assert "state mismatch" in shown_refusal(client, follow_back(client, callback))
    assert "state-mismatch" in refusals()[-1]


def test_the_person_denying_at_the_provider_is_told(sso: Provider, db: Any) -> None:
    client = Client()
    callback = answer_at_provider(start(client), "", deny=True)
    message = shown_refusal(client, follow_back(client, callback))
    assert f"{PROVIDER_NAME} did not sign you in" in message
    assert "provider-error" in refusals()[0] and "access_denied" in refusals()[0]


def test_an_id_token_from_another_issuer_is_refused(
    settings: Any, provider: Provider, teams: None
) -> None:
    """Endpoints on 127.0.0.1 make the provider sign its tokens as
    http://127.0.0.1:PORT; Berth expects http://localhost:PORT and refuses them."""
    loopback = provider.issuer.replace("localhost", "127.0.0.1")
    sso_on(
        settings,
        provider,
        BERTH_OIDC_AUTHORIZATION_ENDPOINT=f"{loopback}/oauth2/authorize",
        BERTH_OIDC_TOKEN_ENDPOINT=f"{loopback}/oauth2/token",
        BERTH_OIDC_USERINFO_ENDPOINT=f"{loopback}/userinfo",
        BERTH_OIDC_JWKS_URI=f"{loopback}/jwks",
    )
    provider.set_user("u-13", username="kim", groups=["berth-admins"])
    client = Client()
    assert "could not verify" in shown_refusal(client, sign_in(client, "u-13"))
    assert "Invalid issuer" in refusals()[0]
    assert not get_user_model().objects.filter(username="kim").exists()


@pytest.mark.parametrize(
    ("claims", "rule"),
    [
        ({"aud": "someone-else"}, "Audience doesn't match"),
        ({"aud": ["berth", "other"]}, "several clients"),
        ({"exp": 1}, "Signature has expired"),
        ({"iss": "https://evil.example.com"}, "Invalid issuer"),
        ({"sub": None}, "sub"),
    ],
)
def test_the_id_token_checks_mozilla_django_oidc_leaves_out(
    settings: Any, claims: dict[str, Any], rule: str
) -> None:
    """Issuer and audience (mozilla-django-oidc checks neither), expiry."""
    accounts = read_account_settings(
        Env(
            {
                "BERTH_OIDC_ISSUER": "https://idp.example.com",
                "BERTH_OIDC_CLIENT_ID": "berth",
                "BERTH_OIDC_CLIENT_SECRET": "s" * 32,
                "BERTH_OIDC_GROUP_MAP": '{"a": "viewer"}',
                "BERTH_OIDC_SIGN_ALGO": "HS256",
            }
        )
    )
    settings.BERTH_SSO = accounts.sso
    good = {"iss": "https://idp.example.com", "aud": "berth", "sub": "x", "exp": 2**40}
    backend = oidc.SingleSignOnBackend()
    assert backend._verify_jws(jwt.encode(good, "s" * 32, algorithm="HS256"), "s" * 32)["sub"]
    token = jwt.encode(good | claims, "s" * 32, algorithm="HS256")
    with pytest.raises(SuspiciousOperation, match=rule):
        backend._verify_jws(token, "s" * 32)


# Local accounts off


@pytest.fixture
def local_accounts_off(settings: Any, provider: Provider) -> Provider:
    sso_on(settings, provider, BERTH_LOCAL_ACCOUNTS="false")
    return provider


def test_with_local_accounts_off_the_sign_in_page_has_no_password_form(
    local_accounts_off: Provider, db: Any
) -> None:
    page = Client().get("/login/?next=/jobs/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'name="password"' not in html and 'name="username"' not in html
    assert f'href="/oidc/authenticate/?next=%2Fjobs%2F">Sign in with {PROVIDER_NAME}<' in html


@pytest.mark.parametrize("path", ["/login/", "/admin/login/", "/api-auth/login/"])
def test_with_local_accounts_off_no_form_takes_a_password(
    local_accounts_off: Provider, db: Any, path: str
) -> None:
    factories.user("root", superuser=True)
    client = Client()
    answer = client.post(path, {"username": "root", "password": "root-password"})
    assert answer.status_code == 403
    assert "Password sign-in is turned off here: sign in with Acme ID" in answer.content.decode()
    assert client.get("/api/v1/me/").status_code in (401, 403)
    assert refusals() == ["password sign-in is turned off (BERTH_LOCAL_ACCOUNTS=false)"]
    assert AccessDenial.objects.get(reason=AccessDenial.Reason.LOGIN_FAILED).username == "root"
    # No backend would accept the password anyway.
    request = RequestFactory().post("/login/")
    backends = [b for b in get_backends() if not isinstance(b, AxesStandaloneBackend)]
    assert backends and not any(
        b.authenticate(request, username="root", password="root-password") for b in backends
    )


@pytest.mark.parametrize(
    ("path", "to"),
    [
        ("/admin/login/?next=/admin/queues/", "/login/?next=%2Fadmin%2Fqueues%2F"),
        ("/admin/login/", "/login/?next=%2Fadmin%2F"),
        ("/api-auth/login/", "/login/?next=%2Fapi%2Fdocs%2F"),
    ],
)
def test_with_local_accounts_off_the_other_login_pages_lead_to_the_button(
    local_accounts_off: Provider, db: Any, path: str, to: str
) -> None:
    answer = Client().get(path)
    assert answer.status_code == 302 and answer["Location"] == to


def test_with_local_accounts_off_api_tokens_still_work(
    local_accounts_off: Provider, db: Any
) -> None:
    client = factories.token_client(factories.user("ci-bot"))
    assert client.get("/api/v1/me/").json()["username"] == "ci-bot"


def test_with_local_accounts_off_single_sign_on_works_and_the_admin_opens(
    local_accounts_off: Provider, teams: None
) -> None:
    local_accounts_off.set_user("u-20", username="lee", groups=["berth-admins"])
    client = Client()
    assert sign_in(client, "u-20", next_url="/admin/").status_code == 302
    assert client.get("/admin/").status_code == 200
    assert client.get("/api/v1/me/").json()["username"] == "lee"


def test_turning_local_accounts_off_ends_password_sessions(
    settings: Any, provider: Provider, db: Any
) -> None:
    sso_on(settings, provider)
    factories.user("max")
    client = Client()
    password = client.post("/login/", {"username": "max", "password": "max-password"})
    assert password.status_code == 302
    assert client.get("/api/v1/me/").status_code == 200
    sso_on(settings, provider, BERTH_LOCAL_ACCOUNTS="false")
    assert client.get("/api/v1/me/").status_code in (401, 403)


def test_single_sign_on_off_has_no_routes_and_no_button(db: Any) -> None:
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert Client().get("/oidc/callback/?code=x&state=y").status_code == 404
    html = Client().get("/login/").content.decode()
    assert "Sign in with" not in html and 'name="password"' in html


# Brute-force protection still holds


def test_an_address_locked_out_by_failed_passwords_is_locked_out_of_sso_too(
    sso: Provider, teams: None, settings: Any
) -> None:
    settings.AXES_FAILURE_LIMIT = 2
    sso.set_user("u-30", username="ned", groups=["ml-research"])
    client = Client()
    for _ in range(2):
        client.post("/login/", {"username": "nobody", "password": "guess"})
    answer = sign_in(client, "u-30")
    assert answer.status_code == 429 and "Too many failed sign-ins" in answer.content.decode()
    assert not get_user_model().objects.filter(username="ned").exists()
    assert AccessDenial.objects.filter(reason=AccessDenial.Reason.LOCKED_OUT).exists()


def test_refused_single_sign_ons_are_not_counted_as_password_guesses(
    sso: Provider, teams: None, settings: Any
) -> None:
    settings.AXES_FAILURE_LIMIT = 2
    sso.set_user("u-31", username="ola", groups=["marketing"])
    client = Client()
    for _ in range(3):
        sign_in(client, "u-31")
    factories.user("pia")
    password = client.post("/login/", {"username": "pia", "password": "pia-password"})
    assert password.status_code == 302  # the address is not locked out
