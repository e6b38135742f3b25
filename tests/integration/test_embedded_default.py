"""`make run` with nothing configured: no DATABASE_URL and no REDIS_URL.

The app keeps its data in SQLite under its var folder and starts a Redis of its own; the
person at the terminal signs in with the printed password, sends a message, and the offline
demo model's answer comes back through the worker. Part of the smoke set CI runs on SQLite.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.processes import BASE_DIR, process_env

pytestmark = [pytest.mark.integration, pytest.mark.smoke, pytest.mark.embedded]

READY_TIMEOUT = 90.0
ANSWER_TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_open(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
        return True
    return False


def _unconfigured_env(var_dir: Path) -> dict[str, str]:
    """The suite's process environment less everything `make run` can do without."""
    env = process_env(CHATSITE_VAR_DIR=str(var_dir), SCHEDULE_TICK_SECONDS="1")
    for name in ("DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    return env


class _Browser:
    """Cookies and CSRF as a browser keeps them, over plain http on loopback."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def csrf(self) -> str:
        return next(cookie.value for cookie in self.cookies if cookie.name == "csrftoken")

    def get(self, path: str) -> tuple[int, str]:
        with self.opener.open(self.base_url + path, timeout=30) as response:
            return response.status, response.read().decode()

    def sign_in(self, username: str, password: str) -> str:
        """The path the sign-in form lands on."""
        self.get("/accounts/login/")
        form = urllib.parse.urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": self.csrf()}
        ).encode()
        request = urllib.request.Request(self.base_url + "/accounts/login/", data=form)
        with self.opener.open(request, timeout=30) as response:
            return urllib.parse.urlsplit(response.url).path

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.base_url + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json", "X-CSRFToken": self.csrf()},
        )
        with self.opener.open(request, timeout=30) as response:
            return response.status, json.loads(response.read())


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *command],
        cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_make_run_with_nothing_configured_answers_a_first_message_on_sqlite(tmp_path):
    env = _unconfigured_env(tmp_path)
    migrated = _run(["migrate", "--noinput"], env)
    assert migrated.returncode == 0, migrated.stderr
    assert (tmp_path / "db.sqlite3").is_file()

    port = _free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--concurrency", "2"],
            cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        while not (_port_open(port) and " ready." in log_path.read_text(errors="replace")):
            assert serve.poll() is None, log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.2)
        output = log_path.read_text(errors="replace")
        assert "REDIS_URL is unset: started an embedded Redis" in output
        password = re.search(r"Created the first user: admin / (\S+)", output)
        assert password, output

        browser = _Browser(f"http://127.0.0.1:{port}")
        assert browser.sign_in("admin", password.group(1)) == "/"
        status, conversation = browser.api("POST", "/api/conversations/", {})
        assert status == 201
        messages = f"/api/conversations/{conversation['id']}/messages/"
        status, sent = browser.api("POST", messages, {"content": "Hello?", "client_id": "c1"})
        assert status == 201
        assert sent["run"]["status"] == "queued"

        deadline = time.monotonic() + ANSWER_TIMEOUT
        while True:
            _, read = browser.api("GET", f"/api/conversations/{conversation['id']}/")
            answers = [m for m in read["messages"] if m["role"] == "assistant"]
            if answers:
                break
            assert time.monotonic() < deadline, (read, log_path.read_text(errors="replace"))
            time.sleep(0.2)
        assert [m["role"] for m in read["messages"]] == ["user", "assistant"]
        assert answers[0]["content"].strip()
        assert answers[0]["run_id"] == sent["run"]["id"]
        assert read["events"][-1]["type"] == "run.finished"
        # celery beat runs beside the worker on the same SQLite file, its entry in the
        # database: its ticks reach the worker and the schedules' task runs there.
        deadline = time.monotonic() + ANSWER_TIMEOUT
        while not re.search(
            r"Task agents\.schedules_fire_due\[[0-9a-f-]+\] succeeded",
            log_path.read_text(errors="replace"),
        ):
            assert serve.poll() is None, log_path.read_text(errors="replace")
            assert time.monotonic() < deadline, log_path.read_text(errors="replace")
            time.sleep(0.2)

        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=60) == 0, log_path.read_text(errors="replace")
    finally:
        # Whatever happened, leave no process behind.
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(serve.pid).children(recursive=True):
                child.kill()
        if serve.poll() is None:
            serve.kill()
            serve.wait()
