"""ModelConfig admin: the API key is write-only and stored encrypted."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.views.debug import SafeExceptionReporterFilter

from agents.models import ModelConfig
from tests.admin.conftest import page_text

API_KEY = "sk-test-VERY-secret-key-0123456789"


def _form_data(**overrides):
    data = {
        "name": "Main endpoint",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "gpt-test",
        "api_key": "",
        "default_temperature": "0.2",
        "context_window": "8192",
        "request_timeout_seconds": "30",
        "max_retries": "1",
        "prompt_price_per_million": "1.5",
        "completion_price_per_million": "6",
    }
    data.update(overrides)
    return data


@pytest.mark.django_db
def test_api_key_is_stored_encrypted_and_never_rendered(staff_client, staff):
    response = staff_client.post(
        reverse("admin:agents_modelconfig_add"), _form_data(api_key=API_KEY)
    )
    assert response.status_code == 302, page_text(response)
    model_config = ModelConfig.objects.get(name="Main endpoint")
    assert model_config.get_api_key() == API_KEY
    assert API_KEY not in model_config.api_key_encrypted

    change_url = reverse("admin:agents_modelconfig_change", args=[model_config.pk])
    change_page = page_text(staff_client.get(change_url))
    assert API_KEY not in change_page
    assert "Currently set" in change_page
    list_page = page_text(staff_client.get(reverse("admin:agents_modelconfig_changelist")))
    assert API_KEY not in list_page
    assert ">set<" in list_page

    history = page_text(
        staff_client.get(reverse("admin:agents_modelconfig_history", args=[model_config.pk]))
    )
    assert API_KEY not in history
    assert LogEntry.objects.filter(user=staff, object_id=str(model_config.pk)).exists()
    assert not any(API_KEY in entry.change_message for entry in LogEntry.objects.all())


@pytest.mark.django_db
def test_empty_key_field_keeps_the_stored_key(staff_client):
    model_config = ModelConfig(
        name="Main endpoint", base_url="http://127.0.0.1:9/v1", model="gpt-test"
    )
    model_config.set_api_key(API_KEY)
    model_config.save()
    change_url = reverse("admin:agents_modelconfig_change", args=[model_config.pk])

    response = staff_client.post(change_url, _form_data(model="gpt-other", api_key=""))

    assert response.status_code == 302
    model_config.refresh_from_db()
    assert model_config.model == "gpt-other"
    assert model_config.get_api_key() == API_KEY


@pytest.mark.django_db
def test_clear_checkbox_removes_the_key(staff_client):
    model_config = ModelConfig(name="Main endpoint", model="gpt-test")
    model_config.set_api_key(API_KEY)
    model_config.save()
    change_url = reverse("admin:agents_modelconfig_change", args=[model_config.pk])

    staff_client.post(change_url, _form_data(clear_api_key="on"))

    model_config.refresh_from_db()
    assert not model_config.has_api_key
    assert "Currently not set" in page_text(staff_client.get(change_url))


@pytest.mark.django_db
def test_invalid_form_does_not_echo_the_new_key(staff_client):
    response = staff_client.post(
        reverse("admin:agents_modelconfig_add"),
        _form_data(api_key=API_KEY, context_window="not a number"),
    )
    assert response.status_code == 200
    body = page_text(response)
    assert "Enter a whole number" in body
    assert API_KEY not in body
    assert not ModelConfig.objects.filter(name="Main endpoint").exists()


@pytest.mark.django_db
def test_new_key_and_clear_together_is_refused_and_keeps_the_old_key(staff_client):
    model_config = ModelConfig(name="Main endpoint", model="gpt-test")
    model_config.set_api_key(API_KEY)
    model_config.save()
    change_url = reverse("admin:agents_modelconfig_change", args=[model_config.pk])

    response = staff_client.post(
        change_url, _form_data(api_key="sk-another-one", clear_api_key="on")
    )

    assert response.status_code == 200
    assert "Either enter a new key or clear it" in page_text(response)
    model_config.refresh_from_db()
    assert model_config.get_api_key() == API_KEY


@pytest.mark.django_db
def test_a_crash_report_would_leave_the_api_key_and_tool_secrets_out(staff_client):
    """The change forms mark their write-only fields sensitive for Django's error reports."""
    response = staff_client.post(
        reverse("admin:agents_modelconfig_add"), _form_data(api_key=API_KEY)
    )
    reported = SafeExceptionReporterFilter().get_post_parameters(response.wsgi_request)
    assert reported["api_key"] != API_KEY
    assert reported["model"] == "gpt-test"

    response = staff_client.post(
        reverse("admin:agents_toolconfig_add"),
        {"name": "t", "kind": "calculator", "description": "d", "secrets": "KEY=hidden-value"},
    )
    reported = SafeExceptionReporterFilter().get_post_parameters(response.wsgi_request)
    assert reported["secrets"] != "KEY=hidden-value"
    assert reported["name"] == "t"
