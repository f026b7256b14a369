"""Single sign-on in headless Chromium, end to end against a real OpenID
Connect provider on loopback (tests/accounts/oidc_provider.py): the sign-in
page's button, the provider's own authorization page, the callback, and Berth
signed in as that person with the roles of their groups; with local accounts
off, a sign-in page with no password form. The browser guard fails a test on
any console error, so a Content-Security-Policy violation on Berth's pages
fails it too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, Route, expect

from tests import factories
from tests.accounts.oidc_provider import (
    PROVIDER_NAME,
    QUIET_PROVIDER,
    Provider,
    running_provider,
    sso_on,
)
from tests.browser.conftest import screenshot

pytestmark = [pytest.mark.browser, QUIET_PROVIDER]


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, base_url: str) -> Iterator[Provider]:
    with running_provider(monkeypatch) as running:
        running.register(f"{base_url}/oidc/callback/")
        yield running


@pytest.fixture(autouse=True)
def provider_page_offline(context: BrowserContext) -> None:
    """The provider's authorization page (not Berth's) styles itself from a CDN;
    the browser gets an empty stylesheet instead, so nothing leaves the machine
    and the guard still sees every other request."""

    def empty_stylesheet(route: Route) -> None:
        route.fulfill(status=200, content_type="text/css", body="")

    context.route(re.compile(r"^https://cdn\.jsdelivr\.net/"), empty_stylesheet)


def sign_in_at_provider(page: Page, provider: Provider, sub: str) -> None:
    """From Berth's sign-in page: the button, then the provider's page as a person uses it."""
    page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}").click()
    expect(page).to_have_url(re.compile(re.escape(f"{provider.issuer}/oauth2/authorize?")))
    expect(page.get_by_role("heading", name="Authorize Client")).to_be_visible()
    page.get_by_placeholder("sub").fill(sub)
    page.get_by_role("button", name="Authorize").click()


def roles_on_profile(page: Page) -> str:
    page.goto("/profile/")
    return page.locator("#roles").inner_text()


def test_sign_in_with_the_provider_gives_the_roles_of_the_groups(
    page: Page, provider: Provider, settings: Any, base_url: str
) -> None:
    factories.team("research")
    sso_on(settings, provider)
    provider.set_user("u-alice", username="alice", groups=["berth-admins", "ml-research"])

    page.goto("/login/?next=/profile/")
    expect(page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}")).to_be_visible()
    expect(page.get_by_label("Password")).to_be_visible()  # local accounts are on
    screenshot(page, "login-sso-and-password")

    sign_in_at_provider(page, provider, "u-alice")
    expect(page).to_have_url(f"{base_url}/profile/")
    expect(page.locator("#nav-profile")).to_have_text("alice")
    roles = page.locator("#roles")
    expect(roles).to_contain_text("Platform admin")
    expect(roles).to_contain_text("Member of Research")
    expect(page.get_by_role("link", name="Admin", exact=True)).to_be_visible()
    screenshot(page, "profile-after-sso")


def test_with_local_accounts_off_only_the_provider_signs_in_and_roles_follow_it(
    page: Page, provider: Provider, settings: Any, base_url: str
) -> None:
    factories.team("research")
    sso_on(settings, provider, BERTH_LOCAL_ACCOUNTS="false")
    provider.set_user("u-bob", username="bob", groups=["ml-research"])

    page.goto("/login/")
    expect(page.get_by_role("link", name=f"Sign in with {PROVIDER_NAME}")).to_be_visible()
    expect(page.locator("input[name=password]")).to_have_count(0)
    expect(page.locator("input[name=username]")).to_have_count(0)
    expect(page.get_by_text("Berth's own passwords are turned off")).to_be_visible()
    screenshot(page, "login-sso-only")

    sign_in_at_provider(page, provider, "u-bob")
    expect(page).to_have_url(f"{base_url}/")
    expect(page.locator("#nav-profile")).to_have_text("bob")
    assert "Member of Research" in roles_on_profile(page)

    # The provider's admin moves bob from the team's members to its approvers.
    provider.set_user("u-bob", username="bob", groups=["research-leads"])
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login/$"))
    sign_in_at_provider(page, provider, "u-bob")
    expect(page.locator("#nav-profile")).to_have_text("bob")
    roles = roles_on_profile(page)
    assert "Approver of Research" in roles and "Member of" not in roles
    screenshot(page, "profile-after-sso-roles-changed")


def test_a_refused_single_sign_on_says_what_to_do(
    page: Page, provider: Provider, settings: Any, base_url: str
) -> None:
    sso_on(settings, provider, BERTH_LOCAL_ACCOUNTS="false")
    provider.set_user("u-cat", username="cat", groups=["marketing"])

    page.goto("/login/")
    sign_in_at_provider(page, provider, "u-cat")
    expect(page).to_have_url(f"{base_url}/login/")
    notice = page.get_by_role("alert")
    expect(notice).to_contain_text("none of the groups that give access to Berth")
    expect(notice).to_contain_text("Ask your platform team")
    expect(page.locator("#nav-profile")).to_have_count(0)  # not signed in
    screenshot(page, "login-sso-refused")
