"""The README's screenshots, taken from the real stack: the scripted model server, a celery
worker, daphne and Debian's Chromium, through the browser tests' own fixtures
(``tests/processes.py``, ``tests/e2e/conftest.py``) and helpers.

Each scene drives the page to the state it shows and checks that state before the picture
is taken, so a broken page fails the run instead of landing in the README. The module lives
outside ``testpaths`` and its name does not start with ``test_``: ``make test`` never
collects it. Run it with the test environment loaded (``.wtenv`` or ``make test``'s):

    .venv/bin/python -m chatsite.server.process.embedded .venv/bin/python bench/screenshots.py

The pictures go to ``docs/screenshots/`` (or ``CHATSITE_SCREENSHOT_DIR``); extra arguments
go to pytest (``-k approval`` retakes one).
"""

from __future__ import annotations

import os
import re
import sys
from datetime import timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(os.environ.get("CHATSITE_SCREENSHOT_DIR") or ROOT / "docs" / "screenshots")
VIEWPORT = {"width": 1280, "height": 800}

if __name__ == "__main__":
    # The suite's plugins and fixtures, registered by name: this file is outside tests/, so
    # pytest would not find their conftest files on its own.
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    plugins = ["-p", "tests.conftest", "-p", "tests.e2e.conftest", "-p", "no:cacheprovider"]
    sys.exit(pytest.main([__file__, *plugins, "-m", "screenshots", *sys.argv[1:]]))

from django.utils import timezone  # noqa: E402
from playwright.sync_api import expect  # noqa: E402

from agents.llm.scripted import Reply  # noqa: E402
from agents.models import AgentRun, Conversation  # noqa: E402
from agents.services.conversations import conversation_create, conversation_pin  # noqa: E402
from tests.counting_server import CountingServer  # noqa: E402
from tests.e2e.conftest import MOBILE  # noqa: E402
from tests.e2e.test_accessibility import dark, light  # noqa: E402
from tests.e2e.test_chat import ask, calculator_script  # noqa: E402
from tests.e2e.test_user_menu import open_user_menu  # noqa: E402

pytestmark = [
    pytest.mark.screenshots,
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
]

# Earlier conversations in the sidebar: (title, days since the last change, pinned).
HISTORY = [
    ("Trip to Lisbon: what to pack", 12, True),
    ("Summarise the Q3 board notes", 0, False),
    ("Regex for ISO dates", 1, False),
    ("Compare two mortgage offers", 4, False),
    ("Reading list for the winter", 19, False),
]
HISTORY_ZH = [
    ("里斯本旅行清单", 12, True),
    ("总结第三季度会议纪要", 0, False),
    ("匹配日期的正则表达式", 1, False),
    ("比较两份房贷方案", 4, False),
]


def save(page, name: str) -> Path:
    """The viewport as a PNG, without the caret, the last click's focus ring or hover."""
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    size = page.viewport_size
    page.mouse.move(size["width"] - 2, size["height"] // 2)  # off any button's hover style
    path = OUTPUT / name
    page.screenshot(path=str(path), animations="disabled", caret="hide")
    return path


def seed_history(user, profile, history=HISTORY) -> None:
    now = timezone.now()
    for title, days, pinned in history:
        conversation = conversation_create(owner=user, profile=profile, title=title)
        if pinned:
            conversation_pin(conversation=conversation)
        # updated_at is auto_now: only an update() can date it back.
        Conversation.objects.filter(pk=conversation.pk).update(
            updated_at=now - timedelta(days=days, hours=1)
        )


def named_profile(stack, model_name: str, name: str, **fields):
    profile = stack.profile(model_name, **fields)
    profile.name = name
    profile.save(update_fields=["name"])
    return profile


def finished_with_steps_open(page, question: str, *, box_label: str = "Message") -> None:
    """Asks, waits for the run to end (its usage line), then opens its steps."""
    expect(page.locator("html[data-chat-ready]")).to_be_attached()
    box = page.get_by_label(box_label, exact=True)
    box.fill(question)
    box.press("Enter")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(page.locator(".msg.assistant .usage")).to_be_visible()
    page.locator(".msg.assistant details.steps summary").click()
    expect(page.locator(".step.observation")).to_be_visible()


def no_error_banner(tab) -> None:
    expect(
        tab.page.locator(".step.error, .step.is-error, .form-errors, .banner:visible")
    ).to_have_count(0)
    assert tab.errors == []


def test_chat_light_dark_and_admin_run(stack, open_tab, user, make_user):
    model_name = "research-assistant"
    profile = named_profile(stack, model_name, "Research assistant")
    seed_history(user, profile)
    stack.model.script(model_name, calculator_script())

    tab = open_tab(user, viewport=VIEWPORT, before_load=light)
    page = tab.page
    page.get_by_label("Agent").select_option(profile.slug)
    finished_with_steps_open(page, "What is 2 + 2? Show me a table and the Python for it.")
    expect(page.locator(".conversation-group").first).to_be_visible()
    no_error_banner(tab)
    save(page, "desktop.png")

    dark(page)
    open_user_menu(page)
    expect(page.get_by_role("menuitemradio", name="Dark")).to_be_visible()
    save(page, "desktop-dark.png")

    run = AgentRun.objects.get(conversation__owner=user)
    staff = make_user("admin", is_staff=True, is_superuser=True)
    admin = open_tab(staff, viewport=VIEWPORT, path=f"/admin/agents/agentrun/{run.pk}/change/")
    expect(admin.page.locator("#run-timeline")).to_contain_text("calculator")
    assert admin.errors == []
    # The timeline is what the inspector adds: scrolled to, the navigation folded away to
    # give it the width.
    admin.page.locator("#toggle-nav-sidebar").click()
    admin.page.locator("#run-timeline").evaluate("node => node.scrollIntoView()")
    save(admin.page, "admin-run.png")


def test_approval_request(stack, open_tab, user):
    model_name = "helpdesk"
    tickets = CountingServer()
    try:
        tool = "file_ticket"  # the database is emptied after each scene
        tickets.tool(tool, needs_approval=True)
        profile = named_profile(stack, model_name, "Helpdesk", tools=(tool,))
        seed_history(user, profile)
        stack.model.script(
            model_name,
            [
                Reply(
                    "Thought: The user wants a ticket filed; this tool needs approval.\n"
                    f"Action: {tool}\n"
                    'Action Input: {"title": "Printer on floor 3 jams on every job"}'
                ),
                Reply("Thought: Filed.\nFinal Answer: Ticket filed."),
            ],
        )
        tab = open_tab(user, viewport=VIEWPORT, before_load=light)
        page = tab.page
        page.get_by_label("Agent").select_option(profile.slug)
        ask(page, "The printer on floor 3 jams on every job. Please file a ticket.")
        request = page.locator(".step.approval")
        expect(request.get_by_role("button", name="Approve")).to_be_enabled()
        expect(request.get_by_role("button", name="Deny")).to_be_enabled()
        assert tickets.calls == 0
        no_error_banner(tab)
        save(page, "approval.png")
        # Denied, so the run ends and nothing was filed.
        request.get_by_role("button", name="Deny").click()
        expect(page.locator(".msg.assistant .answer")).to_have_text("Ticket filed.")
        assert tickets.calls == 0
    finally:
        tickets.close()


def test_versions_after_regenerating(stack, open_tab, user):
    model_name = "writing-helper"
    profile = named_profile(stack, model_name, "Writing helper", tools=())
    seed_history(user, profile)

    def answer(text: str) -> Reply:
        return Reply(f"Thought: A short, friendly title.\nFinal Answer: {text}")

    stack.model.script(
        model_name,
        [
            answer("**Small Steps, Big Changes**: notes from our first year."),
            answer("**A Year of Learning Out Loud**: what worked, and what did not."),
            answer("**From Zero to One Year**: a look back at the team's blog."),
        ],
    )
    conversation = conversation_create(owner=user, profile=profile, title="Blog post title")
    tab = open_tab(user, viewport=VIEWPORT, path=f"/c/{conversation.pk}/", before_load=light)
    page = tab.page
    reply = page.locator(".msg.assistant")
    ask(page, "Suggest a title for a blog post looking back on our first year.")
    expect(page.locator(".answer strong")).to_have_text("Small Steps, Big Changes")
    for position in ("2 / 2", "3 / 3"):
        page.get_by_role("button", name="Regenerate").click()
        expect(reply.locator(".branch-position")).to_have_text(position)
    expect(page.locator(".msg.assistant .usage")).to_be_visible()
    with page.expect_response(lambda response: "/branch/" in response.url):
        reply.get_by_role("button", name="Previous version").click()
    expect(reply.locator(".branch-position")).to_have_text("2 / 3")
    expect(page.locator(".answer strong")).to_have_text("A Year of Learning Out Loud")
    no_error_banner(tab)
    save(page, "versions.png")


def test_simplified_chinese(stack, open_tab, user):
    model_name = "research-assistant-zh"
    profile = named_profile(stack, model_name, "研究助理", label_set="zh", tools=("calculator",))
    seed_history(user, profile, HISTORY_ZH)
    stack.model.script(
        model_name,
        [
            Reply("思考：我应该用计算器算出总价。\n行动：calculator\n行动输入：3 * 12.5 + 8"),
            Reply(
                "思考：计算器给出的是 45.5。\n"
                "最终答案：三本书每本 12.5 元，加 8 元运费，一共 **45.5 元**。"
            ),
        ],
    )
    tab = open_tab(
        user,
        viewport=VIEWPORT,
        before_load=lambda page: (
            light(page),
            page.set_extra_http_headers({"Accept-Language": "zh-CN,zh;q=0.9"}),
        ),
    )
    page = tab.page
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.get_by_label("智能体").select_option(profile.slug)
    finished_with_steps_open(page, "三本书每本 12.5 元，运费 8 元，一共多少钱？", box_label="消息")
    expect(page.locator(".step .step-label")).to_have_text(["思考", "行动", "观察", "思考"])
    no_error_banner(tab)
    save(page, "zh-hans.png")


def test_mobile(stack, open_tab, user):
    model_name = "research-assistant-mobile"
    profile = named_profile(stack, model_name, "Research assistant")
    stack.model.script(model_name, calculator_script(answer="The sum is **4**."))
    conversation = conversation_create(owner=user, profile=profile, title="Adding up")
    tab = open_tab(user, viewport=MOBILE, path=f"/c/{conversation.pk}/", before_load=light)
    page = tab.page
    finished_with_steps_open(page, "What is 2 + 2?")
    assert page.evaluate("document.documentElement.scrollWidth") <= MOBILE["width"]
    no_error_banner(tab)
    save(page, "mobile.png")


def test_replay_beside_its_original(stack, open_tab, user, make_user):
    from agents.services.prompt_versions import prompt_version_ensure

    model_name = "research-assistant-replay"
    profile = named_profile(stack, model_name, "Research assistant")
    stack.model.script(model_name, calculator_script(answer="The sum is **4**."))
    conversation = conversation_create(owner=user, profile=profile, title="Adding up")
    chat = open_tab(user, viewport=VIEWPORT, path=f"/c/{conversation.pk}/").page
    finished_with_steps_open(chat, "What is 2 + 2?")
    original = AgentRun.objects.get(conversation=conversation)
    profile.system_prompt = "Answer in one short sentence."
    profile.save()
    version = prompt_version_ensure(profile=profile)
    stack.model.script(
        model_name,
        [
            Reply("Thought: I should add.\nAction: calculator\nAction Input: 2 + 2"),
            Reply("Thought: The calculator says 4.\nFinal Answer: 2 + 2 is **4**."),
        ],
    )
    staff = make_user("admin", is_staff=True, is_superuser=True)
    admin = open_tab(staff, viewport=VIEWPORT, path=f"/admin/agents/agentrun/{original.pk}/change/")
    admin.page.get_by_label("Prompt version").select_option(str(version.pk))
    admin.page.get_by_role("button", name="Replay").click()
    expect(admin.page.locator(".chatsite-compare-steps")).to_contain_text("2 + 2 is")
    expect(admin.page.locator(".chatsite-live")).to_have_count(0)
    assert admin.errors == []
    admin.page.locator("#toggle-nav-sidebar").click()
    save(admin.page, "replay-compare.png")


def test_two_versions_evaluated_side_by_side(stack, open_tab, user, make_user):
    from agents.models import EvalRun, EvalSet, ModelConfig
    from agents.services.evaluations import eval_cases_from_thumbs_down, eval_run_start
    from agents.services.feedback import feedback_set
    from agents.services.prompt_versions import prompt_version_ensure
    from tests.answers import finished_answer

    careful, guessing = "research-assistant-careful", "research-assistant-guessing"

    def calculates(request) -> Reply:
        sent = "\n".join(str(m.get("content") or "") for m in request["messages"])
        # The prompt's own format mentions "Observation:"; a replay's unrecorded call is
        # answered "not recorded", or with the calculator's result if allowed.
        if "Observation: 42" in sent or "not recorded" in sent:
            return Reply("Thought: The calculator answered.\nFinal Answer: It is 42.")
        return Reply("Thought: Let me calculate.\nAction: calculator\nAction Input: 6 * 7")

    stack.model.policy(careful, calculates)
    stack.model.policy(guessing, lambda request: Reply("Thought: Easy.\nFinal Answer: About 40."))
    profile = named_profile(stack, careful, "Research assistant")
    live = prompt_version_ensure(profile=profile)
    questions = ("What is 6 * 7?", "How much is six times seven?", "Multiply 6 by 7.")
    for question in questions:
        answer = finished_answer(
            conversation=Conversation.objects.create(owner=user, profile=profile),
            question=question,
            profile_version=live,
        )
        feedback_set(message=answer, user=user, rating="down", comment="Show the working")
    eval_set = EvalSet.objects.create(profile=profile, name="Arithmetic")
    for case in eval_cases_from_thumbs_down(eval_set=eval_set):
        case.must_call = [{"tool": "calculator", "arguments": r"6 \* 7"}]
        case.answer_contains = "42"
        case.save()
    cheaper = ModelConfig.objects.create(
        name="Cheaper endpoint", base_url=stack.model.base_url, model=guessing
    )
    cheaper.set_api_key("test-key")
    cheaper.save()
    profile.model_config = cheaper
    profile.save()
    candidate = prompt_version_ensure(profile=profile)
    staff = make_user("admin", is_staff=True, is_superuser=True)
    first = eval_run_start(eval_set=eval_set, version=live, user=staff)
    second = eval_run_start(eval_set=eval_set, version=candidate, user=staff)
    admin = open_tab(staff, viewport=VIEWPORT, path=f"/admin/agents/evalrun/{first.pk}/change/")
    expect(admin.page.locator("#eval-progress")).to_have_text("3 of 3 cases passed", timeout=60_000)
    admin.page.goto(f"/admin/agents/evalrun/{second.pk}/change/")
    expect(admin.page.locator("#eval-progress")).to_have_text("0 of 3 cases passed", timeout=60_000)
    for evaluation in (first, second):
        evaluation.refresh_from_db()
        assert evaluation.status == EvalRun.Status.DONE
    admin.page.goto(f"/admin/agents/evalrun/{first.pk}/compare/{second.pk}/")
    expect(admin.page.locator("#eval-compare tr.eval-changed")).to_have_count(3)
    assert admin.errors == []
    admin.page.locator("#toggle-nav-sidebar").click()
    save(admin.page, "evaluation-compare.png")
