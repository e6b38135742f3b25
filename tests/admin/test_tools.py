"""ToolConfig admin: kinds from the registry, config validated per field, write-only secrets,
and "Test tool"."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from agents.models import ToolConfig
from tests.admin.conftest import page_text

SECRET = "tok-ultra-secret-value-42"


def _tool_data(**overrides):
    data = {
        "name": "capitals",
        "kind": "lookup_table",
        "description": "Looks up the capital of a country.",
        "config": json.dumps({"table": {"France": "Paris", "Japan": "Tokyo"}}),
        "secrets": "",
        "enabled": "on",
        "timeout_seconds": "10",
    }
    data.update(overrides)
    return data


@pytest.mark.django_db
def test_add_form_offers_the_registered_kinds(staff_client):
    body = page_text(staff_client.get(reverse("admin:agents_toolconfig_add")))
    for kind in ("calculator", "current_time", "lookup_table"):
        assert f'value="{kind}"' in body


@pytest.mark.django_db
def test_valid_tool_is_saved(staff_client):
    response = staff_client.post(reverse("admin:agents_toolconfig_add"), _tool_data())
    assert response.status_code == 302, page_text(response)
    tool = ToolConfig.objects.get(name="capitals")
    assert tool.config == {"table": {"France": "Paris", "Japan": "Tokyo"}}


@pytest.mark.django_db
def test_config_errors_name_the_field(staff_client):
    response = staff_client.post(
        reverse("admin:agents_toolconfig_add"),
        _tool_data(config=json.dumps({"table": {"France": 3}, "colour": "red"})),
    )
    assert response.status_code == 200
    body = page_text(response)
    assert "table.France: must be a string" in body
    assert "colour: unknown field" in body
    assert not ToolConfig.objects.filter(name="capitals").exists()


@pytest.mark.django_db
def test_unknown_kind_and_bad_name_are_refused(staff_client):
    response = staff_client.post(
        reverse("admin:agents_toolconfig_add"), _tool_data(kind="teleporter", name="9 lives")
    )
    body = page_text(response)
    assert "Select a valid choice" in body
    assert "Tool names start with a letter" in body


@pytest.mark.django_db
def test_tool_names_are_unique(staff_client):
    ToolConfig.objects.create(name="capitals", kind="calculator", description="x")
    response = staff_client.post(reverse("admin:agents_toolconfig_add"), _tool_data())
    assert "already exists" in page_text(response)


@pytest.mark.django_db
def test_secrets_are_write_only(staff_client):
    response = staff_client.post(
        reverse("admin:agents_toolconfig_add"),
        _tool_data(secrets=f"API_TOKEN={SECRET}\nOTHER=second-secret-value"),
    )
    assert response.status_code == 302
    tool = ToolConfig.objects.get(name="capitals")
    assert tool.get_secrets() == {"API_TOKEN": SECRET, "OTHER": "second-secret-value"}
    assert SECRET not in tool.secrets_encrypted

    change_url = reverse("admin:agents_toolconfig_change", args=[tool.pk])
    body = page_text(staff_client.get(change_url))
    assert "Stored secrets: API_TOKEN, OTHER" in body
    assert SECRET not in body
    assert "second-secret-value" not in body
    assert SECRET not in page_text(staff_client.get(reverse("admin:agents_toolconfig_changelist")))

    # Leave empty to keep; NAME= removes one; a new line adds or replaces.
    staff_client.post(change_url, _tool_data(description="Capitals of countries."))
    tool.refresh_from_db()
    assert tool.description == "Capitals of countries."
    assert tool.get_secrets() == {"API_TOKEN": SECRET, "OTHER": "second-secret-value"}

    staff_client.post(change_url, _tool_data(secrets="OTHER=\nNEW_ONE=fresh-value"))
    tool.refresh_from_db()
    assert tool.get_secrets() == {"API_TOKEN": SECRET, "NEW_ONE": "fresh-value"}

    staff_client.post(change_url, _tool_data(clear_secrets="on"))
    tool.refresh_from_db()
    assert tool.get_secrets() == {}


@pytest.mark.django_db
def test_failed_submit_does_not_echo_secrets(staff_client):
    response = staff_client.post(
        reverse("admin:agents_toolconfig_add"),
        _tool_data(secrets=f"API_TOKEN={SECRET}", config="{not json"),
    )
    assert response.status_code == 200
    body = page_text(response)
    assert "Enter a valid JSON" in body
    assert SECRET not in body


@pytest.mark.django_db
def test_malformed_secret_line_is_refused_without_echoing_it(staff_client):
    tool = ToolConfig.objects.create(
        name="capitals", kind="lookup_table", description="x", config={"table": {"a": "b"}}
    )
    tool.set_secrets({"API_TOKEN": SECRET})
    tool.save()
    response = staff_client.post(
        reverse("admin:agents_toolconfig_change", args=[tool.pk]),
        _tool_data(secrets="just-a-bare-secret-value"),
    )
    body = page_text(response)
    assert "Line 1 is not NAME=value" in body
    assert "just-a-bare-secret-value" not in body
    tool.refresh_from_db()
    assert tool.get_secrets() == {"API_TOKEN": SECRET}


@pytest.mark.django_db
def test_test_tool_shows_output_and_duration(staff_client):
    tool = ToolConfig.objects.create(
        name="capitals",
        kind="lookup_table",
        description="Capitals",
        config={"table": {"France": "Paris"}},
        enabled=False,  # testing before enabling is the point
    )
    url = reverse("admin:agents_toolconfig_test", args=[tool.pk])
    assert staff_client.get(url).status_code == 200

    body = page_text(staff_client.post(url, {"sample_input": "france"}))
    assert "Paris" in body
    assert "Output" in body
    assert " ms" in body


@pytest.mark.django_db
def test_test_tool_shows_the_error(staff_client):
    tool = ToolConfig.objects.create(name="calc", kind="calculator", description="Calculates")
    url = reverse("admin:agents_toolconfig_test", args=[tool.pk])

    body = page_text(staff_client.post(url, {"sample_input": "__import__('os')"}))

    assert "Error" in body
    assert "tool-output" in body


@pytest.mark.django_db
def test_test_tool_with_arguments_that_do_not_fit(staff_client):
    tool = ToolConfig.objects.create(
        name="capitals", kind="lookup_table", description="x", config={"table": {"a": "b"}}
    )
    url = reverse("admin:agents_toolconfig_test", args=[tool.pk])

    body = page_text(staff_client.post(url, {"sample_input": '{"country": "France"}'}))

    assert "The input does not fit this tool" in body


@pytest.mark.django_db
def test_empty_config_means_the_kind_defaults(staff_client):
    response = staff_client.post(
        reverse("admin:agents_toolconfig_add"),
        _tool_data(name="calc", kind="calculator", config=""),
    )
    assert response.status_code == 302, page_text(response)
    assert ToolConfig.objects.get(name="calc").config == {}


@pytest.mark.django_db
def test_config_is_shown_indented_for_editing(staff_client):
    tool = ToolConfig.objects.create(
        name="capitals", kind="lookup_table", description="x", config={"table": {"a": "b"}}
    )
    body = page_text(staff_client.get(reverse("admin:agents_toolconfig_change", args=[tool.pk])))
    assert "{\n  &quot;table&quot;: {\n    &quot;a&quot;: &quot;b&quot;\n  }\n}" in body


@pytest.mark.django_db
def test_secrets_saved_under_another_secret_key_can_be_entered_again(staff_client, staff, settings):
    tool = ToolConfig.objects.create(
        name="capitals", kind="lookup_table", description="x", config={"table": {"a": "b"}}
    )
    settings.SECRET_KEY = "an-old-secret-key-" + "x" * 40
    tool.set_secrets({"API_TOKEN": "old-value-1234"})
    tool.save()
    settings.SECRET_KEY = "the-new-secret-key-" + "y" * 40
    staff_client.force_login(staff)  # sessions are signed with the key too
    change_url = reverse("admin:agents_toolconfig_change", args=[tool.pk])

    assert "unreadable" in page_text(staff_client.get(change_url))
    assert "unreadable" in page_text(
        staff_client.get(reverse("admin:agents_toolconfig_changelist"))
    )
    staff_client.post(change_url, _tool_data(secrets="API_TOKEN=new-value-5678"))

    tool.refresh_from_db()
    assert tool.get_secrets() == {"API_TOKEN": "new-value-5678"}


@pytest.mark.django_db
def test_needs_approval_is_set_in_the_admin(staff_client):
    response = staff_client.post(
        reverse("admin:agents_toolconfig_add"), _tool_data(needs_approval="on")
    )
    assert response.status_code == 302, page_text(response)
    assert ToolConfig.objects.get(name="capitals").needs_approval is True
    listing = page_text(staff_client.get(reverse("admin:agents_toolconfig_changelist")))
    assert "Needs approval" in listing
