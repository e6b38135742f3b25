"""A user's usage page (/usage/): its figures are the stored runs' tokens times the prices
their endpoints had when they were sent, computed here on their own from the runs, and
nobody else's usage ever shows on it (agents/usage_reports.py, agents/views.py)."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from decimal import Decimal
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.utils import timezone

from agents.models import AgentProfile, AgentRun, ModelConfig, UsageEntry
from agents.services.conversations import conversation_create, message_send
from tests.usage import spend

pytestmark = pytest.mark.django_db

MILLION = Decimal(1_000_000)


class _Tables(HTMLParser):
    """Each table's body rows by the table's id: the cells' text, and each cell's data-cost."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.costs: dict[str, list[Decimal]] = defaultdict(list)
        self.attributes: dict[str, str] = {}
        self._table: str | None = None
        self._in_body = False
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "data-tokens" in attrs:
            self.attributes["total-tokens"] = attrs["data-tokens"]
        if "data-cost" in attrs and self._table is None:
            self.attributes["total-cost"] = attrs["data-cost"]
        if tag == "table":
            self._table = attrs.get("id")
            self.tables[self._table] = []
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
            if "data-cost" in attrs:
                self.costs[self._table].append(Decimal(attrs["data-cost"]))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def read_page(client: Client, **query) -> _Tables:
    response = client.get("/usage/", query)
    assert response.status_code == 200
    tables = _Tables()
    tables.feed(response.content.decode())
    return tables


def send_and_spend(user, *, agent, title, prompt, completion, days_ago=0):
    """A run sent by ``user`` to ``agent`` that used these tokens, as a worker stores them;
    ``days_ago`` moves the run and its ledger entry to an earlier day."""
    conversation = conversation_create(owner=user, title=title)
    agent = AgentProfile.objects.get(pk=agent.pk)  # as a request reads it, prices and all
    run = message_send(conversation=conversation, user=user, content="q", profile=agent).run
    spend(run, prompt_tokens=prompt, completion_tokens=completion)
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.SUCCEEDED)
    if days_ago:
        earlier = timezone.now() - timedelta(days=days_ago)
        AgentRun.objects.filter(pk=run.pk).update(created_at=earlier)
        UsageEntry.objects.filter(run_id=run.pk).update(created_at=earlier)
    return run


def expected_from_runs(owner, prices):
    """The figures computed from the runs themselves: each run's stored tokens times the
    price configured for its endpoint (``prices``, as the test set them), per day, agent and
    conversation; not read from the ledger."""
    per = {
        "day": defaultdict(Decimal),
        "agent": defaultdict(Decimal),
        "conversation": defaultdict(Decimal),
    }
    tokens = 0
    runs = AgentRun.objects.filter(conversation__owner=owner).select_related(
        "model_config", "profile_version__profile", "conversation"
    )
    for run in runs:
        prompt_price, completion_price = prices[run.model_config.name]
        cost = (
            run.prompt_tokens * prompt_price + run.completion_tokens * completion_price
        ) / MILLION
        per["day"][timezone.localdate(run.created_at).isoformat()] += cost
        per["agent"][run.profile_version.profile.name] += cost
        per["conversation"][run.conversation.title] += cost
        tokens += run.prompt_tokens + run.completion_tokens
    return per, tokens


def page_costs(page: _Tables, table: str) -> dict[str, Decimal]:
    rows = page.tables[table]
    return {row[0]: cost for row, cost in zip(rows, page.costs[table], strict=True)}


def test_the_page_shows_each_runs_tokens_times_its_endpoints_price(
    make_user, user, other_user, cheap_agent, dear_agent, settings
):
    carol = make_user("carol")
    prices = {
        "cheap": (Decimal("0.15"), Decimal("0.6")),
        "dear": (Decimal("2.5"), Decimal("10")),
    }
    send_and_spend(user, agent=cheap_agent, title="Trip", prompt=1234, completion=567)
    send_and_spend(user, agent=dear_agent, title="Taxes", prompt=98_765, completion=4_321)
    send_and_spend(user, agent=dear_agent, title="Trip plans", prompt=10, completion=1, days_ago=1)
    send_and_spend(
        user, agent=cheap_agent, title="Old trip", prompt=777_777, completion=3, days_ago=1
    )
    send_and_spend(
        other_user, agent=dear_agent, title="Bob's secret", prompt=5_000_000, completion=9
    )
    send_and_spend(
        carol, agent=cheap_agent, title="Carol's plan", prompt=42, completion=4_200, days_ago=1
    )

    today = timezone.localdate()
    window = {"since": (today - timedelta(days=3)).isoformat(), "until": today.isoformat()}
    for owner in (user, other_user, carol):
        client = Client()
        client.force_login(owner)
        page = read_page(client, **window)
        expected, tokens = expected_from_runs(owner, prices)

        assert page_costs(page, "usage-by-day") == dict(expected["day"])
        assert page_costs(page, "usage-by-agent") == dict(expected["agent"])
        assert page_costs(page, "usage-by-conversation") == dict(expected["conversation"])
        assert Decimal(page.attributes["total-cost"]) == sum(expected["day"].values())
        assert int(page.attributes["total-tokens"]) == tokens

    # Two days and two agents for Alice, with tokens by day in the table beside the chart.
    client = Client()
    client.force_login(user)
    page = read_page(client, **window)
    by_day = {row[0]: row[1:4] for row in page.tables["usage-by-day"]}
    assert by_day[today.isoformat()] == ["2", str(1234 + 98_765), str(567 + 4_321)]
    assert by_day[(today - timedelta(days=1)).isoformat()] == ["2", str(10 + 777_777), str(1 + 3)]
    assert {row[0] for row in page.tables["usage-by-agent"]} == {"Helper", "Analyst"}


def test_a_price_changed_later_does_not_rewrite_what_was_spent(user, dear_agent, dear_endpoint):
    send_and_spend(user, agent=dear_agent, title="Before", prompt=1_000_000, completion=100_000)
    ModelConfig.objects.filter(pk=dear_endpoint.pk).update(
        prompt_price_per_million=Decimal("99"), completion_price_per_million=Decimal("99")
    )
    send_and_spend(user, agent=dear_agent, title="After", prompt=1_000_000, completion=0)

    client = Client()
    client.force_login(user)
    costs = page_costs(read_page(client), "usage-by-conversation")

    assert costs == {"Before": Decimal("2.5") + Decimal("1"), "After": Decimal("99")}


def test_another_users_usage_never_appears(user, other_user, cheap_agent):
    send_and_spend(
        other_user, agent=cheap_agent, title="Bob's secret plan", prompt=500, completion=50
    )
    send_and_spend(user, agent=cheap_agent, title="Mine", prompt=7, completion=3)

    client = Client()
    client.force_login(user)
    response = client.get("/usage/")

    body = response.content.decode()
    assert "secret plan" not in body
    page = _Tables()
    page.feed(body)
    assert [row[0] for row in page.tables["usage-by-conversation"]] == ["Mine"]
    assert page.attributes["total-tokens"] == "10"


def test_a_deleted_conversations_runs_still_count_and_keep_their_agent(user, cheap_agent):
    from agents.services.conversations import conversation_delete

    run = send_and_spend(user, agent=cheap_agent, title="Gone soon", prompt=1_000_000, completion=0)
    conversation_delete(conversation=run.conversation)

    client = Client()
    client.force_login(user)
    page = read_page(client)

    assert page_costs(page, "usage-by-conversation") == {"Deleted conversation": Decimal("0.15")}
    assert page_costs(page, "usage-by-agent") == {"Helper": Decimal("0.15")}


def test_the_page_is_for_signed_in_users_and_refuses_a_bad_date_clearly(client, user):
    assert client.get("/usage/").status_code == 302
    client.force_login(user)
    response = client.get("/usage/", {"since": "yesterday"})
    assert response.status_code == 200
    assert "Enter dates as year-month-day." in response.content.decode()


def test_the_user_menu_links_to_the_page(client, user):
    client.force_login(user)
    assert 'href="/usage/" id="usage-link"' in client.get("/").content.decode()
