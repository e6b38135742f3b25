"""A run that takes a monthly budget past its warning share tells the open pages of everyone
the budget covers, through their notifications sockets, and nobody else's
(``usage_warn_budgets_crossed``; docs/protocol.md, ``budget.warning``). The whole path with
a worker and daphne is tests/integration/test_budget_warning_live.py; this one is fast
enough for ``make mutation``."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group

from agents.models import UsageBudget
from agents.services.usage import usage_warn_budgets_crossed
from tests.consumers.sockets import (
    QUIET_SECONDS,
    notifications_socket,
    receive,
    run,
    session_cookie,
)
from tests.usage_costs.test_usage_page import send_and_spend

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_group_budget_passed_by_one_member_warns_every_members_page_and_nobody_elses(
    user, other_user, make_user, cheap_agent
):
    outsider = make_user("outsider")
    group = Group.objects.create(name="Lab")
    group.user_set.add(user, other_user)
    UsageBudget.objects.create(group=group, monthly_tokens=1000)
    # The outsider's own budget is far from its warning share: nothing to tell them.
    UsageBudget.objects.create(user=outsider, monthly_tokens=1000)
    send_and_spend(other_user, agent=cheap_agent, title="Theirs", prompt=700, completion=0)
    run_id = send_and_spend(user, agent=cheap_agent, title="Mine", prompt=150, completion=50).pk
    cookies = [session_cookie(person) for person in (user, other_user, outsider)]

    async def body():
        pages = [notifications_socket(cookie) for cookie in cookies]
        for page in pages:
            assert (await page.connect())[0]
            assert (await receive(page))["type"] == "notifications.unread"
        crossed = await sync_to_async(usage_warn_budgets_crossed)(run_id=run_id)
        told = [await receive(page) for page in pages[:2]]
        outsider_told_nothing = await pages[2].receive_nothing(timeout=QUIET_SECONDS)
        for page in pages:
            await page.disconnect()
        return crossed, told, outsider_told_nothing

    crossed, told, outsider_told_nothing = run(body)
    assert [budget.group_id for budget in crossed] == [group.pk]
    warning = "Your group Lab used 90% of this month's budget (900 of 1,000 tokens)."
    assert [frame["type"] for frame in told] == ["budget.warning", "budget.warning"]
    assert all(frame["message"].startswith(warning) for frame in told), told
    assert outsider_told_nothing
