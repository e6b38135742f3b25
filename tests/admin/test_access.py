"""Every admin page loads for staff; signed-in non-staff users and anonymous visitors are
sent to the admin login and change nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import (
    AgentProfile,
    ModelConfig,
    PromptVersion,
    ToolConfig,
)
from agents.services.prompt_versions import prompt_version_ensure


@pytest.fixture
def objects(db, staff, make_finished_run):
    model_config = ModelConfig.objects.create(name="Endpoint", model="m")
    tool = ToolConfig.objects.create(name="calc", kind="calculator", description="Calculates")
    profile = AgentProfile.objects.create(name="Geographer", slug="geographer")
    profile.tools.set([tool])
    version = prompt_version_ensure(profile=profile)
    run = make_finished_run(owner=staff, profile_version=version, model_config=model_config)
    return {
        "model_config": model_config,
        "tool": tool,
        "profile": profile,
        "version": version,
        "run": run,
    }


def _pages(objects) -> list[str]:
    profile = objects["profile"]
    run = objects["run"]
    urls = [reverse("admin:index"), reverse("admin:agents_agentrun_usage")]
    for model in (
        "modelconfig",
        "agentprofile",
        "toolconfig",
        "agentrun",
        "conversation",
        "knowledgedocument",
        "promptversion",
    ):
        urls.append(reverse(f"admin:agents_{model}_changelist"))
    for model in ("modelconfig", "agentprofile", "toolconfig", "knowledgedocument"):
        urls.append(reverse(f"admin:agents_{model}_add"))
    urls += [
        reverse("admin:agents_modelconfig_change", args=[objects["model_config"].pk]),
        reverse("admin:agents_toolconfig_change", args=[objects["tool"].pk]),
        reverse("admin:agents_toolconfig_test", args=[objects["tool"].pk]),
        reverse("admin:agents_agentprofile_change", args=[profile.pk]),
        reverse("admin:agents_agentprofile_preview", args=[profile.pk]),
        reverse("admin:agents_agentprofile_try", args=[profile.pk]),
        reverse("admin:agents_agentprofile_versions", args=[profile.pk]),
        reverse("admin:agents_agentprofile_version", args=[profile.pk, 1]),
        reverse("admin:agents_promptversion_change", args=[objects["version"].pk]),
        reverse("admin:agents_agentrun_change", args=[run.pk]),
        reverse("admin:agents_conversation_change", args=[run.conversation_id]),
    ]
    return urls


@pytest.mark.django_db
def test_every_page_loads_for_staff(staff_client, objects):
    for url in _pages(objects):
        response = staff_client.get(url)
        assert response.status_code == 200, url


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["anonymous", "non-staff"])
def test_other_users_are_sent_to_the_login(client, make_user, objects, who):
    if who == "non-staff":
        client.force_login(make_user("carol"))
    for url in _pages(objects):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login")), url


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["anonymous", "non-staff"])
def test_other_users_cannot_post_actions(client, make_user, objects, who):
    if who == "non-staff":
        client.force_login(make_user("carol"))
    profile = objects["profile"]
    profile.max_iterations = 3
    profile.save()
    prompt_version_ensure(profile=profile)

    posts = [
        reverse("admin:agents_agentprofile_version_restore", args=[profile.pk, 1]),
        reverse("admin:agents_agentprofile_try", args=[profile.pk]),
        reverse("admin:agents_modelconfig_check", args=[objects["model_config"].pk]),
        reverse("admin:agents_toolconfig_test", args=[objects["tool"].pk]),
        reverse("admin:agents_toolconfig_add"),
    ]
    for url in posts:
        response = client.post(url, {"question": "hi", "sample_input": "1+1", "name": "x"})
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login")), url
    assert PromptVersion.objects.filter(profile=profile).count() == 2
    assert not ToolConfig.objects.filter(name="x").exists()


@pytest.mark.django_db
def test_staff_without_model_permissions_is_refused(client, make_user, objects):
    client.force_login(make_user("dora", is_staff=True))
    profile = objects["profile"]
    for url in (
        reverse("admin:agents_agentrun_changelist"),
        reverse("admin:agents_agentrun_usage"),
        reverse("admin:agents_agentprofile_preview", args=[profile.pk]),
        reverse("admin:agents_agentprofile_try", args=[profile.pk]),
        reverse("admin:agents_toolconfig_test", args=[objects["tool"].pk]),
    ):
        assert client.get(url).status_code == 403, url


@pytest.mark.django_db
def test_runs_and_conversations_are_read_only(staff_client, objects):
    run = objects["run"]
    assert staff_client.get(reverse("admin:agents_agentrun_add")).status_code == 403
    assert (
        staff_client.post(reverse("admin:agents_agentrun_delete", args=[run.pk])).status_code == 403
    )
    change = staff_client.post(
        reverse("admin:agents_agentrun_change", args=[run.pk]), {"status": "failed"}
    )
    assert change.status_code == 403
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert staff_client.get(reverse("admin:agents_conversation_add")).status_code == 403
