"""The API keys page in the browser: reached from the user menu, a key made and shown once,
revoked; accessible (axe) and usable at 375 px wide, light and dark."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.models import ApiKey
from agents.services.api_keys import api_key_hash
from tests.e2e.conftest import DESKTOP, MOBILE
from tests.e2e.test_accessibility import assert_accessible, dark, light
from tests.e2e.test_user_menu import open_user_menu

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize(
    ("viewport", "scheme"), [(DESKTOP, light), (MOBILE, dark)], ids=["desktop-light", "mobile-dark"]
)
def test_make_see_once_and_revoke_a_key(stack, open_tab, user, viewport, scheme):
    tab = open_tab(user, viewport=viewport, path="/", before_load=scheme)
    page = tab.page
    if viewport == MOBILE:
        page.get_by_role("button", name="Open the conversation list").click()
    open_user_menu(page).get_by_role("menuitem", name="API keys").click()
    expect(page.get_by_role("heading", name="API keys")).to_be_visible()
    assert_accessible(tab)

    page.get_by_label("Name").fill("Nightly report")
    page.get_by_label("Chat: start runs").uncheck()
    page.get_by_role("button", name="Create key").click()

    secret = page.get_by_label("Key", exact=True).input_value()
    key = ApiKey.objects.get(owner=user)
    assert key.secret_hash == api_key_hash(secret)
    assert key.scopes == ["read"]
    # Nothing is wider than the screen: the long secret wraps or scrolls inside its field.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= viewport["width"]
    assert_accessible(tab)

    page.reload()
    expect(page.get_by_label("Key", exact=True)).to_have_count(0)
    page.get_by_role("button", name="Revoke “Nightly report”").click()
    expect(page.get_by_text("revoked", exact=False)).to_be_visible()
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert_accessible(tab)
