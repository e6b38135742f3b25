"""A schedule made, described and run in the browser, in zh-Hans, and its notification followed
to the run; the schedules page passes axe and fits 375 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import AgentRun, Schedule
from tests.e2e.conftest import MOBILE
from tests.e2e.test_accessibility import assert_accessible

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHINESE = {"Accept-Language": "zh-CN,zh;q=0.9"}
ANSWER = "早上好，这是你的摘要。"


def _chinese(page) -> None:
    page.set_extra_http_headers(CHINESE)


def test_a_daily_prompt_scheduled_in_chinese_run_now_and_its_notification_followed(
    stack, open_tab, user, model_name
):
    profile = stack.profile(model_name, tools=())
    stack.model.script(model_name, [Reply(f"Thought: 写摘要。\nFinal Answer: {ANSWER}")])
    tab = open_tab(user, path="/schedules/", before_load=_chinese)
    page = tab.page
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    form = page.locator("#schedule-form")
    form.get_by_label("标题").fill("晨间摘要")
    form.get_by_label("智能体").select_option(str(profile.pk))
    form.get_by_label("提示词").fill("给我今天的摘要")
    form.get_by_label("重复").select_option("daily")
    expect(form.get_by_label("星期几")).to_be_hidden()  # only for weekly and monthly
    form.get_by_label("时间", exact=True).fill("08:00")
    form.get_by_label("时区").fill("Asia/Shanghai")
    form.get_by_role("button", name="安排").click()

    schedule_item = page.locator(".schedule-item", has_text="晨间摘要")
    expect(schedule_item).to_contain_text("每天 08:00（Asia/Shanghai）")
    assert Schedule.objects.get().rrule == "FREQ=DAILY"
    schedule_item.get_by_role("button", name="立即运行 晨间摘要").click()
    expect(page.locator(".page-messages")).to_contain_text("已开始：晨间摘要。")

    # The chat page's bell counts the run's notification once it has finished: drawn with the
    # page if it had, else live, once the person's first move has loaded the rest of an empty
    # chat (docs/performance.md#first-load); a pointer moving over the page is that move.
    page.goto("/")
    page.mouse.move(20, 20)
    badge = page.locator("#notification-badge")
    expect(badge).to_have_text("1")
    page.locator("#notification-bell").click()
    item = page.locator(".notification-item").first
    expect(item).to_contain_text("已完成")
    expect(item).to_contain_text("晨间摘要")
    item.get_by_role("button").click()

    run = AgentRun.objects.get()
    assert run.status == AgentRun.Status.SUCCEEDED
    expect(page).to_have_url(re.compile(rf"/c/{run.conversation_id}/$"))
    expect(page.locator("#thread")).to_contain_text(ANSWER)
    expect(page.locator("#notification-badge")).to_be_hidden()
    assert tab.errors == []


@pytest.mark.parametrize("viewport", [None, MOBILE], ids=["desktop", "mobile"])
def test_the_schedules_page_is_accessible_and_fits_a_phone(stack, open_tab, user, viewport):
    from datetime import timedelta

    from django.utils import timezone

    from agents.models import AgentProfile
    from agents.services.schedules import ScheduleFields, schedule_create

    schedule_create(
        owner=user,
        fields=ScheduleFields(
            profile=AgentProfile.objects.get(is_default=True),
            title="A weekly review with a long title that has to wrap on a phone",
            prompt="Review my week.",
            rule="FREQ=MONTHLY;BYDAY=1MO",
            starts_at=timezone.now() + timedelta(days=1),
            time_zone="Europe/Paris",
        ),
    )
    tab = open_tab(user, path="/schedules/", viewport=viewport)
    page = tab.page
    expect(page.locator(".schedule-item")).to_contain_text("Every first Monday of the month")
    overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    wider = page.evaluate(
        """() => [...document.querySelectorAll('main *')]
            .filter((e) => e.getBoundingClientRect().right > window.innerWidth)
            .map((e) => e.tagName + '.' + e.className + '#' + e.id)"""
    )
    assert overflow <= 0, f"wider than the window: {wider}"
    assert_accessible(tab)
    page.goto("/notifications/")
    assert_accessible(tab)
