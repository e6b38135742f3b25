"""The monthly budget's notice reaches an open page live: a run that takes a budget past its
warning share sends ``budget.warning`` to its owner's notifications socket once the run's
end is stored, worded as a reload of the chat page would word it."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from agents.llm.scripted import Reply
from agents.models import UsageBudget, UsageEntry
from agents.services.conversations import conversation_create
from agents.services.usage import budget_warning
from tests.faults.checks import model_name
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LIMIT = 1_000_000


def _spent_this_month(user, tokens: int) -> None:
    """What earlier runs of the month used, as the ledger holds it."""
    UsageEntry.objects.create(
        user=user, kind=UsageEntry.Kind.RUN, prompt_tokens=tokens, created_at=timezone.now()
    )


def _ask(live_stack, user, model: str) -> None:
    live_stack.model.script(model, [Reply("Final Answer: Done.")])
    conversation = conversation_create(owner=user, profile=live_stack.profile(model))
    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": "go", "client_id": uuid.uuid4().hex})
    assert sock.receive_until(run_ended)[-1]["type"] == "run.finished"


def test_a_run_past_the_warning_share_tells_every_open_page_of_the_budget(
    live_stack, user, other_user
):
    group = Group.objects.create(name="Lab")
    group.user_set.add(user, other_user)
    UsageBudget.objects.create(group=group, monthly_tokens=LIMIT)
    # One token short of the warning share: any run takes the group past it.
    _spent_this_month(other_user, int(LIMIT * UsageBudget.WARN_AT) - 1)
    mine = live_stack.connect_notifications(user)
    theirs = live_stack.connect_notifications(other_user)
    for sock in (mine, theirs):
        assert sock.receive()["type"] == "notifications.unread"

    _ask(live_stack, user, model_name("budget-live"))

    for sock, who in ((mine, user), (theirs, other_user)):
        frame = sock.receive_until(lambda f: f["type"] == "budget.warning")[-1]
        assert frame["message"] == budget_warning(user_id=who.pk)
        assert "80% of this month's budget" in frame["message"]


def test_a_run_below_the_warning_share_sends_nothing(live_stack, user):
    UsageBudget.objects.create(user=user, monthly_tokens=LIMIT)
    sock = live_stack.connect_notifications(user)
    assert sock.receive()["type"] == "notifications.unread"

    _ask(live_stack, user, model_name("budget-quiet"))

    # The run's own notification comes; no budget notice before or with it.
    frames = sock.receive_until(lambda f: f["type"] == "notification")
    assert [f["type"] for f in frames] == ["notification"]
