"""The admin pages of the project's models speak the staff user's language: verbose names,
column titles, fieldsets, help texts and choice labels come from the zh-Hans catalogue."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import AgentProfile, AgentRun, ToolConfig, UserPreference
from agents.services.conversations import conversation_create
from tests.answers import finished_answer

pytestmark = pytest.mark.django_db


@pytest.fixture
def chinese_staff_client(client, staff):
    UserPreference.objects.create(user=staff, language="zh-hans")
    client.force_login(staff)  # sign-in copies the stored language into the session
    return client


@pytest.fixture
def records(staff):
    tool = ToolConfig.objects.create(name="abacus", kind="calculator", description="Arithmetic.")
    profile = AgentProfile.objects.create(name="Geographer", slug="geographer")
    profile.tools.add(tool)
    finished_answer(conversation=conversation_create(owner=staff, title="Sums"))
    return {"tool": tool, "profile": profile, "run": AgentRun.objects.get()}


def page(client, url: str) -> str:
    response = client.get(url, HTTP_ACCEPT_LANGUAGE="en-US")
    assert response.status_code == 200
    assert response["Content-Language"] == "zh-hans"
    return response.content.decode()


def assert_chinese(text: str, *, shown: list[str], not_shown: list[str]) -> None:
    missing = [label for label in shown if label not in text]
    left_in_english = [label for label in not_shown if label in text]
    assert not missing, f"missing Chinese labels: {missing}"
    assert not left_in_english, f"English labels left: {left_in_english}"


def test_the_tool_pages_are_in_chinese(chinese_staff_client, records):
    changelist = page(chinese_staff_client, reverse("admin:agents_toolconfig_changelist"))
    assert_chinese(
        changelist,
        shown=["工具", "名称", "类型", "已启用", "直接返回", "需要批准", "超时（秒）", "密钥"],
        not_shown=["Timeout seconds", "Return direct", "Needs approval", "Tool configs"],
    )
    change = page(
        chinese_staff_client, reverse("admin:agents_toolconfig_change", args=[records["tool"].pk])
    )
    assert_chinese(
        change,
        shown=["配置项", "密钥（只写）", "行为", "模型看到并调用的名称。", "删除所有已保存的密钥"],
        not_shown=[
            "Secrets (write-only)",
            "Behaviour",
            "The name the model sees and calls.",
            "Remove all stored secrets",
            "Return the tool's output as the final answer.",
        ],
    )


def test_the_agent_profile_pages_are_in_chinese(chinese_staff_client, records):
    changelist = page(chinese_staff_client, reverse("admin:agents_agentprofile_changelist"))
    assert_chinese(
        changelist,
        shown=["智能体配置", "标识", "模式", "模型端点", "是否默认", "按版本查看", "ReAct 文本"],
        not_shown=["Agent profiles", "Model config", "Is default", "by version", "ReAct text"],
    )
    change = page(
        chinese_staff_client,
        reverse("admin:agents_agentprofile_change", args=[records["profile"].pk]),
    )
    assert_chinese(
        change,
        shown=["推荐问题", "工具与限制", "最大迭代次数", "记忆策略", "摘要 + 最近几轮", "默认配置"],
        not_shown=[
            "Starting points",
            "Tools and limits",
            "Max iterations",
            "Memory strategy",
            "Summary + recent turns",
            "Default profile",
            "Shown in the chat's agent picker.",
        ],
    )


def test_the_run_pages_are_in_chinese(chinese_staff_client, records):
    changelist = page(chinese_staff_client, reverse("admin:agents_agentrun_changelist"))
    assert_chinese(
        changelist,
        shown=["智能体运行", "提示令牌", "补全令牌", "耗时", "成功", "秒"],
        not_shown=["Agent runs", "Prompt tokens", "Completion tokens", "Duration", "Succeeded"],
    )
    change = page(
        chinese_staff_client, reverse("admin:agents_agentrun_change", args=[records["run"].pk])
    )
    assert_chinese(
        change,
        shown=["时间与令牌", "结束时间", "错误代码", "触发消息"],
        not_shown=["Timing and tokens", "Finished at", "Error code", "Trigger message"],
    )


def test_without_a_chosen_language_the_admin_stays_english(staff_client, records):
    text = staff_client.get(reverse("admin:agents_toolconfig_changelist")).content.decode()
    assert "Timeout seconds" in text
    assert "Needs approval" in text
    assert "超时（秒）" not in text
