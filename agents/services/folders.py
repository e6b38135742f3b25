"""The sidebar's folders: a user's own groups of conversations.

A folder and the conversations filed in it always have the same owner; every function here
refuses a folder or a conversation of another user and writes nothing then. Filing a
conversation is not activity: its ``updated_at`` stays, so it keeps its date bucket when it
leaves the folder.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from agents.models import Conversation, ConversationFolder
from agents.protocol import RefusalCode, RequestRefused


class FolderGone(RequestRefused):
    """The folder is not there (deleted, or never this user's): nothing was written."""

    def __init__(self) -> None:
        super().__init__(RefusalCode.NOT_FOUND, _("No such folder."))


def _clean_name(name: str) -> str:
    cleaned = " ".join(name.split())
    if not cleaned:
        raise RequestRefused(RefusalCode.EMPTY, _("A folder needs a name."))
    if len(cleaned) > ConversationFolder.NAME_MAX_CHARS:
        raise RequestRefused(
            RefusalCode.TOO_LONG,
            _("A folder's name has at most %(limit)s characters.")
            % {"limit": ConversationFolder.NAME_MAX_CHARS},
        )
    return cleaned


def _save_named(folder: ConversationFolder, **save: object) -> ConversationFolder:
    # The unique constraint decides, so two tabs creating the same name at once get one folder.
    try:
        with transaction.atomic():
            folder.save(**save)  # type: ignore[arg-type]
    except IntegrityError:
        raise RequestRefused(
            RefusalCode.FOLDER_NAME_TAKEN,
            _("You already have a folder named “%(name)s”.") % {"name": folder.name},
        ) from None
    return folder


def folder_create(*, owner: User, name: str) -> ConversationFolder:
    return _save_named(ConversationFolder(owner=owner, name=_clean_name(name)))


def folder_rename(*, folder: ConversationFolder, name: str) -> ConversationFolder:
    cleaned = _clean_name(name)
    if cleaned == folder.name:
        return folder
    previous = folder.name
    folder.name = cleaned
    try:
        return _save_named(folder, update_fields=["name"])
    except RequestRefused:
        folder.name = previous
        raise


def folder_delete(*, folder: ConversationFolder) -> None:
    """The folder goes; its conversations stay, back in the date buckets (``SET_NULL``)."""
    folder.delete()


def conversation_move(
    *, conversation: Conversation, folder: ConversationFolder | None
) -> Conversation:
    """File ``conversation`` in ``folder``, or take it out of its folder with None."""
    if folder is not None and folder.owner_id != conversation.owner_id:
        raise FolderGone
    conversation.folder = folder
    conversation.save(update_fields=["folder"])
    return conversation
