"""Usage, cost and budgets in the browser: a used-up monthly budget stops the next send in the
chat with the reason and the day it starts again; the usage page is reachable from the user
menu, passes axe in both themes and fits 375 px."""

from __future__ import annotations

import datetime

import pytest
from django.utils import timezone
from django.utils.formats import date_format
from playwright.sync_api import expect

from agents.models import Message, UsageBudget, UsageEntry
from tests.e2e.conftest import MOBILE
from tests.e2e.test_accessibility import (
    assert_accessible,
    assert_accessible_in_light_and_dark,
    dark,
    light,
)
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def first_of_next_month() -> datetime.date:
    today = timezone.localdate()
    if today.month == 12:
        return datetime.date(today.year + 1, 1, 1)
    return datetime.date(today.year, today.month + 1, 1)


def test_a_used_up_budget_stops_the_send_with_the_reason_and_the_day(stack, open_tab, user):
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    UsageEntry.objects.create(user=user, kind=UsageEntry.Kind.RUN, prompt_tokens=1000)
    reset = date_format(first_of_next_month(), "DATE_FORMAT")

    tab = open_tab(user)
    page = tab.page
    expect(page.locator("#budget-banner")).to_contain_text("You used this month's budget")
    ask(page, "one more question")

    notice = page.locator("#notice-text")
    expect(notice).to_have_text(
        f"You used this month's budget (1,000 of 1,000 tokens). You can send again on {reset}."
    )
    assert not Message.objects.filter(conversation__owner=user).exists()
    assert tab.errors == []


def test_the_usage_page_from_the_user_menu_is_accessible_and_fits_a_phone(stack, open_tab, user):
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    for days_ago, tokens in [(0, 850), (1, 40), (3, 5)]:
        UsageEntry.objects.create(
            user=user,
            kind=UsageEntry.Kind.RUN,
            prompt_tokens=tokens,
            created_at=timezone.now() - datetime.timedelta(days=days_ago),
        )

    tab = open_tab(user)
    page = tab.page
    page.locator("#user-menu-button").click()
    page.get_by_role("menuitem", name="Usage and cost").click()
    expect(page).to_have_url(f"{stack.daphne.url}/usage/")
    expect(page.locator("#usage-totals")).to_contain_text("895")
    expect(page.locator(".usage-chart rect.bar")).not_to_have_count(0)
    light(page)
    assert_accessible(tab)
    dark(page)
    assert_accessible(tab)

    phone = open_tab(user, viewport=MOBILE, path="/usage/")
    expect(phone.page.locator("#usage-title")).to_be_visible()
    assert phone.page.evaluate("document.documentElement.scrollWidth") <= MOBILE["width"]
    assert_accessible(phone)


STAFF_PAGES = {
    "usage-per-group": ("/admin/agents/agentrun/usage/?by=group", "#usage", "Research"),
    "budget-list": ("/admin/agents/usagebudget/", "#result_list", "40 of 1,000 tokens"),
    "budget-form": ("/admin/agents/usagebudget/add/", "#usagebudget_form", "Tokens a month"),
}


@pytest.mark.parametrize("name", STAFF_PAGES)
def test_the_admins_usage_and_budget_pages_are_accessible(stack, open_tab, make_user, user, name):
    from django.contrib.auth.models import Group

    Group.objects.create(name="Research").user_set.add(user)
    UsageBudget.objects.create(user=user, monthly_tokens=1000)
    UsageEntry.objects.create(user=user, kind=UsageEntry.Kind.RUN, prompt_tokens=40)
    staff = make_user("staffer", is_staff=True, is_superuser=True)
    path, loaded, text = STAFF_PAGES[name]

    tab = open_tab(staff, path=path, before_load=light)

    def show(page) -> None:
        expect(page.locator(loaded)).to_contain_text(text)

    show(tab.page)
    assert_accessible_in_light_and_dark(tab, show)


def test_the_budget_notice_appears_live_when_a_run_crosses_the_warning_share(
    stack, open_tab, user, model_name
):
    from agents.llm.scripted import Reply
    from agents.services.conversations import conversation_create

    limit = 1_000_000
    UsageBudget.objects.create(user=user, monthly_tokens=limit)
    # One token short of the warning share: the next run takes the budget past it.
    UsageEntry.objects.create(
        user=user, kind=UsageEntry.Kind.RUN, prompt_tokens=int(limit * UsageBudget.WARN_AT) - 1
    )
    stack.model.script(model_name, [Reply("Final Answer: Done.")])
    conversation = conversation_create(owner=user, profile=stack.profile(model_name))
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    expect(page.locator("#budget-banner")).to_have_count(0)  # below the share when it loaded

    ask(page, "One more question.")

    expect(page.locator(".msg.assistant .answer")).to_have_text("Done.")
    banner = page.locator("#budget-banner")
    expect(banner).to_contain_text("You used 80% of this month's budget")
    expect(banner.get_by_role("link", name="See your usage")).to_have_attribute("href", "/usage/")
    expect(page.locator("#notification-announce")).to_contain_text("80% of this month's budget")
    assert_accessible(tab)
    # A reload shows the same notice.
    text = banner.inner_text()
    page.reload()
    expect(page.locator("#budget-banner")).to_have_text(text)
