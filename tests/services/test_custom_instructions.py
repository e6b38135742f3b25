"""Custom instructions: stored per user, bounded, and added to the prompt of every run of
that user (and of no one else's); a refused text changes nothing."""

from __future__ import annotations

import uuid

import pytest
from django.core.exceptions import ValidationError

from agents.llm.scripted import Reply
from agents.models import AgentProfile, AgentRun, Message, ModelConfig, UserPreference
from agents.react.prompt import PromptConfig, render_preview
from agents.selectors import custom_instructions_of
from agents.services.conversations import conversation_create
from agents.services.preferences import (
    CUSTOM_INSTRUCTIONS_MAX_CHARS,
    preference_set_instructions,
)
from agents.services.prompt_versions import prompt_version_ensure
from tests.driving import run_execute

INSTRUCTIONS = "I am a gardener in Lyon. Answer in two sentences at most."


@pytest.mark.django_db
def test_instructions_are_stored_trimmed_and_removed_by_an_empty_text(user, other_user):
    preference_set_instructions(user=user, text=f"  {INSTRUCTIONS}\r\n")

    assert custom_instructions_of(user_id=user.pk) == INSTRUCTIONS
    assert custom_instructions_of(user_id=other_user.pk) == ""

    preference_set_instructions(user=user, text="")
    assert custom_instructions_of(user_id=user.pk) == ""


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "code"),
    [("x" * (CUSTOM_INSTRUCTIONS_MAX_CHARS + 1), "too_long"), (None, "invalid"), (42, "invalid")],
)
def test_bad_instructions_are_refused_and_what_was_stored_stays(user, text, code):
    preference_set_instructions(user=user, text=INSTRUCTIONS)

    with pytest.raises(ValidationError) as refused:
        preference_set_instructions(user=user, text=text)

    assert refused.value.code == code
    if code == "too_long":
        assert str(CUSTOM_INSTRUCTIONS_MAX_CHARS) in refused.value.messages[0]
    assert UserPreference.objects.get(user=user).custom_instructions == INSTRUCTIONS


def test_the_prompt_carries_the_instructions_in_both_modes():
    for mode in ("react", "tools"):
        prompt = PromptConfig(mode=mode, user_instructions=INSTRUCTIONS)
        messages = render_preview(prompt, question="What should I plant?").messages
        text = "\n".join(str(message["content"]) for message in messages)
        assert INSTRUCTIONS in text
        assert "instructions of theirs" in text
        plain = render_preview(PromptConfig(mode=mode), question="What should I plant?")
        assert "instructions of theirs" not in "\n".join(
            str(message["content"]) for message in plain.messages
        )


@pytest.fixture
def scripted_profile(scripted_model, db):
    name = f"instr-{uuid.uuid4().hex[:8]}"
    config = ModelConfig.objects.create(
        name=name, base_url=scripted_model.base_url, model=name, max_retries=0
    )
    return AgentProfile.objects.create(name=name, slug=name, model_config=config), name


def _run_for(owner, profile: AgentProfile) -> AgentRun:
    conversation = conversation_create(owner=owner, profile=profile)
    question = Message.objects.create(conversation=conversation, role="user", content="Plant?")
    return AgentRun.objects.create(
        conversation=conversation,
        trigger_message=question,
        profile_version=prompt_version_ensure(profile=profile),
        model_config=profile.model_config,
        model_name=profile.model_config.model,
    )


@pytest.mark.django_db(transaction=True)
def test_a_runs_model_call_carries_its_owners_instructions_and_no_one_elses(
    user, other_user, scripted_profile, scripted_model
):
    profile, model = scripted_profile
    scripted_model.script(model, [Reply("Final Answer: Tomatoes."), Reply("Final Answer: Leeks.")])
    preference_set_instructions(user=user, text=INSTRUCTIONS)
    mine, theirs = _run_for(user, profile), _run_for(other_user, profile)

    run_execute(mine.pk)
    run_execute(theirs.pk)

    first, second = scripted_model.requests(model)
    assert INSTRUCTIONS in first["messages"][-1]["content"]
    assert INSTRUCTIONS not in str(second["messages"])
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.status == theirs.status == AgentRun.Status.SUCCEEDED
    # Kept on the run: what the run inspector shows, and what a resumed attempt is given.
    assert mine.user_instructions == INSTRUCTIONS
    assert theirs.user_instructions == ""
    # Changing them later does not rewrite what an earlier run was given.
    preference_set_instructions(user=user, text="Something else.")
    mine.refresh_from_db()
    assert mine.user_instructions == INSTRUCTIONS
