"""The user menu (theme, language, change password, admin, sign out), and the whole chat in
Simplified Chinese: a browser asking for zh-CN sees no English interface string."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import UserPreference
from tests.e2e.conftest import WAIT_MS

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LOCALE_DIR = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"
DARK_BACKGROUND = "rgb(22, 23, 27)"  # --bg of the dark theme (static/css/app.css)
LIGHT_BACKGROUND = "rgb(247, 247, 248)"


def open_user_menu(page):
    expect(page.locator("#user-menu[data-ready]")).to_be_attached()
    page.locator("#user-menu-button").click()
    menu = page.locator("#user-menu-items")
    expect(menu).to_be_visible()
    return menu


def background(page) -> str:
    return page.evaluate("() => getComputedStyle(document.body).backgroundColor")


def sign_in(page, username: str, password: str = "pw-for-tests-1") -> None:
    page.goto("/accounts/login/")
    page.locator("#id_username").fill(username)
    page.locator("#id_password").fill(password)
    page.locator("form.stack button[type=submit]").click()  # named in the page's language


# --------------------------------------------------------------------------------------
# Theme
# --------------------------------------------------------------------------------------


def test_a_chosen_dark_theme_overrides_the_system_and_survives_a_reload(stack, open_tab, user):
    tab = open_tab(user, before_load=lambda page: page.emulate_media(color_scheme="light"))
    page = tab.page
    assert background(page) == LIGHT_BACKGROUND
    open_user_menu(page).get_by_role("menuitemradio", name="Dark").click()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert background(page) == DARK_BACKGROUND
    expect(page.locator("#user-menu-items")).to_be_hidden()

    # Stored on the server (the answer sets the cookie): the next page is dark from its
    # first paint, the system's light notwithstanding.
    page.wait_for_function("() => document.cookie.includes('chatsite_theme=dark')", timeout=WAIT_MS)
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert background(page) == DARK_BACKGROUND
    assert UserPreference.objects.get(user=user).theme == "dark"
    menu = open_user_menu(page)
    expect(menu.get_by_role("menuitemradio", name="Dark")).to_have_attribute("aria-checked", "true")
    assert tab.errors == []


def test_the_system_theme_follows_the_browsers_colour_scheme(stack, open_tab, user):
    UserPreference.objects.create(user=user, theme="light")
    tab = open_tab(user, before_load=lambda page: page.emulate_media(color_scheme="dark"))
    page = tab.page
    assert background(page) == LIGHT_BACKGROUND  # the stored choice wins over the system
    open_user_menu(page).get_by_role("menuitemradio", name="System").click()
    expect(page.locator("html")).to_have_attribute("data-theme", "system")
    assert background(page) == DARK_BACKGROUND
    page.emulate_media(color_scheme="light")
    assert background(page) == LIGHT_BACKGROUND
    page.wait_for_function("() => document.cookie.includes('chatsite_theme=system')")
    assert UserPreference.objects.get(user=user).theme == "system"


# --------------------------------------------------------------------------------------
# Language
# --------------------------------------------------------------------------------------


def test_switching_to_chinese_is_remembered_across_reload_sign_out_and_another_browser(
    stack, open_tab, browser, user
):
    tab = open_tab(user)
    page = tab.page
    expect(page.get_by_role("heading", name="What can I help with?")).to_be_visible()
    open_user_menu(page).get_by_role("menuitemradio", name="简体中文").click()

    expect(page.get_by_role("heading", name="有什么可以帮你？")).to_be_visible()
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    expect(page.get_by_role("button", name="发送")).to_be_visible()
    page.reload()
    expect(page.get_by_role("heading", name="有什么可以帮你？")).to_be_visible()

    # Signed out, this browser's sign-in page keeps the language...
    open_user_menu(page).get_by_role("menuitem", name="退出登录").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/"))
    expect(page.get_by_role("heading", name="登录")).to_be_visible()

    # ...and on another browser (no cookies, English asked for), signing in brings it back.
    other = browser.new_context(base_url=stack.daphne.url, locale="en-US")
    try:
        other_page = other.new_page()
        sign_in(other_page, user.username)
        expect(other_page.get_by_role("heading", name="有什么可以帮你？")).to_be_visible()
        # Back to English from the menu.
        open_user_menu(other_page).get_by_role("menuitemradio", name="English").click()
        expect(other_page.get_by_role("heading", name="What can I help with?")).to_be_visible()
    finally:
        other.close()
    assert UserPreference.objects.get(user=user).language == "en"
    # The first browser, signed out, switches its sign-in page back from there.
    page.get_by_role("button", name="English").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("button", name="English")).to_have_attribute("aria-pressed", "true")
    assert tab.errors == []


def test_the_menu_opens_above_its_button_with_every_item_inside_it(stack, open_tab, user):
    # At the foot of the sidebar the menu must open upwards; a top left set by the general
    # .menu-items rule once squeezed it to its padding, the items spilling out below.
    tab = open_tab(user)
    page = tab.page
    menu = open_user_menu(page)
    button = page.locator("#user-menu-button").bounding_box()
    box = menu.bounding_box()
    assert box["y"] + box["height"] <= button["y"]
    for item in (menu.locator("[role=menuitemradio]").first, menu.locator("#sign-out")):
        inside = item.bounding_box()
        assert box["y"] <= inside["y"]
        assert inside["y"] + inside["height"] <= box["y"] + box["height"]


def test_the_menu_works_from_the_keyboard(stack, open_tab, user):
    page = open_tab(user).page
    expect(page.locator("#user-menu[data-ready]")).to_be_attached()
    button = page.locator("#user-menu-button")
    button.focus()
    page.keyboard.press("ArrowDown")
    expect(button).to_have_attribute("aria-expanded", "true")
    items = page.locator("#user-menu-items [role^=menuitem]")
    expect(items.first).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(items.last).to_be_focused()
    expect(items.last).to_have_text("Sign out")
    page.keyboard.press("Escape")
    expect(page.locator("#user-menu-items")).to_be_hidden()
    expect(button).to_be_focused()
    expect(button).to_have_attribute("aria-expanded", "false")


# --------------------------------------------------------------------------------------
# Password, sign out, admin
# --------------------------------------------------------------------------------------


def test_change_password_from_the_menu(stack, open_tab, user):
    page = open_tab(user).page
    open_user_menu(page).get_by_role("menuitem", name="Change password").click()
    expect(page.get_by_role("heading", name="Change your password")).to_be_visible()
    page.get_by_label("Old password").fill("pw-for-tests-1")
    page.get_by_label("New password", exact=True).fill("a-new-pass-phrase-9")
    page.get_by_label("New password confirmation").fill("a-new-pass-phrase-9")
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("heading", name="Your password is changed")).to_be_visible()

    user.refresh_from_db()
    assert user.check_password("a-new-pass-phrase-9")
    # Still signed in here; the old password no longer signs in, the new one does.
    page.get_by_role("link", name="Back to your chats").click()
    expect(page.get_by_role("heading", name="What can I help with?")).to_be_visible()
    open_user_menu(page).get_by_role("menuitem", name="Sign out").click()
    sign_in(page, user.username, "pw-for-tests-1")
    expect(page.locator(".form-errors")).to_be_visible()
    sign_in(page, user.username, "a-new-pass-phrase-9")
    expect(page.get_by_role("heading", name="What can I help with?")).to_be_visible()


def test_a_wrong_old_password_changes_nothing(stack, open_tab, user):
    page = open_tab(user, path="/accounts/password/").page
    page.get_by_label("Old password").fill("not it")
    page.get_by_label("New password", exact=True).fill("a-new-pass-phrase-9")
    page.get_by_label("New password confirmation").fill("a-new-pass-phrase-9")
    page.get_by_role("button", name="Change password").click()
    expect(page.locator(".field-error")).to_contain_text("old password")
    user.refresh_from_db()
    assert user.check_password("pw-for-tests-1")


def test_sign_out_from_the_menu(stack, open_tab, user):
    page = open_tab(user).page
    open_user_menu(page).get_by_role("menuitem", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))


def test_only_staff_see_the_admin_link(stack, open_tab, user, make_user):
    page = open_tab(user).page
    menu = open_user_menu(page)
    expect(menu.get_by_role("menuitem", name="Change password")).to_be_visible()
    expect(menu.get_by_role("menuitem", name="Admin")).to_have_count(0)

    staff = make_user("staff-person", is_staff=True, is_superuser=True)
    staff_page = open_tab(staff).page
    open_user_menu(staff_page).get_by_role("menuitem", name="Admin").click()
    expect(staff_page).to_have_url(re.compile(r"/admin/$"))


# --------------------------------------------------------------------------------------
# The whole chat in zh-Hans
# --------------------------------------------------------------------------------------


def english_interface_strings() -> list[str]:
    """The catalogue's English msgids that would give away an untranslated interface: whole
    phrases of two words or more, without placeholders."""
    strings = set()
    for po in LOCALE_DIR.glob("*.po"):
        for match in re.finditer(r'^msgid "(.+)"$', po.read_text(encoding="utf-8"), re.M):
            text = match.group(1)
            if "%" not in text and "<" not in text and "\\" not in text and " " in text:
                strings.add(text)
    assert len(strings) > 100
    return sorted(strings)


def test_the_whole_chat_in_simplified_chinese(stack, open_tab, user, model_name):
    profile = stack.profile(model_name, label_set="zh", tools=("calculator",))
    stack.model.script(
        model_name,
        [
            Reply("思考：我应该用计算器把两个数相加。\n行动：calculator\n行动输入：2 + 2"),
            Reply("思考：计算器给出的是 4。\n最终答案：答案是 **4**。"),
        ],
    )
    tab = open_tab(
        None,
        path="/accounts/login/",
        before_load=lambda page: page.set_extra_http_headers({"Accept-Language": "zh-CN,zh;q=0.9"}),
    )
    page = tab.page
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.get_by_label("用户名").fill(user.username)
    page.get_by_label("密码").fill("pw-for-tests-1")
    page.get_by_role("button", name="登录").click()

    expect(page.get_by_role("heading", name="有什么可以帮你？")).to_be_visible()
    box = page.get_by_label("消息", exact=True)
    expect(box).to_have_attribute("placeholder", "有问题，尽管问")
    page.get_by_label("智能体").select_option(profile.slug)
    expect(page.locator("html[data-chat-ready]")).to_be_attached()
    box.fill("2 加 2 等于几？")
    box.press("Enter")

    expect(page.locator(".answer strong")).to_have_text("4")
    expect(page.locator(".msg.assistant .usage")).to_contain_text("个令牌")
    page.locator("details.steps summary").click()
    expect(page.locator(".step .step-label")).to_have_text(["思考", "行动", "观察", "思考"])
    # Steps as budgets count them: one reply that called a tool (issue 42, defect 4).
    expect(page.locator(".steps-title")).to_have_text("1 个步骤 · 1 次工具调用")
    expect(page.get_by_role("button", name="重新生成")).to_be_visible()
    expect(page.get_by_role("button", name="以 Markdown 格式复制回答")).to_be_visible()
    expect(page.get_by_role("button", name="回答得好", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="发送")).to_be_visible()
    expect(page.locator(".conversation-group").first).to_contain_text("今天")

    open_user_menu(page)
    visible_text = page.locator("body").inner_text()
    labels = page.evaluate(
        """() => Array.from(document.querySelectorAll('[aria-label], [placeholder], [title]'))
            .flatMap(node => [node.getAttribute('aria-label'), node.getAttribute('placeholder'),
                              node.getAttribute('title')]).filter(Boolean).join('\\n')"""
    )
    leaked = [s for s in english_interface_strings() if s in visible_text or s in labels]
    assert leaked == [], f"English interface strings on the Chinese page: {leaked}"
    assert tab.errors == []
