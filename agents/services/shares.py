"""Read-only links to a conversation: its owner creates one and revokes it.

One open link per conversation: creating again hands back the open one, so the link the
owner already gave out keeps working. A revoked link stays revoked; a new one gets a new
token.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from agents.models import Conversation, ConversationShare


@transaction.atomic
def share_create(*, conversation: Conversation) -> tuple[ConversationShare, bool]:
    """The conversation's open share, created if there is none; and whether it is new."""
    # Lock the conversation so two clicks cannot both create one.
    Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
    share = ConversationShare.objects.filter(
        conversation=conversation, revoked_at__isnull=True
    ).first()
    if share is not None:
        return share, False
    return ConversationShare.objects.create(conversation=conversation), True


def share_revoke(*, conversation: Conversation) -> bool:
    """Close the conversation's open link; whether there was one."""
    closed = ConversationShare.objects.filter(
        conversation=conversation, revoked_at__isnull=True
    ).update(revoked_at=timezone.now())
    return closed > 0
