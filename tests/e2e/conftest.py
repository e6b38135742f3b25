"""Browser tests: Debian's Chromium driven by Playwright against a real daphne and worker.

The processes come from ``tests/processes.py`` (``live_stack``); only the model is scripted.
Each test signs its user in by handing the browser a real session cookie, except the test of
the sign-in form itself.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.conf import settings
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


MANIFEST_STORAGE = "whitenoise.storage.CompressedManifestStaticFilesStorage"
# Production's hashed names and manifest, without the gzip and Brotli copies whitenoise makes
# of every file (Django's admin and DRF's included): no test reads them, and making them cost
# each xdist worker several times the CPU of the collect itself.
HASHED_STORAGE = "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"


@pytest.fixture(scope="session")
def collected_static(django_db_setup) -> None:
    """Daphne serves static files through whitenoise from STATIC_ROOT, as in production.

    Collected with hashed names and the originals beside them, as production's storage
    leaves them, so the folder serves either storage setting (``MANIFEST_STORAGE`` reads the
    same manifest).
    """
    storages = {**settings.STORAGES, "staticfiles": {"BACKEND": HASHED_STORAGE}}
    with override_settings(STORAGES=storages):
        call_command("collectstatic", "--noinput", verbosity=0)


@pytest.fixture(scope="session")
def _daphne_with_static(collected_static, daphne_server):
    # whitenoise indexes STATIC_ROOT when it starts: a daphne started before the collect (by
    # an earlier test module) would answer 404 for the page's scripts.
    daphne_server.restart()
    return daphne_server


_TASK_RECEIVED = re.compile(r"Task [\w.]+\[([0-9a-f-]+)\] received")
_TASK_ENDED = re.compile(r"Task [\w.]+\[([0-9a-f-]+)\] (?:succeeded|raised|failed|retry)")


def _wait_until_worker_is_idle(worker, log_offset: int, timeout: float = 60.0) -> None:
    """Every run ended and every task the worker took during this test has finished.

    The database is flushed after each test; a worker still writing (the end of a run, a
    memory summary it enqueued) can deadlock with that flush. Only the log written since the
    test began counts: the session's worker may hold earlier tests' delayed retries. A worker
    still busy after ``timeout`` (a ceiling) fails the test, saying with what.
    """
    from agents.models import AgentRun

    deadline = time.monotonic() + timeout
    while True:
        log = worker.log_text()[log_offset:]
        busy = set(_TASK_RECEIVED.findall(log)) - set(_TASK_ENDED.findall(log))
        running = list(
            AgentRun.objects.exclude(status__in=AgentRun.TERMINAL_STATUSES).values_list(
                "pk", "status"
            )
        )
        if not busy and not running:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the worker was still busy {timeout:g} s after the test: tasks {sorted(busy)},"
                f" runs not ended {running}\n{log[-5000:]}"
            )
        time.sleep(0.1)


@pytest.fixture
def stack(_daphne_with_static, live_stack):
    log_offset = len(live_stack.worker.log_text())
    yield live_stack
    _wait_until_worker_is_idle(live_stack.worker, log_offset)


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

    def open_(
        user=None,
        *,
        viewport: dict | None = None,
        path: str = "/",
        before_load=None,
        daphne=None,  # another daphne than the session's (a test's own settings)
    ) -> Tab:
        url = (daphne or stack.daphne).url
        context = browser.new_context(viewport=viewport or DESKTOP, base_url=url)
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        if user is not None:
            name, value = stack.session_cookie(user).split("=", 1)
            context.add_cookies([{"name": name, "value": value, "url": url}])
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
