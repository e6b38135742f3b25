"""Single sign-on against a real OpenID provider on loopback (tests/oidc_provider/), over
plain HTTP: a chatsite daphne with SSO on, the provider's login form, the code flow's
redirects. The browser's side of it is tests/e2e/test_sso.py."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
import requests
from django.contrib.auth.models import Group, User

from agents.models import ProviderIdentity

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "provider-password-1"


class _HiddenInputs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}

    def handle_starttag(self, tag, attrs) -> None:
        values = dict(attrs)
        if tag == "input" and values.get("type") == "hidden" and values.get("name"):
            self.fields[values["name"]] = values.get("value") or ""


def sign_in_through_provider(
    site_url: str, username: str, password: str = PASSWORD
) -> tuple[requests.Session, requests.Response]:
    """A fresh client that presses the sign-in page's button, signs in on the provider's
    form and follows the redirects back; the last response and the client."""
    http = requests.Session()
    http.trust_env = False  # loopback only, whatever proxy the environment names
    at_provider = http.get(f"{site_url}/accounts/sso/start/", timeout=30)
    assert "Test identity provider" in at_provider.text, at_provider.text[:2000]
    form = _HiddenInputs()
    form.feed(at_provider.text)
    landed = http.post(
        at_provider.url,
        data={**form.fields, "username": username, "password": password},
        timeout=30,
    )
    return http, landed


def user_groups(username: str) -> set[str]:
    return set(User.objects.get(username=username).groups.values_list("name", flat=True))


def test_groups_follow_the_provider_at_every_sign_in(sso_site, identity_provider_clean):
    provider = identity_provider_clean
    for name in ("research", "finance", "granted-here"):
        Group.objects.create(name=name)
    site = sso_site(OIDC_MANAGED_GROUPS="research,finance,chat-admins",
                    OIDC_STAFF_GROUP="chat-admins")  # fmt: skip
    provider.user("lin", PASSWORD, email="lin@example.test",
                  groups=("research", "finance", "chat-admins", "unknown-here"))  # fmt: skip

    _http, landed = sign_in_through_provider(site.url, "lin")
    assert landed.status_code == 200, landed.text[:2000]
    assert landed.url == f"{site.url}/"
    assert 'id="profile-select"' in landed.text  # the chat page
    lin = User.objects.get(username="lin")
    assert lin.email == "lin@example.test"
    assert lin.is_staff
    assert not lin.has_usable_password()
    # "chat-admins" and "unknown-here" have no Django group: not created (OIDC_CREATE_GROUPS).
    assert user_groups("lin") == {"research", "finance"}
    assert ProviderIdentity.objects.get(user=lin).issuer == provider.issuer

    # A group granted here is not the claim's to manage; the provider drops two of its own.
    lin.groups.add(Group.objects.get(name="granted-here"))
    provider.user("lin", PASSWORD, email="lin@example.test", groups=("research",))
    _http, landed = sign_in_through_provider(site.url, "lin")
    assert landed.url == f"{site.url}/"
    assert user_groups("lin") == {"research", "granted-here"}
    assert not User.objects.get(username="lin").is_staff
    assert User.objects.count() == 1  # the same user, found by the provider's subject


def test_a_local_account_of_the_same_name_is_not_taken_over(sso_site, identity_provider_clean):
    local = User.objects.create_user("sam", email="sam@example.test", password="local-pass-1")
    site = sso_site()
    identity_provider_clean.user("sam", PASSWORD, email="sam@example.test")
    _http, landed = sign_in_through_provider(site.url, "sam")
    assert landed.url == f"{site.url}/"
    created = User.objects.exclude(pk=local.pk).get()
    assert created.username == "sam-2"
    assert not hasattr(User.objects.get(pk=local.pk), "provider_identity")


def test_with_password_sign_in_off_the_form_post_is_refused(sso_site, identity_provider_clean):
    User.objects.create_user("pat", password="local-pass-1")
    site = sso_site(SIGNIN_PASSWORD_ENABLED="0")
    http = requests.Session()
    http.trust_env = False
    page = http.get(f"{site.url}/accounts/login/", timeout=30)
    assert "Sign in with Test IdP" in page.text
    assert 'name="password"' not in page.text
    token = http.cookies["csrftoken"]
    refused = http.post(
        f"{site.url}/accounts/login/",
        data={"csrfmiddlewaretoken": token, "username": "pat", "password": "local-pass-1"},
        headers={"Referer": f"{site.url}/accounts/login/"},
        allow_redirects=False,
        timeout=30,
    )
    assert refused.status_code == 403
    assert "switched off" in refused.text
    admin = http.post(
        f"{site.url}/admin/login/",
        data={"csrfmiddlewaretoken": token, "username": "pat", "password": "local-pass-1"},
        allow_redirects=False,
        timeout=30,
    )
    assert admin.status_code == 403
    assert "sessionid" not in http.cookies
    # The provider still signs in.
    identity_provider_clean.user("pat", PASSWORD)
    _http, landed = sign_in_through_provider(site.url, "pat")
    assert landed.url == f"{site.url}/"
    assert re.search(r'id="profile-select"', landed.text)


def test_signing_out_closes_the_sockets_of_a_provider_sign_in(sso_site, identity_provider_clean):
    """The sign-out rule of every sign-in (docs/protocol.md, close 4401) holds for this one.

    Read with websockets' asyncio client, not the sync one the other tests share: the server
    aborts a socket whose client has not answered its close within a second, and when the
    sync client finds its answer cannot be written it drops the frames it read with the close
    (the signed_out frame among them). On a loaded machine its reading thread can be that late;
    the asyncio client hands every frame it read on whatever happens to its answer.
    """
    import asyncio

    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    from agents.services.conversations import conversation_create

    site = sso_site()
    identity_provider_clean.user("kim", PASSWORD)
    http, landed = sign_in_through_provider(site.url, "kim")
    assert landed.url == f"{site.url}/"
    conversation = conversation_create(owner=User.objects.get(username="kim"), title="SSO")
    ws_url = site.ws_url(f"/ws/conversations/{conversation.pk}/?after_seq=0")
    cookie = f"sessionid={http.cookies['sessionid']}"

    def sign_out() -> int:
        return http.post(
            f"{site.url}/accounts/logout/",
            headers={"X-CSRFToken": http.cookies["csrftoken"]},
            allow_redirects=False,
            timeout=30,
        ).status_code

    async def frames_after_signing_out() -> tuple[int, list[dict], int | None]:
        async with connect(ws_url, additional_headers={"Cookie": cookie}, origin=site.url) as ws:
            await ws.send(json.dumps({"type": "ping"}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] == "pong"
            status = await asyncio.to_thread(sign_out)
            frames: list[dict] = []
            try:
                while True:
                    frames.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
            except ConnectionClosed as closed:
                received = closed.rcvd
            return status, frames, received.code if received else None

    status, frames, close_code = asyncio.run(frames_after_signing_out())
    assert status == 302
    assert [(frame["type"], frame.get("code")) for frame in frames] == [("error", "signed_out")]
    assert close_code == 4401
