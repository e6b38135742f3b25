"""What the data migration gives the ledger entries written before prices were copied onto
them: their endpoint's prices of that day and their run's agent."""

from __future__ import annotations

import importlib
from decimal import Decimal

import pytest
from django.apps import apps

from agents.models import UsageEntry
from agents.services.conversations import conversation_create, message_send

pytestmark = pytest.mark.django_db


def test_entries_from_before_take_their_endpoints_prices_and_their_runs_agent(
    user, cheap_agent, cheap_endpoint
):
    run = message_send(conversation=conversation_create(owner=user), user=user, content="q",
                       profile=cheap_agent).run  # fmt: skip
    summary = UsageEntry.objects.create(
        user=user, kind=UsageEntry.Kind.SUMMARY, model_config=cheap_endpoint, prompt_tokens=5
    )
    demo = UsageEntry.objects.create(user=user, kind=UsageEntry.Kind.RUN, prompt_tokens=5)
    # As they were before the copy: no prices, no agent.
    UsageEntry.objects.update(
        prompt_price_per_million=0, completion_price_per_million=0, profile=None
    )
    migration = importlib.import_module("agents.migrations.0016_usage_prices_and_budgets")

    migration.entries_keep_their_prices_and_agents(apps, None)

    entry = UsageEntry.objects.get(run_id=run.pk)
    assert (entry.prompt_price_per_million, entry.completion_price_per_million) == (
        Decimal("0.15"),
        Decimal("0.6"),
    )
    assert entry.profile_id == cheap_agent.pk
    summary.refresh_from_db()
    assert (summary.prompt_price_per_million, summary.profile_id) == (Decimal("0.15"), None)
    demo.refresh_from_db()
    assert (demo.prompt_price_per_million, demo.completion_price_per_million) == (0, 0)
