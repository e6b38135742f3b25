"""The conversation's branches: which one is active, and switching between them.

Regenerate and edit keep earlier versions as siblings (``agents/services/conversations.py``);
the active branch is the path from a first message to ``Conversation.active_leaf``. Every
message on it has ``on_active_branch`` set, so the list, search, export and the API read it
with a plain filter; runs read their own branch by walking the tree (``agents/selectors.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext as _

from agents import selectors
from agents.models import Conversation, Message
from agents.protocol import RefusalCode, RequestRefused


@dataclass(frozen=True)
class BranchSwitch:
    conversation: Conversation
    leaf_id: int
    branch: list[int]  # the message ids of the branch now shown, oldest first


def branch_activate(*, conversation: Conversation, leaf_id: int | None) -> list[int]:
    """Make the branch ending at ``leaf_id`` the active one; the caller holds the
    conversation's row lock. Returns the branch's message ids, oldest first."""
    branch = selectors.branch_ids(conversation=conversation, leaf_id=leaf_id)
    Message.objects.filter(conversation=conversation, on_active_branch=True).exclude(
        id__in=branch
    ).update(on_active_branch=False)
    Message.objects.filter(id__in=branch, on_active_branch=False).update(on_active_branch=True)
    if conversation.active_leaf_id != leaf_id:
        conversation.active_leaf_id = leaf_id
        conversation.save(update_fields=["active_leaf"])
    return branch


def branch_switch(*, conversation: Conversation, user: User, message_id: int) -> BranchSwitch:
    """Show the branch through ``message_id``: it and, below it, the newest continuation.

    Only the owner may switch (another user's conversation is ``not_found``, as if it did not
    exist), and only to a message of this conversation (``not_found`` otherwise). Nothing is
    sent to the model; the next message continues the branch switched to.
    """
    with transaction.atomic():
        locked = (
            Conversation.objects.select_for_update()
            .filter(pk=conversation.pk, owner_id=user.pk)
            .first()
        )
        if locked is None:
            raise RequestRefused(RefusalCode.NOT_FOUND, _("No such conversation."))
        leaf_id = selectors.branch_newest_leaf(conversation=locked, message_id=message_id)
        if leaf_id is None:
            raise RequestRefused(
                RefusalCode.NOT_FOUND,
                _("Message %(id)s is not in this conversation.") % {"id": message_id},
            )
        branch = branch_activate(conversation=locked, leaf_id=leaf_id)
    conversation.active_leaf_id = leaf_id
    return BranchSwitch(conversation=conversation, leaf_id=leaf_id, branch=branch)
