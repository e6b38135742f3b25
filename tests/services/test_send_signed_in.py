"""A socket's send asks, with the conversation's lock, whether its session still signs the
user in (``message_send(signed_in_by=...)``): in the lock's own statement on the database
session engine, by ``get_user`` elsewhere; a sign-in that ended writes nothing."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agents.models import AgentRun, Message, RunEvent
from agents.services.conversations import message_send
from agents.session_check import SignedOut
from tests.sign_ins import ENDINGS, end_sign_in

# Run on SQLite too (make test-sqlite): the send's lock is a statement of each database's.
pytestmark = [pytest.mark.django_db, pytest.mark.smoke]


def _signed_in(user) -> tuple[Client, str]:
    client = Client()
    client.force_login(user)
    return client, client.cookies[settings.SESSION_COOKIE_NAME].value


def _written() -> tuple[int, int, int]:
    return Message.objects.count(), AgentRun.objects.count(), RunEvent.objects.count()


def test_a_send_by_a_session_that_signs_the_user_in_goes_through(conversation, user):
    _client, key = _signed_in(user)

    result = message_send(conversation=conversation, user=user, content="hi", signed_in_by=key)

    assert result.created
    assert _written() == (1, 1, 1)


def test_on_the_database_engine_the_check_is_no_statement_of_its_own(conversation, user):
    _client, key = _signed_in(user)

    def statements(**session) -> int:
        with CaptureQueriesContext(connection) as queries:
            message_send(conversation=conversation, user=user, content="q", **session)
        AgentRun.objects.filter(conversation=conversation).update(status="succeeded")
        return len(queries)

    assert statements(signed_in_by=key) == statements()


@pytest.mark.parametrize("ended_by", [*ENDINGS, "no session key", "another user's session"])
def test_a_send_after_the_sign_in_ended_raises_and_writes_nothing(
    conversation, user, other_user, ended_by
):
    client, key = _signed_in(user)
    if ended_by == "no session key":
        key = ""
    elif ended_by == "another user's session":
        _other_client, key = _signed_in(other_user)
    else:
        end_sign_in(ended_by, user=user, client=client)

    with pytest.raises(SignedOut):
        message_send(conversation=conversation, user=user, content="hi", signed_in_by=key)

    assert _written() == (0, 0, 0)


@pytest.mark.parametrize("signs_in", [True, False])
def test_other_session_engines_are_asked_through_get_user(conversation, user, settings, signs_in):
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.cache"
    client, key = _signed_in(user)
    if not signs_in:
        client.logout()

    if signs_in:
        message_send(conversation=conversation, user=user, content="hi", signed_in_by=key)
        assert _written() == (1, 1, 1)
    else:
        with pytest.raises(SignedOut):
            message_send(conversation=conversation, user=user, content="hi", signed_in_by=key)
        assert _written() == (0, 0, 0)
