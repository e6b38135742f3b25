"""English and Simplified Chinese: how a request's language is chosen and remembered, the
user's theme, and the zh-Hans catalogue being complete and compiled."""

from __future__ import annotations

import gettext
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.urls import reverse

from agents.models import AgentProfile, UserPreference
from agents.preferences import THEME_COOKIE, socket_language
from agents.services.conversations import conversation_create
from agents.services.defaults import default_profile

LOCALE_DIR = Path(django_settings.BASE_DIR) / "locale"
CATALOGUES = sorted(LOCALE_DIR.glob("*/LC_MESSAGES/*.po"))


@pytest.fixture(autouse=True)
def _plain_http_and_private_cache(settings):
    settings.SECURE_SSL_REDIRECT = False
    caches = {name: dict(config) for name, config in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = f"test-i18n-{uuid.uuid4().hex}"
    settings.CACHES = caches


def html_lang(response) -> str:
    match = re.search(r'<html lang="([^"]+)"', response.content.decode())
    assert match, "the page names its language"
    return match.group(1)


# --------------------------------------------------------------------------------------
# Choosing the language
# --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_browsers_accept_language_picks_simplified_chinese(client):
    response = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")
    assert html_lang(response) == "zh-hans"
    assert response["Content-Language"] == "zh-hans"
    page = response.content.decode()
    assert "登录" in page
    assert ">Sign in<" not in page


@pytest.mark.django_db
def test_english_is_the_default_and_unknown_languages_fall_back_to_it(client):
    response = client.get(reverse("login"), HTTP_ACCEPT_LANGUAGE="fr-FR,de;q=0.8")
    assert html_lang(response) == "en"
    assert "Sign in" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("stored", "header", "expected"), [("en", "zh-CN", "en"), ("zh-hans", "en-US", "zh-hans")]
)
def test_a_signed_in_users_stored_choice_wins_over_the_header(
    client, user, stored, header, expected
):
    UserPreference.objects.create(user=user, language=stored)
    client.force_login(user)  # sign-in copies the stored choice into the session
    response = client.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE=header)
    assert html_lang(response) == expected


@pytest.mark.django_db
def test_the_seeded_agents_texts_are_in_the_readers_language_until_staff_edit_them(client, user):
    profile = default_profile()
    UserPreference.objects.create(user=user, language="zh-hans")
    client.force_login(user)

    page = client.get(reverse("chat")).content.decode()
    assert "现在几点了？" in page
    assert "What time is it now?" not in page
    assert "一个会计算、会报时的助手。" in page

    profile.description = "Answers questions about our product."
    profile.save(update_fields=["description"])
    page = client.get(reverse("chat")).content.decode()
    assert "Answers questions about our product." in page
    # What is stored, and so what a prompt version holds, stays as it was written.
    assert "What time is it now?" in AgentProfile.objects.get(pk=profile.pk).suggested_prompts


@pytest.mark.django_db
def test_choosing_a_language_stores_it_for_the_user_and_this_browser(client, user):
    client.force_login(user)
    response = client.post(reverse("preferences"), {"language": "zh-hans", "next": "/archived/"})
    assert response.status_code == 302
    assert response["Location"] == "/archived/"
    assert UserPreference.objects.get(user=user).language == "zh-hans"
    assert response.cookies[django_settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    page = client.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="en")
    assert html_lang(page) == "zh-hans"
    assert "有问题，尽管问" in page.content.decode()


@pytest.mark.django_db
def test_the_choice_follows_the_user_to_another_browser(user):
    first = Client()
    first.force_login(user)
    first.post(reverse("preferences"), {"language": "zh-hans", "theme": "dark"})

    other = Client()  # no cookies of the first browser
    other.force_login(user)
    response = other.get(reverse("chat"), HTTP_ACCEPT_LANGUAGE="en-US")
    assert html_lang(response) == "zh-hans"
    assert 'data-theme="dark"' in response.content.decode()
    # The other browser's cookies catch up, so its sign-in page follows too after sign-out.
    assert response.cookies[django_settings.LANGUAGE_COOKIE_NAME].value == "zh-hans"
    assert response.cookies[THEME_COOKIE].value == "dark"


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["language", "theme"])
def test_an_unknown_language_or_theme_is_refused_and_nothing_changes(client, user, field):
    UserPreference.objects.create(user=user, language="en", theme="light")
    client.force_login(user)
    response = client.post(
        reverse("preferences"), {field: "klingon"}, HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 400
    assert response.json()["message"] in {
        "That language is not available.",
        "That theme is not available.",
    }
    stored = UserPreference.objects.get(user=user)
    assert (stored.language, stored.theme) == ("en", "light")


@pytest.mark.django_db
def test_a_signed_out_visitor_can_choose_a_language_for_this_browser(client):
    response = client.post(
        reverse("preferences"), {"language": "zh-hans", "next": "/accounts/login/"}
    )
    assert response.status_code == 302
    assert UserPreference.objects.count() == 0
    assert html_lang(client.get(reverse("login"))) == "zh-hans"


@pytest.mark.django_db
def test_an_offsite_next_is_not_followed(client, user):
    client.force_login(user)
    response = client.post(
        reverse("preferences"), {"theme": "dark", "next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("chat")


# --------------------------------------------------------------------------------------
# The theme
# --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_theme_is_on_the_page_before_any_script_runs(client, user):
    client.force_login(user)
    assert 'data-theme="system"' in client.get(reverse("chat")).content.decode()
    response = client.post(
        reverse("preferences"), {"theme": "dark"}, HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 200
    assert UserPreference.objects.get(user=user).theme == "dark"
    page = client.get(reverse("chat")).content.decode()
    assert 'data-theme="dark"' in page
    assert '<meta name="color-scheme" content="dark">' in page


# --------------------------------------------------------------------------------------
# Strings the server sends to scripts: the JavaScript catalogue, refusals
# --------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_javascript_catalogue_is_served_in_the_requests_language(client):
    response = client.get(reverse("javascript-catalog"), HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert response.status_code == 200
    body = response.content.decode()
    assert "\\u4eca\\u5929" in body or "今天" in body  # "Today"
    assert "Content-Security-Policy" in response  # a same-origin script the CSP allows


@pytest.mark.django_db
def test_api_refusals_are_in_the_users_language(client, user):
    conversation = conversation_create(owner=user, profile=None)
    client.force_login(user)
    url = reverse("api:conversation-regenerate", args=[conversation.pk])
    response = client.post(url, HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert response.status_code == 400
    assert response.json()["message"] == "没有可以重新回答的消息。"
    english = client.post(url, HTTP_ACCEPT_LANGUAGE="en")
    assert english.json()["message"] == "There is no message to answer again."


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([(b"accept-language", b"zh-CN,zh;q=0.9")], "zh-hans"),
        ([(b"accept-language", b"en-GB")], "en"),
        ([(b"cookie", b"django_language=zh-hans"), (b"accept-language", b"en")], "zh-hans"),
        ([], "en"),
    ],
)
def test_a_sockets_language_is_chosen_as_a_pages_is(headers, expected):
    assert socket_language({"headers": headers}) == expected


# --------------------------------------------------------------------------------------
# The catalogue: complete, and compiled
# --------------------------------------------------------------------------------------


def _entries(po: Path) -> list[dict[str, object]]:
    """The entries of a .po file: msgid, its msgstr(s) and flags (gettext's own format)."""
    entries: list[dict[str, object]] = []
    current: dict[str, object] = {}
    key = ""
    for line in [*po.read_text(encoding="utf-8").splitlines(), ""]:
        if not line.strip():
            if current:
                entries.append(current)
            current, key = {}, ""
        elif line.startswith("#,"):
            current["flags"] = {flag.strip() for flag in line[2:].split(",")}
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            current[key] = str(current[key]) + line[1:-1]
        else:
            key, _, value = line.partition(" ")
            current[key] = value[1:-1]
    return [entry for entry in entries if entry.get("msgid")]


def test_there_is_a_catalogue_for_the_page_strings_and_the_scripts():
    names = {(po.parent.parent.name, po.stem) for po in CATALOGUES}
    assert names == {("zh_Hans", "django"), ("zh_Hans", "djangojs")}


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda po: str(po.relative_to(LOCALE_DIR)))
def test_every_string_is_translated_and_none_is_fuzzy(po):
    entries = _entries(po)
    assert len(entries) > 50
    untranslated = [
        entry["msgid"]
        for entry in entries
        if not any(value for key, value in entry.items() if key.startswith("msgstr"))
    ]
    fuzzy = [entry["msgid"] for entry in entries if "fuzzy" in entry.get("flags", set())]  # type: ignore[operator]
    assert untranslated == []
    assert fuzzy == []


def test_every_string_of_the_code_is_in_the_catalogues(tmp_path):
    """A string added to the code but never extracted shows in English to zh-Hans readers,
    and the test above cannot see it: extract afresh, in a copy, and compare."""
    copy = tmp_path / "project"
    shutil.copytree(
        django_settings.BASE_DIR,
        copy,
        ignore=shutil.ignore_patterns(".*", "var", "tests", "bench", "__pycache__", "node_modules"),
    )
    for domain in ("django", "djangojs"):
        subprocess.run(
            [sys.executable, "manage.py", "makemessages", "-l", "zh_Hans", "-d", domain,
             "--no-obsolete", "--ignore=*/vendor/*"],
            cwd=copy, check=True, capture_output=True,
        )  # fmt: skip
    for po in CATALOGUES:
        extracted = copy / po.relative_to(django_settings.BASE_DIR)
        fresh = {entry["msgid"] for entry in _entries(extracted)}
        committed = {entry["msgid"] for entry in _entries(po)}
        assert fresh - committed == set(), f"not in {po.name}: run `make messages`, translate"
        assert committed - fresh == set(), f"no longer used, in {po.name}: run `make messages`"


@pytest.mark.parametrize("po", CATALOGUES, ids=lambda po: str(po.relative_to(LOCALE_DIR)))
def test_the_compiled_catalogue_is_in_step_with_its_po_file(po, tmp_path):
    """The .mo files are committed: one compiled from the .po now must say the same."""
    fresh = tmp_path / "fresh.mo"
    subprocess.run(["msgfmt", "--check", "-o", str(fresh), str(po)], check=True)
    committed = po.with_suffix(".mo")
    assert committed.exists(), f"{committed} is missing: run `make translations`"
    with fresh.open("rb") as f, committed.open("rb") as g:
        assert gettext.GNUTranslations(g)._catalog == gettext.GNUTranslations(f)._catalog, (
            f"{committed.name} is out of date: run `make translations`"
        )
