"""Feedback on answers: one per reader per answer, replaced by a new one, removed by clearing."""

from __future__ import annotations

import pytest

from agents.models import AnswerFeedback, Message
from agents.protocol import RefusalCode, RequestRefused
from agents.services.conversations import conversation_create
from agents.services.defaults import ensure_defaults
from agents.services.feedback import feedback_clear, feedback_set
from agents.services.prompt_versions import prompt_version_current
from tests.answers import finished_answer

pytestmark = pytest.mark.django_db


@pytest.fixture
def answer(user):
    profile = ensure_defaults()
    conversation = conversation_create(owner=user, title="Sums", profile=profile)
    return finished_answer(
        conversation=conversation, profile_version=prompt_version_current(profile=profile)
    )


def test_feedback_records_the_answers_profile_and_prompt_version(user, answer):
    feedback = feedback_set(message=answer, user=user, rating="up", comment="  Spot on.  ")
    version = answer.run.profile_version
    assert (feedback.rating, feedback.comment) == ("up", "Spot on.")
    assert feedback.prompt_version == version
    assert feedback.profile == version.profile


def test_giving_feedback_again_replaces_it(user, answer):
    feedback_set(message=answer, user=user, rating="up", comment="good")
    feedback_set(message=answer, user=user, rating="down", comment="wrong after all")
    assert list(AnswerFeedback.objects.values_list("rating", "comment")) == [
        ("down", "wrong after all")
    ]


def test_each_reader_has_their_own_feedback_and_clearing_removes_only_mine(
    user, other_user, answer
):
    feedback_set(message=answer, user=user, rating="up")
    feedback_set(message=answer, user=other_user, rating="down")
    assert feedback_clear(message=answer, user=user) is True
    assert feedback_clear(message=answer, user=user) is False
    assert list(AnswerFeedback.objects.values_list("user__username", "rating")) == [("bob", "down")]


def test_a_question_takes_no_feedback(user, answer):
    question = Message.objects.filter(conversation=answer.conversation, role="user").get()
    with pytest.raises(RequestRefused) as refused:
        feedback_set(message=question, user=user, rating="up")
    assert refused.value.code == RefusalCode.NOT_RATEABLE
    assert not AnswerFeedback.objects.exists()


@pytest.mark.parametrize("rating", ["", "meh", "UP"])
def test_an_unknown_rating_is_refused(user, answer, rating):
    with pytest.raises(RequestRefused) as refused:
        feedback_set(message=answer, user=user, rating=rating)
    assert refused.value.code == RefusalCode.INVALID_FIELD
    assert not AnswerFeedback.objects.exists()


def test_a_comment_over_the_limit_is_refused_and_the_old_feedback_stays(user, answer):
    feedback_set(message=answer, user=user, rating="up", comment="fine")
    with pytest.raises(RequestRefused) as refused:
        feedback_set(message=answer, user=user, rating="down", comment="x" * 2001)
    assert refused.value.code == RefusalCode.TOO_LONG
    assert list(AnswerFeedback.objects.values_list("rating", "comment")) == [("up", "fine")]
