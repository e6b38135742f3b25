"""The pages: who may see them, what they carry, and the headers that keep them safe."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.urls import reverse

from agents import selectors
from agents.models import AgentProfile, Conversation, Message, ModelConfig
from agents.react.types import FinalAnswerStep
from agents.runs.store import run_claim, run_finish
from agents.services.conversations import conversation_create, message_send

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _plain_http_and_private_cache(settings):
    """Plain http, and a cache of our own, since send rate limits count there."""
    settings.SECURE_SSL_REDIRECT = False
    caches = {name: dict(config) for name, config in settings.CACHES.items()}
    caches["default"]["KEY_PREFIX"] = f"test-views-{uuid.uuid4().hex}"
    settings.CACHES = caches


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def page_state(response) -> dict:
    """The JSON the chat page hands its script (json_script, never executed)."""
    match = re.search(
        r'<script id="chat-state" type="application/json">(.*?)</script>',
        response.content.decode(),
        re.S,
    )
    assert match, "the chat page carries its state as a JSON data block"
    return json.loads(match.group(1))


# --------------------------------------------------------------------------------------
# Sign-in required
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["chat", "archived"])
def test_pages_send_anonymous_visitors_to_sign_in(client, name):
    url = reverse(name)
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


def test_a_conversation_page_needs_sign_in(client, user):
    conversation = conversation_create(owner=user)
    response = client.get(reverse("conversation", args=[conversation.pk]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_sign_in_with_the_form_then_see_the_chat(client, user):
    response = client.post(
        reverse("login"), {"username": "alice", "password": "pw-for-tests-1"}, follow=True
    )
    assert response.redirect_chain[-1][0] == reverse("chat")
    assert b"New chat" in response.content


def test_a_wrong_password_says_so_and_signs_nobody_in(client, user):
    response = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content
    assert "_auth_user_id" not in client.session


def test_sign_out_is_a_post(signed_in):
    assert signed_in.get(reverse("logout")).status_code == 405
    response = signed_in.post(reverse("logout"))
    assert response.status_code == 302
    assert response["Location"] == reverse("login")
    assert signed_in.get(reverse("chat")).status_code == 302


# --------------------------------------------------------------------------------------
# Other people's conversations
# --------------------------------------------------------------------------------------


def test_someone_elses_conversation_is_a_404(client, user, other_user):
    theirs = conversation_create(owner=other_user, title="Bob's secret plans")
    client.force_login(user)
    response = client.get(reverse("conversation", args=[theirs.pk]))
    assert response.status_code == 404
    assert b"secret plans" not in response.content
    assert b"does not exist, or it belongs to someone else" in response.content


def test_a_missing_conversation_is_the_same_404(signed_in):
    assert signed_in.get(reverse("conversation", args=[999999])).status_code == 404


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_the_sidebar_lists_only_my_conversations(client, user, other_user):
    mine = conversation_create(owner=user, title="Mine")
    conversation_create(owner=other_user, title="Not mine")
    client.force_login(user)
    state = page_state(client.get(reverse("chat")))
    assert [c["title"] for c in state["conversations"]] == ["Mine"]
    assert state["conversations"][0]["id"] == mine.pk
    assert b"Not mine" not in client.get(reverse("chat")).content


def test_archiving_someone_elses_conversation_is_a_404_and_changes_nothing(
    client, user, other_user
):
    theirs = conversation_create(owner=other_user)
    client.force_login(user)
    response = client.post(reverse("conversation_archive", args=[theirs.pk]), {"archived": "1"})
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.archived is False


# --------------------------------------------------------------------------------------
# The chat page
# --------------------------------------------------------------------------------------


@pytest.mark.smoke  # run on SQLite too (make test-sqlite)
def test_the_page_carries_the_stored_events_to_replay(signed_in, user):
    conversation = conversation_create(owner=user)
    message_send(conversation=conversation, user=user, content="What is 2+2?", client_id="c1")
    state = page_state(signed_in.get(reverse("conversation", args=[conversation.pk])))
    assert state["conversation"]["id"] == conversation.pk
    [created] = state["events"]
    assert created["type"] == "message.created"
    assert created["seq"] == 1
    assert created["message"]["content"] == "What is 2+2?"
    assert created["message"]["client_id"] == "c1"
    assert state["urls"]["conversation"] == f"/api/conversations/{conversation.pk}/"


def test_a_run_that_ends_while_the_page_is_read_still_shows_its_answer(
    signed_in, user, monkeypatch
):
    """The page's tree is read before its frames: an answer stored between the two reads is
    in the frames and not yet in the tree, so the page adds it and moves the branch to it.
    Read the other way round, the tree held the answer with the branch still ending at the
    question, and the page took the answer's frame for one it had: it never showed."""
    conversation = conversation_create(owner=user)
    sent = message_send(conversation=conversation, user=user, content="2+2?", client_id="c1")
    events_after = selectors.events_after

    def the_run_ends_first(**kwargs):
        run = run_claim(run_id=sent.run.pk, worker_id="w1")
        run_finish(run=run, step=FinalAnswerStep(text="4"), worker_id="w1")
        return events_after(**kwargs)

    monkeypatch.setattr(selectors, "events_after", the_run_ends_first)
    state = page_state(signed_in.get(reverse("conversation", args=[conversation.pk])))

    answer = Message.objects.get(conversation=conversation, role="assistant")
    tree_ids = {node[0] for node in state["tree"]["messages"]}
    assert tree_ids == {sent.message.pk}
    assert state["tree"]["active_leaf_id"] == sent.message.pk
    finished = [frame for frame in state["events"] if frame["type"] == "run.finished"]
    assert [frame["message"]["id"] for frame in finished] == [answer.pk]


def test_model_text_in_the_state_cannot_close_the_data_block(signed_in, user):
    conversation = conversation_create(owner=user, title="</script><script>alert(1)</script>")
    message_send(
        conversation=conversation,
        user=user,
        content="</script><img src=x onerror=alert(1)>",
    )
    response = signed_in.get(reverse("conversation", args=[conversation.pk]))
    html = response.content.decode()
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html
    state = page_state(response)
    assert state["events"][0]["message"]["content"] == "</script><img src=x onerror=alert(1)>"


def test_the_profile_picker_lists_the_profiles_i_may_use(signed_in, user):
    from django.contrib.auth.models import Group

    staff_only = AgentProfile.objects.create(name="Staff helper", slug="staff-helper")
    staff_only.allowed_groups.add(Group.objects.create(name="staff"))
    AgentProfile.objects.create(name="Open helper", slug="open-helper")
    html = signed_in.get(reverse("chat")).content.decode()
    assert 'value="open-helper"' in html
    assert 'value="staff-helper"' not in html


def test_the_empty_chat_offers_the_chosen_agents_suggestions_and_descriptions(signed_in):
    AgentProfile.objects.update(is_default=False)
    AgentProfile.objects.create(
        name="Maths",
        slug="maths",
        description="Does sums <carefully>.",
        suggested_prompts="What is 2 + 2?\nHalve <10>",
        is_default=True,
    )
    AgentProfile.objects.create(
        name="Clock", slug="clock", description="Tells the time.", suggested_prompts="Time?"
    )
    html = signed_in.get(reverse("chat")).content.decode()
    assert (
        '<ul class="suggestions" data-profile="maths" aria-label="Suggested prompts for Maths">'
    ) in html
    assert 'data-prompt="Halve &lt;10&gt;">Halve &lt;10&gt;</button>' in html
    # Another agent's suggestions are there for the picker to switch to, hidden for now.
    assert (
        '<ul class="suggestions" data-profile="clock" '
        'aria-label="Suggested prompts for Clock" hidden>' in html
    )
    assert 'data-description="Tells the time."' in html
    assert (
        '<p id="profile-description" class="profile-description">Does sums &lt;carefully&gt;.</p>'
        in html
    )


def test_starting_a_chat_creates_it_with_the_first_message(signed_in, user):
    response = signed_in.post(
        reverse("conversation_new"), {"content": "Hello there", "client_id": "first"}
    )
    conversation = Conversation.objects.get(owner=user)
    assert response.status_code == 302
    assert response["Location"] == reverse("conversation", args=[conversation.pk])
    [message] = conversation.messages.all()
    assert (message.content, message.client_id) == ("Hello there", "first")
    assert conversation.runs.count() == 1


def test_starting_a_chat_with_nothing_to_say_creates_nothing(signed_in, user):
    response = signed_in.post(reverse("conversation_new"), {"content": "   "})
    assert response.status_code == 302
    assert not Conversation.objects.filter(owner=user).exists()


def test_a_refused_first_message_keeps_the_text_and_creates_nothing(signed_in, user, settings):
    settings.CHAT_MAX_MESSAGE_CHARS = 10
    response = signed_in.post(reverse("conversation_new"), {"content": "far too long a message"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "longer than 10 characters" in html
    assert ">far too long a message</textarea>" in html
    assert not Conversation.objects.filter(owner=user).exists()


def test_archive_and_restore(signed_in, user):
    conversation = conversation_create(owner=user, title="Old trip notes")
    url = reverse("conversation_archive", args=[conversation.pk])

    assert signed_in.post(url, {"archived": "1"})["Location"] == reverse("chat")
    conversation.refresh_from_db()
    assert conversation.archived is True
    assert page_state(signed_in.get(reverse("chat")))["conversations"] == []
    assert b"Old trip notes" in signed_in.get(reverse("archived")).content

    restored = signed_in.post(url, {"archived": "0"})
    assert restored["Location"] == reverse("conversation", args=[conversation.pk])
    conversation.refresh_from_db()
    assert conversation.archived is False
    assert b"Nothing is archived" in signed_in.get(reverse("archived")).content


# --------------------------------------------------------------------------------------
# The demo model banner
# --------------------------------------------------------------------------------------


def test_the_demo_banner_shows_when_no_model_is_configured(signed_in, settings):
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""
    AgentProfile.objects.filter(is_default=True).update(model_config=None)
    response = signed_in.get(reverse("chat"))
    html = response.content.decode()
    assert 'id="demo-banner" role="note">' in html  # shown, not hidden
    assert "demo model" in html.lower()
    # The page's script keeps it in step with the agent picker.
    assert response.context["state"]["demo_profiles"] == ["assistant"]


def test_no_demo_banner_when_the_profile_has_a_real_model(signed_in, settings):
    settings.OPENAI_BASE_URL = ""
    real = ModelConfig.objects.create(
        name="real", base_url="http://127.0.0.1:9/v1", model="some-model"
    )
    AgentProfile.objects.filter(is_default=True).update(model_config=real)
    response = signed_in.get(reverse("chat"))
    # There for the agent picker to show, hidden for this profile.
    assert 'id="demo-banner" role="note" hidden>' in response.content.decode()
    assert response.context["state"]["demo_profiles"] == []


# --------------------------------------------------------------------------------------
# Sign-up and password reset are switched by settings
# --------------------------------------------------------------------------------------


def test_signup_is_off_by_default(client, settings):
    settings.CHAT_SIGNUP_ENABLED = False
    assert client.get(reverse("signup")).status_code == 404
    assert client.post(reverse("signup"), {"username": "eve"}).status_code == 404
    assert b"Create an account" not in client.get(reverse("login")).content


def test_signup_when_enabled_creates_the_account_and_signs_in(client, settings):
    settings.CHAT_SIGNUP_ENABLED = True
    assert b"Create an account" in client.get(reverse("login")).content
    response = client.post(
        reverse("signup"),
        {
            "username": "carol",
            "password1": "a-long-passphrase-9",
            "password2": "a-long-passphrase-9",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("chat")
    carol = get_user_model().objects.get(username="carol")
    assert client.session["_auth_user_id"] == str(carol.pk)


def test_signup_with_mismatched_passwords_explains_and_creates_nobody(client, settings):
    settings.CHAT_SIGNUP_ENABLED = True
    response = client.post(
        reverse("signup"),
        {"username": "dave", "password1": "a-long-passphrase-9", "password2": "different-9"},
    )
    assert response.status_code == 200
    assert b"didn" in response.content  # "The two password fields didn't match."
    assert not get_user_model().objects.filter(username="dave").exists()


def test_password_reset_is_hidden_without_email(client, settings):
    settings.EMAIL_BACKEND = ""
    assert client.get(reverse("password_reset")).status_code == 404
    assert b"Forgot your password" not in client.get(reverse("login")).content


def test_password_reset_sends_a_link_when_email_is_configured(client, settings, make_user):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.DEFAULT_FROM_EMAIL = "chatsite@localhost"
    make_user("erin", email="erin@example.com")
    assert b"Forgot your password" in client.get(reverse("login")).content
    response = client.post(reverse("password_reset"), {"email": "erin@example.com"})
    assert response["Location"] == reverse("password_reset_done")
    [sent] = mail.outbox
    assert sent.to == ["erin@example.com"]
    assert "/accounts/reset/" in sent.body


# --------------------------------------------------------------------------------------
# Content-Security-Policy and no inline script
# --------------------------------------------------------------------------------------


def csp_directives(response) -> dict[str, str]:
    header = response["Content-Security-Policy"]
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


@pytest.mark.parametrize("name", ["chat", "archived"])
def test_pages_carry_a_strict_csp(signed_in, name):
    directives = csp_directives(signed_in.get(reverse(name)))
    assert directives["script-src"] == "'self'"
    assert directives["object-src"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["connect-src"] == "'self' ws://testserver wss://testserver"


def test_the_sign_in_page_carries_the_csp_too(client):
    assert csp_directives(client.get(reverse("login")))["script-src"] == "'self'"


def test_no_page_has_inline_script(signed_in, user):
    conversation = conversation_create(owner=user)
    for url in [reverse("chat"), reverse("conversation", args=[conversation.pk])]:
        html = signed_in.get(url).content.decode()
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert 'src="' in tag or 'type="application/json"' in tag, tag
        assert not re.search(r"\son[a-z]+=", html), "no inline event handlers"


def test_favicon_ico_leads_to_the_sites_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302
    assert response["Location"].endswith("img/favicon.svg")


# --------------------------------------------------------------------------------------
# Custom instructions (the user menu's dialog)
# --------------------------------------------------------------------------------------


def test_custom_instructions_are_read_and_stored_by_their_owner_only(client, signed_in, other_user):
    url = reverse("custom_instructions")
    assert signed_in.get(url).json()["instructions"] == ""

    saved = signed_in.post(url, {"instructions": "Call me Sam."})

    assert saved.status_code == 200
    assert saved.json()["instructions"] == "Call me Sam."
    assert signed_in.get(url).json() == {"instructions": "Call me Sam.", "limit": 3000}
    client.force_login(other_user)
    assert client.get(url).json()["instructions"] == ""


def test_too_long_instructions_are_refused_with_the_reason_and_the_old_ones_stay(signed_in):
    url = reverse("custom_instructions")
    signed_in.post(url, {"instructions": "Call me Sam."})

    refused = signed_in.post(url, {"instructions": "x" * 3001})
    missing = signed_in.post(url, {})

    assert refused.status_code == 400
    assert refused.json()["code"] == "too_long"
    assert "3001" in refused.json()["message"]
    assert "3000" in refused.json()["message"]
    assert missing.status_code == 400
    assert signed_in.get(url).json()["instructions"] == "Call me Sam."


def test_custom_instructions_need_sign_in(client):
    url = reverse("custom_instructions")
    assert client.get(url).status_code == 302
    assert client.post(url, {"instructions": "x"}).status_code in (302, 403)
