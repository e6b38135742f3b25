"""A run started through the API (agents/api/v1.py): the web chat's send, as the key's owner.

Nothing here decides anything a send decides: ``message_send`` checks the profile, the
content, the rate limit, the quota and a run already in progress, exactly as for the page,
so every rule added to a send applies to the API too. What is added is only the new
conversation a first question opens, in the same transaction, so a refused send leaves no
empty conversation behind.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext as _

from agents import selectors
from agents.models import AgentProfile
from agents.protocol import RefusalCode, RequestRefused
from agents.services.conversations import SendResult, conversation_create, message_send


def api_run_start(
    *,
    user: User,
    profile: AgentProfile,
    content: str,
    conversation_id: int | None,
    client_id: str | None = None,
) -> SendResult:
    """Send ``content`` to ``profile`` in the user's conversation ``conversation_id``, or in
    a new one (None). Raises ``RequestRefused`` and writes nothing when the send is refused."""
    with transaction.atomic():
        if conversation_id is None:
            conversation = conversation_create(owner=user, profile=profile)
        else:
            found = selectors.conversation_get(user=user, conversation_id=conversation_id)
            if found is None:
                raise RequestRefused(RefusalCode.NOT_FOUND, _("No such conversation."))
            conversation = found
        return message_send(
            conversation=conversation,
            user=user,
            content=content,
            client_id=client_id,
            profile=profile,
        )
