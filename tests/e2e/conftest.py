"""Browser tests: Debian's Chromium driven by Playwright against a real daphne and worker.

The processes come from ``tests/processes.py`` (``live_stack``); only the model is scripted.
Each test signs its user in by handing the browser a real session cookie, except the test of
the sign-in form itself.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.management import call_command
from django.test import override_settings

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 860}
MOBILE = {"width": 375, "height": 740}
# How long a browser-side wait may take before the test fails (a ceiling, not a measurement).
WAIT_MS = 30_000

_model_names = itertools.count(1)


@pytest.fixture(scope="session")
def collected_static(django_db_setup) -> None:
    """Daphne serves static files through whitenoise from STATIC_ROOT, as in production."""
    plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    with override_settings(STORAGES={"default": {}, "staticfiles": plain}):
        call_command("collectstatic", "--noinput", "--clear", verbosity=0)


@pytest.fixture(scope="session")
def _daphne_with_static(collected_static, daphne_server):
    # whitenoise indexes STATIC_ROOT when it starts: a daphne started before the collect (by
    # an earlier test module) would answer 404 for the page's scripts.
    daphne_server.restart()
    return daphne_server


@pytest.fixture
def stack(_daphne_with_static, live_stack):
    return live_stack


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)

    # Playwright's sync API keeps an event loop running in this thread, and Django refuses
    # database calls from a thread with a running loop. The tests' own ORM calls are plain
    # synchronous code, so lift the check while the browser is open.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
            )
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@dataclass
class Tab:
    """A browser page plus what it saw: dialogs that opened, script errors and CSP refusals."""

    page: Any
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def open_tab(browser, stack):
    contexts = []

    def open_(user=None, *, viewport: dict | None = None, path: str = "/", before_load=None) -> Tab:
        context = browser.new_context(viewport=viewport or DESKTOP, base_url=stack.daphne.url)
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        if user is not None:
            name, value = stack.session_cookie(user).split("=", 1)
            context.add_cookies([{"name": name, "value": value, "url": stack.daphne.url}])
        page = context.new_page()
        tab = Tab(page)

        def on_dialog(dialog):
            tab.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda error: tab.errors.append(str(error)))
        # A Content-Security-Policy violation is reported on the console as an error.
        page.on(
            "console",
            lambda message: (
                tab.errors.append(message.text)
                if message.type == "error" and "Content Security Policy" in message.text
                else None
            ),
        )
        if before_load is not None:
            before_load(page)
        page.goto(path)
        return tab

    yield open_
    for context in contexts:
        context.close()


@pytest.fixture
def model_name() -> str:
    """A model name no other test scripts: the scripted server is shared by the session."""
    return f"e2e-model-{next(_model_names)}"
