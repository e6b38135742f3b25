"""What the ``python`` tool's code leaves behind, kept for the conversation's owner."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from django.core.files import File
from django.core.files.storage import storages
from django.db import transaction

from agents.models import SandboxFile

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# Served inline only when the bytes are a PNG: anything else is a download whatever its
# name says (agents/views.py, sandbox_file).
PNG = "image/png"
OTHER = "application/octet-stream"


def sandbox_files_store(*, conversation_id: int, paths: Sequence[Path]) -> list[SandboxFile]:
    """Copy the files at ``paths`` (regular files the code left; links are refused) into the
    sandbox files' storage, one ``SandboxFile`` each, in the order given."""
    stored = []
    with transaction.atomic():
        for path in paths:
            # O_NOFOLLOW: a link the code left in its folder must not copy a file of ours.
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(descriptor, "rb") as stream:
                head = stream.read(len(PNG_SIGNATURE))
                stream.seek(0)
                size = os.fstat(stream.fileno()).st_size
                is_png = path.name.lower().endswith(".png") and head == PNG_SIGNATURE
                row = SandboxFile(
                    conversation_id=conversation_id,
                    name=path.name,
                    content_type=PNG if is_png else OTHER,
                    size=size,
                )
                row.file.save(path.name, File(stream), save=False)
                row.save()
                stored.append(row)
    return stored


def sandbox_files_delete_with(*, conversation_id: int) -> None:
    """Remove the stored files of a conversation being deleted, once its deletion commits:
    the rows go with the conversation (a cascade), and a rollback keeps both."""
    names = list(
        SandboxFile.objects.filter(conversation_id=conversation_id).values_list("file", flat=True)
    )
    if not names:
        return
    storage = storages["sandbox_files"]

    def remove() -> None:
        for name in names:
            storage.delete(name)

    transaction.on_commit(remove)
