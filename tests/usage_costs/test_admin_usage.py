"""Staff's side of usage and cost: the admin's usage page per user, group, agent and model
with its CSV export, prices refused clearly when they are not prices, and monthly budgets
edited in the admin (agents/admin/runs.py, model_configs.py, budgets.py)."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from agents.models import AgentRun, ModelConfig, UsageBudget
from tests.admin.conftest import page_text
from tests.usage_costs.test_usage_page import send_and_spend

pytestmark = pytest.mark.django_db

MILLION = Decimal(1_000_000)
PRICES = {"cheap": (Decimal("0.15"), Decimal("0.6")), "dear": (Decimal("2.5"), Decimal("10"))}


@pytest.fixture
def staff_client(client, make_user):
    client.force_login(make_user("admin", is_staff=True, is_superuser=True))
    return client


def run_cost(run: AgentRun) -> Decimal:
    prompt_price, completion_price = PRICES[run.model_config.name]
    return (run.prompt_tokens * prompt_price + run.completion_tokens * completion_price) / MILLION


def csv_rows(response) -> list[list[str]]:
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="usage-')
    return list(csv.reader(io.StringIO(response.content.decode())))


@pytest.fixture
def spending(user, other_user, make_user, cheap_agent, dear_agent, settings):
    """Three users, two endpoints, two agents, two days; Alice and Carol in Research."""
    carol = make_user("carol")
    Group.objects.create(name="Research").user_set.add(user, carol)
    runs = [
        send_and_spend(user, agent=cheap_agent, title="a", prompt=1234, completion=567),
        send_and_spend(user, agent=dear_agent, title="b", prompt=98_765, completion=4_321),
        send_and_spend(
            other_user, agent=dear_agent, title="c", prompt=5_000, completion=9, days_ago=1
        ),
        send_and_spend(
            carol, agent=cheap_agent, title="d", prompt=42, completion=4_200, days_ago=1
        ),
    ]
    return {"runs": runs, "carol": carol}


def test_the_csv_per_model_is_each_runs_tokens_times_its_price(staff_client, spending):
    rows = csv_rows(
        staff_client.get(reverse("admin:agents_agentrun_usage"), {"by": "model", "format": "csv"})
    )

    assert rows[0] == [
        "model",
        "runs",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cost",
        "currency",
    ]
    expected = {}
    for name in ("cheap", "dear"):
        runs = [run for run in spending["runs"] if run.model_config.name == name]
        for run in runs:
            run.refresh_from_db()
        expected[name] = [
            name,
            str(len(runs)),
            str(sum(run.prompt_tokens for run in runs)),
            str(sum(run.completion_tokens for run in runs)),
            str(sum(run.prompt_tokens + run.completion_tokens for run in runs)),
            str(sum((run_cost(run) for run in runs), Decimal(0)).quantize(Decimal("0.000001"))),
            "USD",
        ]
    assert sorted(rows[1:]) == sorted(expected.values())


def test_the_csv_per_user_and_per_group(staff_client, user, other_user, spending):
    url = reverse("admin:agents_agentrun_usage")
    by_user = {
        row[0]: row for row in csv_rows(staff_client.get(url, {"by": "user", "format": "csv"}))[1:]
    }
    by_group = {
        row[0]: row for row in csv_rows(staff_client.get(url, {"by": "group", "format": "csv"}))[1:]
    }

    for run in spending["runs"]:
        run.refresh_from_db()
    alice, bob, carol = (
        [run for run in spending["runs"] if run.conversation.owner == owner]
        for owner in (user, other_user, spending["carol"])
    )
    assert by_user.keys() == {"alice", "bob", "carol"}
    assert Decimal(by_user["alice"][5]) == sum(map(run_cost, alice)).quantize(Decimal("0.000001"))
    assert by_group.keys() == {"Research", "No group"}
    assert by_group["Research"][1] == "3"  # Alice's two runs and Carol's
    assert Decimal(by_group["Research"][5]) == sum(map(run_cost, alice + carol)).quantize(
        Decimal("0.000001")
    )
    assert Decimal(by_group["No group"][5]) == sum(map(run_cost, bob)).quantize(Decimal("0.000001"))


def test_the_default_csv_is_per_user_and_day_within_the_range(staff_client, spending):
    today = timezone.localdate()
    rows = csv_rows(
        staff_client.get(
            reverse("admin:agents_agentrun_usage"),
            {"since": today.isoformat(), "until": today.isoformat(), "format": "csv"},
        )
    )

    assert rows[0][:2] == ["day", "user"]
    # Only Alice spent today; Bob's and Carol's runs were yesterday.
    assert [(row[0], row[1], row[2]) for row in rows[1:]] == [(today.isoformat(), "alice", "2")]


def test_the_page_shows_the_rows_asked_for_and_links_its_csv(staff_client, spending):
    body = page_text(staff_client.get(reverse("admin:agents_agentrun_usage"), {"by": "agent"}))

    assert "Helper" in body
    assert "Analyst" in body
    assert "Download CSV" in body


def test_a_name_a_spreadsheet_would_run_is_quoted_in_the_csv(staff_client, make_user, cheap_agent):
    send_and_spend(make_user("=HYPERLINK(1)"), agent=cheap_agent, title="x", prompt=1, completion=1)

    rows = csv_rows(
        staff_client.get(reverse("admin:agents_agentrun_usage"), {"by": "user", "format": "csv"})
    )

    assert rows[1][0] == "'=HYPERLINK(1)"


@pytest.mark.parametrize(
    ("price", "message"),
    [
        ("-1", "Ensure this value is greater than or equal to 0."),
        ("abc", "Enter a number."),
        ("0.00001", "Ensure that there are no more than 4 decimal places."),
        ("12345678", "Ensure that there are no more than 6 digits before the decimal point."),
    ],
)
def test_a_price_that_is_not_a_price_is_refused_clearly_and_changes_nothing(
    staff_client, cheap_endpoint, price, message
):
    url = reverse("admin:agents_modelconfig_change", args=[cheap_endpoint.pk])
    data = {
        "name": "cheap",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "cheap-model",
        "api_key": "",
        "default_temperature": "0",
        "context_window": "8192",
        "request_timeout_seconds": "30",
        "max_retries": "1",
        "prompt_price_per_million": price,
        "completion_price_per_million": "0.6",
    }

    response = staff_client.post(url, data)

    assert response.status_code == 200
    assert message in page_text(response)
    cheap_endpoint.refresh_from_db()
    assert cheap_endpoint.prompt_price_per_million == Decimal("0.15")
    data["prompt_price_per_million"] = "0.2"
    assert staff_client.post(url, data).status_code == 302
    assert ModelConfig.objects.get(pk=cheap_endpoint.pk).prompt_price_per_million == Decimal("0.2")


def test_a_budget_is_added_in_the_admin_and_one_for_both_a_user_and_a_group_is_refused(
    staff_client, user, cheap_agent
):
    research = Group.objects.create(name="Research")
    add = reverse("admin:agents_usagebudget_add")

    both = staff_client.post(add, {"user": user.pk, "group": research.pk, "monthly_tokens": "10"})
    neither_limit = staff_client.post(add, {"user": user.pk})
    made = staff_client.post(add, {"user": user.pk, "monthly_tokens": "1000"})

    assert "Choose either a user or a group, not both." in page_text(both)
    assert "Give a limit in tokens, in money, or both." in page_text(neither_limit)
    assert made.status_code == 302
    assert UsageBudget.objects.get().monthly_tokens == 1000
    send_and_spend(user, agent=cheap_agent, title="x", prompt=250, completion=0)
    listing = page_text(staff_client.get(reverse("admin:agents_usagebudget_changelist")))
    assert "250 of 1,000 tokens (25%)" in listing
