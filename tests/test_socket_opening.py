"""A socket opened on its owner's conversation (agents/session_check.py, socket_opening).

One statement decides it as ``session_signs_in`` decides a write; every other opening gets
None, and the consumer then asks Channels' ``get_user`` (tests/consumers/test_connect.py).
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents.models import AgentRun
from agents.runs.log import event_append
from agents.services.conversations import conversation_create, message_send
from agents.session_check import socket_opening
from tests.sign_ins import ENDINGS, end_sign_in
from tests.test_session_check import LookupBackend

pytestmark = pytest.mark.django_db


def sign_in(user) -> tuple[Client, str]:
    client = Client()
    client.force_login(user)
    return client, client.cookies[settings.SESSION_COOKIE_NAME].value


def opening(session_key, conversation_id, *, statements: int = 1):
    with CaptureQueriesContext(connection) as queries:
        opened = socket_opening(session_key=session_key, conversation_id=conversation_id)
    assert len(queries) == statements
    return opened


def test_the_owners_live_session_opens_with_the_owner_and_the_last_seq(user):
    conversation = conversation_create(owner=user)
    event_append(conversation=conversation, run=None, type="step", payload={"kind": "thought"})
    _client, key = sign_in(user)

    opened = opening(key, conversation.pk)

    assert opened is not None
    assert opened.last_seq == 1
    assert opened.user.pk == user.pk
    # Every field is the row's, as the ORM reads it.
    fields = [field.attname for field in user._meta.concrete_fields]
    user.refresh_from_db()
    assert [getattr(opened.user, name) for name in fields] == [
        getattr(user, name) for name in fields
    ]
    assert int(opened.session["_auth_user_id"]) == user.pk


@pytest.mark.parametrize(
    ("status", "active"),
    [
        (None, False),
        (AgentRun.Status.QUEUED, True),
        (AgentRun.Status.RUNNING, True),
        (AgentRun.Status.AWAITING_APPROVAL, False),
        (AgentRun.Status.SUCCEEDED, False),
        (AgentRun.Status.CANCELLED, False),
    ],
)
def test_the_opening_says_whether_a_run_may_be_writing_live_text(user, settings, status, active):
    settings.CHAT_SENDS_PER_MINUTE = 0  # no limit: the counters outlive a test's rollback
    conversation = conversation_create(owner=user)
    if status is not None:
        run = message_send(conversation=conversation, user=user, content="q").run
        AgentRun.objects.filter(pk=run.pk).update(status=status)
    # Another conversation's run is not this one's.
    other = conversation_create(owner=user)
    message_send(conversation=other, user=user, content="q")
    _client, key = sign_in(user)

    assert opening(key, conversation.pk).run_active is active


@pytest.mark.parametrize("ended_by", ENDINGS)
def test_an_ended_sign_in_does_not_open(user, ended_by):
    conversation = conversation_create(owner=user)
    client, key = sign_in(user)
    end_sign_in(ended_by, user=user, client=client)

    assert opening(key, conversation.pk) is None


def test_another_users_session_does_not_open_this_conversation(user, other_user):
    conversation = conversation_create(owner=user)
    _client, strangers_key = sign_in(other_user)

    assert opening(strangers_key, conversation.pk) is None


def test_a_missing_conversation_or_session_does_not_open(user):
    conversation = conversation_create(owner=user)
    _client, key = sign_in(user)

    assert opening(key, conversation.pk + 1000) is None
    assert opening("no-such-session-key", conversation.pk) is None
    assert opening("", conversation.pk, statements=0) is None
    assert opening(None, conversation.pk, statements=0) is None


def test_a_backend_with_its_own_user_lookup_is_left_to_get_user(settings, user):
    path = f"{LookupBackend.__module__}.{LookupBackend.__qualname__}"
    settings.AUTHENTICATION_BACKENDS = [path]
    conversation = conversation_create(owner=user)
    client = Client()
    client.force_login(user, backend=path)
    key = client.cookies[settings.SESSION_COOKIE_NAME].value

    assert opening(key, conversation.pk) is None


def test_other_session_engines_are_left_to_get_user(settings, user):
    conversation = conversation_create(owner=user)
    _client, key = sign_in(user)
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"

    assert opening(key, conversation.pk, statements=0) is None
