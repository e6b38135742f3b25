"""Feedback on answers: one thumbs up or down per user per answer, with an optional comment.

Giving feedback again replaces it; clearing removes it. The answer's profile and prompt
version are recorded with it so staff can compare versions (``agents/admin/feedback.py``).
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext

from agents.models import AnswerFeedback, Message
from agents.protocol import RefusalCode, RequestRefused


def _check_rateable(message: Message) -> None:
    if message.role != Message.Role.ASSISTANT or message.run_id is None:
        raise RequestRefused(
            RefusalCode.NOT_RATEABLE, gettext("Only an agent's answer takes feedback.")
        )


@transaction.atomic
def feedback_set(*, message: Message, user: User, rating: str, comment: str = "") -> AnswerFeedback:
    """Record ``user``'s rating of the answer ``message``, replacing any earlier one."""
    _check_rateable(message)
    if rating not in AnswerFeedback.Rating.values:
        raise RequestRefused(RefusalCode.INVALID_FIELD, gettext("The rating is 'up' or 'down'."))
    comment = comment.strip()
    if len(comment) > AnswerFeedback.COMMENT_MAX_CHARS:
        raise RequestRefused(
            RefusalCode.TOO_LONG,
            gettext("A comment has at most %(limit)s characters.")
            % {"limit": AnswerFeedback.COMMENT_MAX_CHARS},
        )
    run = message.run
    version = run.profile_version if run else None
    feedback, _ = AnswerFeedback.objects.update_or_create(
        message=message,
        user=user,
        defaults={
            "rating": rating,
            "comment": comment,
            "prompt_version": version,
            "profile_id": version.profile_id if version else message.conversation.profile_id,
        },
    )
    return feedback


def feedback_clear(*, message: Message, user: User) -> bool:
    """Remove ``user``'s feedback on ``message``; whether there was any."""
    _check_rateable(message)
    deleted, _ = AnswerFeedback.objects.filter(message=message, user=user).delete()
    return deleted > 0
