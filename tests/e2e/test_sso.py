"""Single sign-on in Chromium, against a real OpenID provider on loopback
(tests/oidc_provider/): the sign-in page's button, the provider's form, and back in the chat
with the provider's groups applied; and the sign-ins that must be refused, each with a
message that says why, signing no one in."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from agents.models import AgentProfile
from tests.e2e.conftest import MOBILE
from tests.e2e.test_accessibility import assert_accessible

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PASSWORD = "provider-password-1"
BUTTON = "Sign in with Test IdP"


def restricted_profile(name: str, group: str) -> AgentProfile:
    profile = AgentProfile.objects.create(name=name, slug=name.lower().replace(" ", "-"))
    profile.allowed_groups.add(Group.objects.get_or_create(name=group)[0])
    return profile


def sign_in_at_provider(page, username: str) -> None:
    expect(page.get_by_role("heading", name="Test identity provider")).to_be_visible()
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(PASSWORD)
    page.get_by_role("button", name="Continue").click()


def test_signing_in_through_the_provider_lands_in_the_chat_with_its_groups(
    stack, open_tab, sso_site, identity_provider_clean
):
    restricted_profile("Research helper", "research")
    restricted_profile("Finance helper", "finance")
    identity_provider_clean.user("ada", PASSWORD, email="ada@example.test",
                                 groups=("research", "chat-admins"))  # fmt: skip
    site = sso_site(OIDC_STAFF_GROUP="chat-admins")

    tab = open_tab(daphne=site, path="/accounts/login/", viewport=MOBILE)
    page = tab.page
    assert_accessible(tab)
    page.get_by_role("link", name=BUTTON).click()
    sign_in_at_provider(page, "ada")

    expect(page).to_have_url(f"{site.url}/")
    picker = page.locator("#profile-select")
    expect(picker.locator("option[value='research-helper']")).to_have_count(1)
    expect(picker.locator("option[value='finance-helper']")).to_have_count(0)
    ada = User.objects.get(username="ada")
    assert set(ada.groups.values_list("name", flat=True)) == {"research"}
    assert ada.is_staff
    assert tab.errors == []


def test_a_wrong_audience_an_expired_token_and_a_foreign_state_are_refused(
    stack, browser, open_tab, sso_site, identity_provider_clean
):
    provider = identity_provider_clean
    restricted_profile("Research helper", "research")
    provider.user("grace", PASSWORD, groups=("research",))
    site = sso_site()
    tab = open_tab(daphne=site, path="/accounts/login/")
    page = tab.page
    signed_in_at_provider = False
    for fault, reason in [
        ("wrong_audience", "The identity provider's token was issued for another application."),
        ("expired", "The identity provider's token has expired; please sign in again."),
    ]:
        provider.fault(fault)
        page.goto("/accounts/login/")
        page.get_by_role("link", name=BUTTON).click()
        if not signed_in_at_provider:  # the provider remembers its own sign-in
            sign_in_at_provider(page, "grace")
            signed_in_at_provider = True
        expect(page).to_have_url(f"{site.url}/accounts/login/")
        alert = page.get_by_role("alert")
        expect(alert).to_contain_text("Single sign-on failed")
        expect(alert).to_contain_text(reason[:1].lower() + reason[1:])
    provider.fault("")

    # The provider's answer for this browser's sign-in, opened in another browser that
    # started a sign-in of its own: the state is not one it started.
    # The answer is read from the redirects, not followed: the request API shares the
    # tab's cookies, its chatsite session (which keeps the state) and the provider's.
    started = page.request.get("/accounts/sso/start/", max_redirects=0)
    provider_answer = page.request.get(started.headers["location"], max_redirects=0)
    answer = provider_answer.headers["location"]
    assert "/accounts/sso/callback/?code=" in answer
    other = browser.new_context(base_url=site.url)
    try:
        other_page = other.new_page()
        other_page.goto("/accounts/sso/start/")  # its own state, then the provider's form
        expect(other_page.get_by_role("heading", name="Test identity provider")).to_be_visible()
        other_page.goto(answer)
        expect(other_page).to_have_url(f"{site.url}/accounts/login/")
        expect(other_page.get_by_role("alert")).to_contain_text(
            "this answer does not belong to a sign-in started in this browser"
        )
        other_page.goto("/")
        expect(other_page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    finally:
        other.close()

    assert not User.objects.filter(username__startswith="grace").exists()
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    # The same answer, in the browser that started that sign-in, is good: the refusal was
    # the state's.
    page.goto(answer)
    expect(page).to_have_url(f"{site.url}/")
    assert User.objects.filter(username="grace").exists()
