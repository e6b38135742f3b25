"""Files attached in the chat: accept and store one, read it into passages, delete it.

``attachment_upload`` judges the bytes (``agents/attachments/files.py``) before anything is
written, so a refused file leaves nothing behind; an accepted one is stored through the
``attachments`` storage and read by the ``attachment_extract`` task after commit.
``attachment_extract`` is safe to run twice: a file no longer being read is left alone, and
its passages are replaced, never added to. Deleting removes the rows in the transaction and
the stored bytes once it commits.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.db import transaction
from django.utils.translation import gettext as _

from agents import embeddings
from agents.attachments.extract import ExtractError, extract
from agents.attachments.files import FileRefused, clean_name, judge
from agents.attachments.selectors import attachments_since_last_question
from agents.llm.tokens import count_tokens
from agents.models import Attachment, AttachmentChunk, Conversation
from agents.protocol import RefusalCode

logger = logging.getLogger(__name__)


def attachment_upload(
    *, conversation: Conversation, user: User, name: str, data: bytes
) -> Attachment:
    """Store a file the user attached; raises ``FileRefused`` (nothing written) when it may not
    be read. The caller has checked that ``conversation`` is the user's."""
    name = clean_name(name)
    limit = settings.CHAT_ATTACHMENTS_PER_MESSAGE
    if attachments_since_last_question(conversation=conversation) >= limit:
        raise FileRefused(
            RefusalCode.TOO_MANY_FILES,
            _("A message can have at most %(limit)s files.") % {"limit": limit},
        )
    verdict = judge(name=name, data=data)
    attachment = Attachment(
        conversation=conversation,
        owner=user,
        name=name,
        kind=verdict.kind,
        size=len(data),
        parts=verdict.parts,
    )
    attachment.file.save(name, ContentFile(data), save=False)
    try:
        with transaction.atomic():
            attachment.save()
            transaction.on_commit(lambda: _enqueue_extract(attachment.pk))
    except BaseException:
        attachment.file.delete(save=False)
        raise
    return attachment


EXTRACT_TASK = "agents.attachment_extract"


def _enqueue_extract(attachment_id: int) -> None:
    # By name, as runs are queued (agents/runs/queue.py): the tasks module imports this one.
    if current_app.conf.task_always_eager:
        current_app.loader.import_default_modules()
        current_app.tasks[EXTRACT_TASK].apply(args=[attachment_id])
        return
    current_app.send_task(EXTRACT_TASK, args=[attachment_id])


def attachment_extract(*, attachment_id: int) -> None:
    """Read a stored file into passages and mark it ready, or failed with the reason."""
    attachment = Attachment.objects.filter(pk=attachment_id).first()
    if attachment is None or attachment.state != Attachment.State.READING:
        return
    try:
        with attachment.file.open("rb") as stored:
            data = stored.read()
        extracted = extract(kind=attachment.kind, data=data)
    except (ExtractError, FileRefused) as exc:
        _fail(attachment, str(exc))
        return
    except Exception as exc:
        # Office and PDF readers raise many kinds of error on a damaged file.
        logger.warning("attachment %s could not be read", attachment_id, exc_info=True)
        _fail(attachment, f"the file could not be read ({type(exc).__name__})")
        return
    if not extracted.passages:
        _fail(attachment, "the file has no text to read")
        return
    tokens = sum(count_tokens(passage.text) for passage in extracted.passages)
    # Outside the transaction: embedding a long file takes a while and holds no row.
    embedded = embeddings.embed_passages([passage.text for passage in extracted.passages])
    model, vectors = embedded if embedded else ("", [None] * len(extracted.passages))
    with transaction.atomic():
        locked = Attachment.objects.select_for_update().filter(pk=attachment_id).first()
        if locked is None or locked.state != Attachment.State.READING:
            return
        locked.chunks.all().delete()
        AttachmentChunk.objects.bulk_create(
            AttachmentChunk(
                attachment=locked,
                position=position,
                label=passage.label,
                page=passage.page,
                row=passage.row,
                text=passage.text,
                embedding=vector,
                embedding_model=model,
            )
            for position, (passage, vector) in enumerate(
                zip(extracted.passages, vectors, strict=True), start=1
            )
        )
        locked.state = Attachment.State.READY
        locked.error = ""
        locked.text_tokens = tokens
        if extracted.parts is not None:
            locked.parts = extracted.parts
        locked.save(update_fields=["state", "error", "text_tokens", "parts"])


def _fail(attachment: Attachment, reason: str) -> None:
    Attachment.objects.filter(pk=attachment.pk, state=Attachment.State.READING).update(
        state=Attachment.State.FAILED, error=reason[:1000]
    )


def attachment_delete(*, attachment: Attachment) -> None:
    """Remove a file (a chip removed before sending): its row and passages now, its stored
    bytes once that commits (``attachment_bytes_forget``)."""
    attachment.delete()


def attachment_bytes_forget(sender: type, instance: Attachment, **kwargs: object) -> None:
    """``post_delete`` of ``Attachment``: however the row goes (a removed chip, a deleted
    conversation or user, the admin), its stored bytes are deleted once the delete commits,
    and kept if it rolls back."""
    name = instance.file.name
    if name:
        transaction.on_commit(lambda: _delete_stored([name]))


def _delete_stored(names: list[str]) -> None:
    storage = Attachment._meta.get_field("file").storage
    for name in names:
        try:
            storage.delete(name)
        except OSError:
            logger.warning("could not delete stored attachment %s", name, exc_info=True)
