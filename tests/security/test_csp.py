"""One Content-Security-Policy on every response: pages, the admin, the API, error pages."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from agents.services.conversations import conversation_create

pytestmark = pytest.mark.django_db

STRICT = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "frame-ancestors": "'none'",
    "connect-src": "'self' ws://testserver wss://testserver",
}


def assert_strict_csp(response) -> None:
    header = response.get("Content-Security-Policy")
    assert header, f"{response.status_code} response without a CSP"
    directives = dict(part.strip().split(" ", 1) for part in header.split(";"))
    for name, value in STRICT.items():
        assert directives[name] == value, (name, directives)


def assert_nothing_inline(html: str) -> None:
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag or 'type="application/json"' in tag, tag
    assert "<style" not in html
    assert not re.search(r"\sstyle=", html), "inline style attribute"
    assert not re.search(r"\son[a-z]+=", html), "inline event handler"


@pytest.fixture(autouse=True)
def _plain_http(settings):
    """The test client speaks plain HTTP, and no static files were collected."""
    settings.SECURE_SSL_REDIRECT = False
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture
def staff(client, make_user):
    admin = make_user("root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    return admin


def test_pages_and_the_sign_in_page(client, user):
    assert_strict_csp(client.get("/accounts/login/"))
    client.force_login(user)
    assert_strict_csp(client.get("/"))


def test_the_api(client, user):
    assert_strict_csp(client.get("/api/conversations/"))  # 403, not signed in
    client.force_login(user)
    response = client.get("/api/conversations/")
    assert response.status_code == 200
    assert_strict_csp(response)


@pytest.mark.parametrize(
    "path",
    [
        "/admin/",
        "/admin/agents/agentprofile/",
        "/admin/agents/agentprofile/add/",
        "/admin/agents/toolconfig/add/",
        "/admin/agents/modelconfig/add/",
        "/admin/agents/agentrun/",
    ],
)
def test_the_admin_carries_the_policy_and_needs_nothing_inline(client, staff, path):
    response = client.get(path)
    assert response.status_code == 200
    assert_strict_csp(response)
    assert_nothing_inline(response.content.decode())


def test_the_admin_sign_in_page(client):
    response = client.get("/admin/login/")
    assert response.status_code == 200
    assert_strict_csp(response)
    assert_nothing_inline(response.content.decode())


def test_the_admin_page_of_a_run_needs_nothing_inline(client, staff, user):
    from agents.models import AgentRun
    from agents.services.conversations import message_send

    conversation = conversation_create(owner=user)
    message_send(conversation=conversation, user=user, content="hi", client_id="c1")
    run = AgentRun.objects.get(conversation=conversation)
    response = client.get(f"/admin/agents/agentrun/{run.pk}/change/")
    assert response.status_code == 200
    assert_strict_csp(response)
    assert_nothing_inline(response.content.decode())


def test_not_found(client, user):
    assert_strict_csp(client.get("/no/such/page/"))
    client.force_login(user)
    response = client.get("/api/conversations/999999/")
    assert response.status_code == 404
    assert_strict_csp(response)


@pytest.mark.urls("tests.security.csp_urls")
def test_server_error_and_forbidden(client):
    client.raise_request_exception = False
    crashed = client.get("/test-crash/")
    assert crashed.status_code == 500
    assert_strict_csp(crashed)
    forbidden = client.get("/test-forbidden/")
    assert forbidden.status_code == 403
    assert_strict_csp(forbidden)


def test_a_csrf_failure_page(user):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "x", "password": "y"})
    assert response.status_code == 403
    assert_strict_csp(response)
    html = response.content.decode()
    assert "Please try again" in html
    assert_nothing_inline(html)


def test_a_view_that_sets_its_own_policy_keeps_it(rf):
    from django.http import HttpResponse

    from agents.middleware import ContentSecurityPolicyMiddleware

    own = HttpResponse()
    own["Content-Security-Policy"] = "default-src 'none'"
    middleware = ContentSecurityPolicyMiddleware(lambda request: own)
    assert middleware(rf.get("/"))["Content-Security-Policy"] == "default-src 'none'"


def test_a_request_for_a_host_the_site_does_not_serve_gets_the_policy_too(client):
    """Django answers a Host outside ALLOWED_HOSTS with a 400; that page carries the policy
    as well, allowing sockets only to the page's own origin (there is no host to name)."""
    response = client.get("/accounts/login/", HTTP_HOST="not-this-site.invalid")

    assert response.status_code == 400
    header = response.get("Content-Security-Policy")
    assert header, "the 400 page has no CSP"
    directives = dict(part.strip().split(" ", 1) for part in header.split(";"))
    for name, value in STRICT.items():
        expected = "'self'" if name == "connect-src" else value
        assert directives[name] == expected, (name, directives)
