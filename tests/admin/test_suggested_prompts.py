"""Suggested prompts are set on the profile's admin form and saved with its version."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import AgentProfile
from tests.admin.conftest import page_text, profile_form_data

pytestmark = pytest.mark.django_db


def test_suggestions_set_in_the_admin_land_in_the_version(staff_client):
    response = staff_client.post(
        reverse("admin:agents_agentprofile_add"),
        profile_form_data(suggested_prompts="Capital of France?\r\nCapital of Peru?\r\n"),
    )
    assert response.status_code == 302, page_text(response)
    profile = AgentProfile.objects.get(slug="geographer")
    assert profile.suggestions == ["Capital of France?", "Capital of Peru?"]
    version = profile.versions.get()
    assert version.snapshot["suggested_prompts"] == ["Capital of France?", "Capital of Peru?"]


def test_too_many_suggestions_are_refused_with_the_reason(staff_client):
    text = "\n".join(f"Question {i}?" for i in range(7))
    response = staff_client.post(
        reverse("admin:agents_agentprofile_add"), profile_form_data(suggested_prompts=text)
    )
    assert response.status_code == 200
    assert "At most 6 suggestions, one per line." in page_text(response)
    assert not AgentProfile.objects.filter(slug="geographer").exists()
