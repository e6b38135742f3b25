"""Reading a conversation's summaries, for the chat's marker and the admin.

Callers pass a conversation already scoped to the requesting user
(``agents.selectors.conversation_get``); these never widen that scope.
"""

from __future__ import annotations

from agents.models import Conversation, MemorySummary


def summary_in_use(*, conversation: Conversation) -> MemorySummary | None:
    """The summary the next run reads: the newest cut on the active branch (a summary ending
    on another branch describes that one). The chat puts its marker after ``covers_through``
    and shows ``text`` when the marker is opened. One query."""
    return (
        MemorySummary.objects.filter(
            conversation=conversation, covers_through__on_active_branch=True
        )
        .order_by("-covers_through_id")
        .first()
    )


def summary_list(*, conversation: Conversation) -> list[MemorySummary]:
    """Every summary of the conversation, oldest cut first. Row N's text covers the whole
    conversation through its ``covers_through``; ``covers_from`` is the first message it
    added to row N-1's, so the ranges tile the history."""
    return list(
        MemorySummary.objects.filter(conversation=conversation).order_by("covers_through_id")
    )
