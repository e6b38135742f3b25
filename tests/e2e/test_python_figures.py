"""The python tool's chart in the browser: after the owner approves the call, the figure
shows under the step (the CSP lets it load from the site itself), with its file to
download, and the page stays accessible at 375 px; and a chart of a CSV the user attached."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from agents.llm.scripted import Reply
from agents.models import ToolConfig
from agents.services.conversations import conversation_create
from agents.tools import sandbox
from tests.attachments.storage import stored_before  # noqa: F401 (a fixture)
from tests.e2e.test_accessibility import assert_accessible
from tests.e2e.test_attachments import attach_by_button, chip
from tests.e2e.test_chat import ask

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CODE = (
    "import pandas as pd\n"
    "frame = pd.DataFrame({'month': ['Jan', 'Feb', 'Mar'], 'sales': [3, 5, 4]})\n"
    "frame.plot(x='month', y='sales', kind='bar')\n"
    "print('charted', len(frame), 'months')"
)


def test_an_approved_chart_shows_under_its_step(stack, open_tab, user, model_name):
    assert not sandbox.unavailable_reason(), "run `make sandbox-venv`"
    ToolConfig.objects.create(
        name="python", kind="python", description="Runs Python.", needs_approval=True,
        timeout_seconds=120,
    )  # fmt: skip
    profile = stack.profile(model_name, tools=("python",))
    call = "Thought: A chart.\nAction: python\nAction Input: " + json.dumps({"code": CODE})
    stack.model.script(
        model_name, [Reply(call), Reply("Thought: Done.\nFinal Answer: Here is the chart.")]
    )
    tab = open_tab(user, path="/")
    page = tab.page
    page.set_viewport_size({"width": 375, "height": 800})
    page.get_by_label("Agent").select_option(profile.slug)
    ask(page, "Chart my sales by month.")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    page.locator(".step.approval").get_by_role("button", name="Approve").click()

    expect(page.locator(".msg.assistant .answer")).to_have_text("Here is the chart.")
    page.locator(".msg.assistant details.steps summary").click()
    expect(page.locator(".step.observation pre")).to_contain_text("charted 3 months")
    figure = page.locator(".step.observation .sandbox-files img")
    expect(figure).to_have_attribute("alt", "figure-1.png")
    expect(figure).to_have_js_property("complete", True)
    assert figure.evaluate("img => img.naturalWidth") > 0  # it loaded: an image, not a 404
    link = page.locator(".step.observation .sandbox-files a")
    expect(link).to_have_text("figure-1.png")
    assert figure.evaluate("img => img.getBoundingClientRect().right") <= 375
    assert_accessible(tab)


SALES_CSV = b"month,region,amount\nJan,north,3\nJan,south,2\nFeb,north,5\nMar,south,4\n"
CHART_THE_FILE = (
    "import pandas as pd\n"
    "sales = pd.read_csv('/data/sales.csv')\n"
    "by_month = sales.groupby('month', sort=False)['amount'].sum()\n"
    "by_month.plot(kind='bar')\n"
    "print(by_month.to_dict())"
)


@pytest.mark.usefixtures("stored_before")
def test_a_chart_of_an_attached_csv_is_drawn_from_that_file(stack, open_tab, user, model_name):
    """The issue's flow: a CSV attached in the chat, the python tool charts a column of it by
    month (after approval), and the chart shows under the step; the sums it printed are the
    attached file's, so the code read that file."""
    assert not sandbox.unavailable_reason(), "run `make sandbox-venv`"
    ToolConfig.objects.create(
        name="python", kind="python", description="Runs Python.", needs_approval=True,
        timeout_seconds=120,
    )  # fmt: skip
    profile = stack.profile(model_name, tools=("python",))
    call = "Thought: Chart it.\nAction: python\nAction Input: " + json.dumps(
        {"code": CHART_THE_FILE}
    )
    stack.model.script(
        model_name, [Reply(call), Reply("Thought: Done.\nFinal Answer: Amounts by month.")]
    )
    conversation = conversation_create(owner=user, profile=profile)
    tab = open_tab(user, path=f"/c/{conversation.pk}/")
    page = tab.page
    expect(page.locator("html[data-chat-ready]")).to_be_attached()
    attach_by_button(page, "sales.csv", "text/csv", SALES_CSV)
    expect(chip(page, "sales.csv")).to_contain_text("Ready")

    ask(page, "Chart the amount column by month.")
    page.locator(".step.approval").get_by_role("button", name="Approve").click()

    expect(page.locator(".msg.assistant .answer")).to_have_text("Amounts by month.")
    page.locator(".msg.assistant details.steps summary").click()
    expect(page.locator(".step.observation pre")).to_contain_text("{'Jan': 5, 'Feb': 5, 'Mar': 4}")
    figure = page.locator(".step.observation .sandbox-files img")
    expect(figure).to_have_js_property("complete", True)
    assert figure.evaluate("img => img.naturalWidth") > 0
    assert tab.errors == []
