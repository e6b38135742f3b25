"""The closing flush of a ``transaction=True`` test, run again when it deadlocks."""

from __future__ import annotations

import psycopg
import pytest
from django.db import IntegrityError, OperationalError

from tests.flushed_database import FLUSH_ATTEMPTS, flush_retried_on_deadlock


def _failing(*, deadlock: bool, times: int):
    """A flush that fails its first ``times`` calls, as Django raises psycopg's error."""
    calls = []

    def flush(operations, sql_list):
        calls.append(sql_list)
        if len(calls) <= times:
            if deadlock:
                raise OperationalError("deadlock detected") from psycopg.errors.DeadlockDetected()
            raise OperationalError("server closed the connection")

    return flush, calls


def test_a_flush_ended_by_a_deadlock_is_run_again():
    flush, calls = _failing(deadlock=True, times=2)
    flush_retried_on_deadlock(flush)(None, ["TRUNCATE t"])
    assert calls == [["TRUNCATE t"]] * 3


def test_a_flush_that_deadlocks_every_time_fails_after_the_last_attempt():
    flush, calls = _failing(deadlock=True, times=FLUSH_ATTEMPTS)
    with pytest.raises(OperationalError, match="deadlock"):
        flush_retried_on_deadlock(flush)(None, ["TRUNCATE t"])
    assert len(calls) == FLUSH_ATTEMPTS


def test_a_flush_that_a_row_written_meanwhile_makes_fail_is_run_again():
    """The session's worker committed a row (a run's notification) referring to a row the
    flush deleted: the flush's foreign keys fail at its commit, and the next attempt deletes
    that row too."""
    calls = []

    def flush(operations, sql_list):
        calls.append(sql_list)
        if len(calls) == 1:
            raise IntegrityError("violates foreign key constraint") from (
                psycopg.errors.ForeignKeyViolation()
            )

    flush_retried_on_deadlock(flush)(None, ["DELETE FROM t"])
    assert len(calls) == 2


def test_any_other_failure_is_raised_at_once():
    flush, calls = _failing(deadlock=False, times=1)
    with pytest.raises(OperationalError, match="server closed"):
        flush_retried_on_deadlock(flush)(None, ["TRUNCATE t"])
    assert len(calls) == 1


def test_the_suite_flushes_through_the_retry():
    from django.db.backends.base.operations import BaseDatabaseOperations

    assert BaseDatabaseOperations.execute_sql_flush.__wrapped__.__qualname__ == (
        "BaseDatabaseOperations.execute_sql_flush"
    )


@pytest.mark.django_db(transaction=True)
def test_the_flush_empties_every_table_whatever_refers_to_what(user):
    """The flush's deletes run in one transaction whose foreign keys are checked at its end,
    so rows that refer to each other all go (a message to its conversation, a conversation to
    its user, a user to a permission); what is left is what Django's flush leaves, the
    content types, the permissions and the defaults seeded again after it."""
    from django.apps import apps
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType
    from django.core.management import call_command

    from agents.models import (
        AgentProfile,
        Conversation,
        Message,
        ModelConfig,
        PromptVersion,
        ToolConfig,
    )

    user.user_permissions.add(Permission.objects.first())
    conversation = Conversation.objects.create(owner=user, title="not kept")
    Message.objects.create(conversation=conversation, role="user", content="hello")

    call_command("flush", interactive=False, verbosity=0)

    seeded_again = {
        ContentType,
        Permission,
        AgentProfile,
        ModelConfig,
        PromptVersion,
        ToolConfig,
        AgentProfile.tools.through,
    }
    left = {
        model.__name__
        for model in apps.get_models(include_auto_created=True)
        if model not in seeded_again and model._meta.managed and model.objects.exists()
    }
    assert left == set()
    assert AgentProfile.objects.filter(is_default=True).exists()
