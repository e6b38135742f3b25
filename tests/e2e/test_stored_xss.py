"""Stored XSS: payloads saved in a conversation title, a user message, a profile name, a
model answer and a tool output stay text on every page that shows them, in Chromium.

``tests/e2e/test_safety.py`` covers the thread's rendering of model and tool text in depth;
this test puts payloads everywhere a user or staff member can store text and looks at the
whole document: no dialog, no global set, no element the page did not write itself.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import ToolConfig
from agents.services.conversations import conversation_create, conversation_set_archived
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def payload(where: str, *, short: bool = False) -> str:
    """Markup that would run script in an element, an attribute, or a JSON <script> block."""
    if short:  # for fields of 100 characters
        return f'{where} <img src=x onerror=alert(1)>"><script>alert(2)</script>'
    return (
        f"{where} <img src=x onerror=\"window.__pwned='{where}';alert('{where}')\">"
        f'"><svg onload="window.__pwned=\'{where}-attr\'"></svg>'
        f"</script><script>window.__pwned='{where}-json'</script>"
    )


def assert_document_clean(tab) -> None:
    page = tab.page
    assert tab.dialogs == [], f"a dialog opened: {tab.dialogs}"
    assert page.evaluate("window.__pwned") is None
    scripts = page.locator("script").evaluate_all(
        "nodes => nodes.map(s => [s.type, s.getAttribute('src') || ''])"
    )
    for kind, src in scripts:
        # Data blocks, the app's files, and Django's JavaScript catalogue of its strings.
        from_the_app = src.startswith("/static/") or src.partition("?")[0] == "/jsi18n/"
        assert kind == "application/json" or from_the_app, (kind, src)
    assert page.locator("body img, body svg:not([aria-hidden]) image, body iframe").count() == 0
    handlers = page.locator("body *").evaluate_all(
        "nodes => nodes.flatMap(n => [...n.attributes].map(a => a.name))"
        ".filter(name => name.startsWith('on'))"
    )
    assert handlers == []
    assert tab.errors == []


def test_payloads_stored_everywhere_stay_text(stack, open_tab, user, model_name):
    notes = ToolConfig.objects.create(
        name="xss_notes",
        kind="lookup_table",
        description="Looks up a note.",
        config={"table": {"n": payload("tool")}},
    )
    profile = stack.profile(model_name, tools=())
    profile.tools.set([notes])
    profile.name = payload("profile", short=True)
    profile.save()
    stack.model.script(
        model_name,
        [
            Reply("Thought: Look it up.\nAction: xss_notes\nAction Input: n"),
            Reply(f"Thought: Done.\nFinal Answer: {payload('answer')}"),
        ],
    )
    titled = conversation_create(owner=user, profile=profile, title=payload("title"))
    archived = conversation_create(owner=user, profile=profile, title=payload("archived"))
    conversation_set_archived(conversation=archived, archived=True)

    tab = open_tab(user, path=f"/c/{titled.pk}/")
    page = tab.page
    expect(page.locator("#conversation-title")).to_contain_text("title <img src=x")
    ask(page, payload("message"))
    expect(page.locator(".msg.assistant .answer")).to_contain_text("answer <img src=x")
    expect(page.locator(".msg.user").last).to_contain_text("message <img src=x")
    assert_document_clean(tab)

    # Drawn again from what was stored: the thread, the sidebar and the profile picker.
    page.reload()
    expect(page.locator(".msg.assistant .answer")).to_contain_text("answer <img src=x")
    expect(page.locator("#profile-select")).to_contain_text("profile <img src=x")
    assert_document_clean(tab)

    for path, shown in (("/", "title <img src=x"), ("/archived/", "archived <img src=x")):
        other = open_tab(user, path=path)
        expect(other.page.locator("body")).to_contain_text(shown)
        assert_document_clean(other)
