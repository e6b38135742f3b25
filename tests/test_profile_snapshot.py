"""ProfileSnapshot: the pinned JSON of a profile version, parsed and checked in one place."""

from __future__ import annotations

import pytest

from agents.llm.demo import DEMO_MODEL_NAME
from agents.memory.strategies import MemorySettings
from agents.models import AgentProfile, ModelConfig, ToolConfig
from agents.profile_snapshot import (
    ProfileSnapshot,
    SnapshotInvalid,
    profile_snapshot,
    snapshot_model_config,
    snapshot_model_name,
)
from agents.services.conversations import conversation_create, message_send
from agents.services.defaults import default_profile, ensure_defaults


@pytest.mark.django_db
def test_a_profile_becomes_a_typed_snapshot():
    model_config = ModelConfig.objects.create(name="local", base_url="http://x/v1", model="m")
    tool = ToolConfig.objects.create(name="calc", kind="calculator", description="d")
    profile = AgentProfile.objects.create(
        name="Helper",
        slug="helper",
        mode="tools",
        label_set="zh",
        model_config=model_config,
        temperature=0.25,
        max_iterations=4,
        max_execution_time=30,
        memory_strategy="window",
        memory_window_turns=2,
        memory_token_budget=900,
    )
    profile.tools.set([tool])

    snapshot = ProfileSnapshot.from_profile(profile)

    assert snapshot == ProfileSnapshot(
        name="Helper",
        slug="helper",
        mode="tools",
        label_set="zh",
        temperature=0.25,
        model_config_id=model_config.pk,
        tool_ids=(tool.pk,),
        tool_names=("calc",),
        max_iterations=4,
        max_execution_time=30,
        memory=MemorySettings("window", 2, 900),
    )
    assert ProfileSnapshot.from_json(profile_snapshot(profile)) == snapshot


def test_an_old_version_without_newer_keys_takes_the_defaults():
    snapshot = ProfileSnapshot.from_json({"slug": "old", "system_prompt": None})

    assert snapshot.slug == "old"
    assert (snapshot.mode, snapshot.label_set, snapshot.system_prompt) == ("react", "en", "")
    assert snapshot.model_config_id is None
    assert snapshot.tool_ids == ()
    assert (snapshot.max_iterations, snapshot.max_execution_time) == (15, 300.0)
    assert snapshot.memory == MemorySettings()


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        ({"mode": "chat"}, "unknown mode 'chat'"),
        ({"label_set": "fr"}, "unknown label set 'fr'"),
        ({"memory_strategy": "everything"}, "Unknown memory strategy"),
        ({"max_iterations": "15"}, "max_iterations should be a whole number"),
        ({"temperature": "warm"}, "temperature should be a number"),
        ({"tool_ids": [1, "2"]}, "tool_ids should be a list of int"),
        ({"model_config_id": True}, "model_config_id should be a whole number"),
        ({"system_prompt": ["a"]}, "system_prompt should be text"),
    ],
)
def test_a_snapshot_that_cannot_run_is_refused_with_the_reason(data, complaint):
    with pytest.raises(SnapshotInvalid, match=complaint):
        ProfileSnapshot.from_json(data)


def test_with_mode_checks_the_mode():
    snapshot = ProfileSnapshot()

    assert snapshot.with_mode("tools").mode == "tools"
    with pytest.raises(SnapshotInvalid):
        snapshot.with_mode("chat")


@pytest.mark.django_db
def test_the_model_config_is_none_when_unnamed_or_gone():
    model_config = ModelConfig.objects.create(name="gone", base_url="http://x/v1", model="m")
    named = ProfileSnapshot(model_config_id=model_config.pk)

    assert snapshot_model_config(named) == model_config
    assert snapshot_model_config(ProfileSnapshot()) is None
    model_config.delete()
    assert snapshot_model_config(named) is None


@pytest.mark.django_db
def test_the_model_name_is_the_one_runs_call_with_the_settings_endpoint(settings, user):
    """An endpoint row without a base URL runs on the settings' OPENAI_MODEL, whatever its own
    ``model`` field says; the summariser used to count tokens for that field instead."""
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    settings.OPENAI_API_KEY = "sk-test"
    settings.OPENAI_MODEL = "gpt-4o-mini"
    profile = default_profile()
    assert profile.model_config.base_url == ""
    assert profile.model_config.model != "gpt-4o-mini"

    snapshot = ProfileSnapshot.from_profile(profile)
    sent = message_send(conversation=conversation_create(owner=user), user=user, content="hi")

    assert snapshot_model_name(snapshot) == "gpt-4o-mini" == sent.run.model_name


@pytest.mark.django_db
def test_the_model_name_without_any_endpoint_is_the_demo(settings):
    settings.OPENAI_BASE_URL = settings.OPENAI_API_KEY = settings.OPENAI_MODEL = ""

    assert snapshot_model_name(ProfileSnapshot.from_profile(default_profile())) == DEMO_MODEL_NAME


@pytest.mark.django_db
def test_the_default_profile_is_the_flagged_one_or_a_fresh_one():
    flagged = ensure_defaults()
    assert default_profile() == flagged

    AgentProfile.objects.all().delete()
    created = default_profile()

    assert created.is_default
    assert created.versions.exists()
