"""The python tool in the admin: a new one needs approval, and a server without bubblewrap
says the tool is unavailable in the tool list and on the tool's page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import ToolConfig
from agents.tools import sandbox
from tests.admin.conftest import page_text

pytestmark = pytest.mark.django_db


def _python_tool_data(**overrides):
    # needs_approval is left unticked: the kind ticks it for a new tool.
    data = {
        "name": "python",
        "kind": "python",
        "description": "Runs Python.",
        "config": "{}",
        "secrets": "",
        "enabled": "on",
        "timeout_seconds": "30",
    }
    data.update(overrides)
    return data


def test_a_new_python_tool_needs_approval_and_staff_may_switch_it_off(staff_client):
    response = staff_client.post(reverse("admin:agents_toolconfig_add"), _python_tool_data())
    assert response.status_code == 302, page_text(response)
    tool = ToolConfig.objects.get(name="python")
    assert tool.needs_approval

    change = reverse("admin:agents_toolconfig_change", args=[tool.pk])
    assert staff_client.post(change, _python_tool_data()).status_code == 302
    tool.refresh_from_db()
    assert not tool.needs_approval


def test_without_bubblewrap_the_admin_says_the_tool_is_unavailable(staff_client, settings):
    tool = ToolConfig.objects.create(name="python", kind="python", description="Runs Python.")
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"

    listing = page_text(staff_client.get(reverse("admin:agents_toolconfig_changelist")))
    assert "No: bubblewrap (/nonexistent/bwrap) is not installed on this server" in listing
    page = page_text(staff_client.get(reverse("admin:agents_toolconfig_change", args=[tool.pk])))
    assert (
        "Unavailable on this server: bubblewrap (/nonexistent/bwrap) is not installed on this "
        "server. Its tools refuse every call." in page
    )


def test_with_the_sandbox_in_place_the_tool_is_listed_as_available(staff_client):
    assert not sandbox.unavailable_reason(), "run `make sandbox-venv` (it installs bubblewrap)"
    ToolConfig.objects.create(name="python", kind="python", description="Runs Python.")
    listing = page_text(staff_client.get(reverse("admin:agents_toolconfig_changelist")))
    assert "No: bubblewrap" not in listing


def test_try_it_names_a_tool_that_cannot_run_here(staff_client, settings):
    from agents.models import AgentProfile

    tool = ToolConfig.objects.create(name="python", kind="python", description="Runs Python.")
    profile = AgentProfile.objects.create(name="Analyst", slug="analyst")
    profile.tools.set([tool])
    url = reverse("admin:agents_agentprofile_try", args=[profile.pk])
    note = "The tool python is unavailable on this server"

    assert note not in page_text(staff_client.get(url))
    settings.SANDBOX_BWRAP = "/nonexistent/bwrap"
    assert (
        f"{note}: bubblewrap (/nonexistent/bwrap) is not installed on this server. Its calls "
        "are refused." in page_text(staff_client.get(url))
    )
