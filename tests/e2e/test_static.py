"""The page's scripts load from whitenoise with hashed names, as production serves them."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.services.conversations import conversation_create
from tests.e2e.conftest import DESKTOP, MANIFEST_STORAGE, WAIT_MS

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_chat_page_runs_with_production_static_files(
    browser, collected_static, stack, spawn_daphne, user
):
    daphne = spawn_daphne(STATICFILES_BACKEND=MANIFEST_STORAGE)
    conversation_create(owner=user, title="Hashed and served")
    context = browser.new_context(viewport=DESKTOP, base_url=daphne.url)
    context.set_default_timeout(WAIT_MS)
    name, value = stack.session_cookie(user).split("=", 1)
    context.add_cookies([{"name": name, "value": value, "url": daphne.url}])
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
    try:
        page.goto("/")
        # The bundle by its plain URL (the later bundle imports it by that URL: one copy).
        script = page.locator("script[type=module]").get_attribute("src")
        assert script == "/static/js/chat_start.bundle.js"
        # The sidebar is drawn by the script, so seeing it means every module loaded.
        expect(page.get_by_role("link", name="Hashed and served")).to_be_visible()
        assert errors == []
        assert failed == []
        # Browsers ask for /favicon.ico whatever the page says: it leads to the icon.
        icon = page.request.get("/favicon.ico")
        assert icon.status == 200
        assert icon.headers["content-type"].startswith("image/svg+xml")
    finally:
        context.close()
