"""The model list shows how well each model keeps to the ReAct format (agents/format_stats.py);
the model form sets whether the endpoint supports native tool calling."""

from __future__ import annotations

import pytest

from tests.test_format_stats import NOTE, PARSE_ERROR, a_run

pytestmark = pytest.mark.django_db


def test_the_model_list_in_the_admin_shows_parse_errors_per_run(user, settings, staff_client):
    settings.CHAT_SENDS_PER_MINUTE = 0
    a_run(user, "wobbly-model", [PARSE_ERROR, NOTE] * 2)
    a_run(user, "wobbly-model", [])

    page = staff_client.get("/admin/agents/modelconfig/").content.decode()

    assert "Keeping to the ReAct format, last 30 days" in page
    row = page[page.index("<td>wobbly-model</td>") :].split("</tr>")[0]
    # runs, runs with parse errors, parse errors per run, switches
    assert [cell.split("</td>")[0] for cell in row.split("<td>")[2:]] == ["2", "1", "1.00", "0"]


def test_supports_tool_calling_is_set_in_the_admin(staff_client):
    from agents.models import ModelConfig

    config = ModelConfig.objects.create(name="m", base_url="http://127.0.0.1:9/v1", model="m")
    form = staff_client.get(f"/admin/agents/modelconfig/{config.pk}/change/").content.decode()
    assert 'name="supports_tool_calling"' in form
