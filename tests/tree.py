"""Messages written straight to the database the way the services place them in the tree:
below the end of the active branch, which they then end (agents/services/branches.py)."""

from __future__ import annotations

from typing import Any

from agents.models import Conversation, Message
from agents.services.branches import branch_activate


def continue_branch(conversation: Conversation, role: str, content: str, **fields: Any) -> Message:
    conversation.refresh_from_db(fields=["active_leaf"])
    message = Message.objects.create(
        conversation=conversation,
        role=role,
        content=content,
        parent_id=conversation.active_leaf_id,
        **fields,
    )
    branch_activate(conversation=conversation, leaf_id=message.pk)
    return message
