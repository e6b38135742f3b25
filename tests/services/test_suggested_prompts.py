"""Suggested prompts: set per profile, versioned with it, and the stock profile's show what
the offline demo model can do."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from agents.llm.factory import demo_chat_model
from agents.models import AgentProfile, PromptVersion
from agents.profile_snapshot import ProfileSnapshot, profile_snapshot
from agents.services.defaults import DEFAULT_SUGGESTED_PROMPTS, ensure_defaults
from agents.services.prompt_versions import prompt_version_ensure, prompt_version_restore
from tests.llm.test_demo import TOOLS_EN, react_messages

pytestmark = pytest.mark.django_db


def test_the_stock_profiles_suggestions_each_make_the_demo_model_use_a_tool():
    profile = ensure_defaults()
    assert profile.suggestions == list(DEFAULT_SUGGESTED_PROMPTS)
    demo = demo_chat_model()
    used = set()
    for prompt in profile.suggestions:
        reply = demo.complete(react_messages(TOOLS_EN, f"Question: {prompt}"))
        tool = next(
            (name for name in ("calculator", "current_time") if f"Action: {name}" in reply.text),
            None,
        )
        assert tool is not None, (prompt, reply.text)
        used.add(tool)
    assert used == {"calculator", "current_time"}


def test_suggestions_are_part_of_the_version_and_come_back_on_restore():
    profile = AgentProfile.objects.create(
        name="Maths", slug="maths", suggested_prompts="What is 2 + 2?\n\n  Halve 10  \n"
    )
    v1 = prompt_version_ensure(profile=profile)
    assert v1.snapshot["suggested_prompts"] == ["What is 2 + 2?", "Halve 10"]
    assert ProfileSnapshot.from_version(v1).suggested_prompts == ("What is 2 + 2?", "Halve 10")

    profile.suggested_prompts = "Something else"
    profile.save()
    v2 = prompt_version_ensure(profile=profile)
    assert v2.number == 2

    prompt_version_restore(version=v1)
    profile.refresh_from_db()
    assert profile.suggestions == ["What is 2 + 2?", "Halve 10"]
    assert PromptVersion.objects.filter(profile=profile).count() == 3


def test_a_profile_without_suggestions_keeps_its_old_snapshot():
    # Versions written before suggestions existed still match: no new version for nothing.
    profile = AgentProfile.objects.create(name="Plain", slug="plain")
    assert "suggested_prompts" not in profile_snapshot(profile)
    assert ProfileSnapshot.from_profile(profile).suggested_prompts == ()


@pytest.mark.parametrize(
    "text",
    ["\n".join(f"prompt {i}" for i in range(7)), "x" * 301],
)
def test_too_many_or_too_long_suggestions_are_refused(text):
    profile = AgentProfile(name="Busy", slug="busy", suggested_prompts=text)
    with pytest.raises(ValidationError) as refused:
        profile.full_clean()
    assert "suggested_prompts" in refused.value.message_dict


def test_a_snapshot_with_a_malformed_suggestion_list_is_invalid():
    from agents.profile_snapshot import SnapshotInvalid

    with pytest.raises(SnapshotInvalid):
        ProfileSnapshot.from_json({"suggested_prompts": "not a list"})
