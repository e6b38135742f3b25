"""``search_attachments`` and ``read_attachment``: the files attached to the conversation the
run answers in. They are not configured in the admin: a run whose conversation has files
that were read gets both (``agents/runtime.py``). What they return is labelled the way an
answer cites it, ``[report.pdf p.3]``, and the page turns that label into a link."""

from __future__ import annotations

import re
from typing import Any

from agents.react.tools import ToolInputError
from agents.tools.base import ConfiguredTool, ToolError

MAX_RESULTS = 5
MAX_READ_CHARS = 12000
_RANGE = re.compile(r"^\s*(\d+)\s*(?:[-–]\s*(\d+))?\s*$")


def _conversation_id(tool: ConfiguredTool) -> int:
    conversation_id = getattr(tool.conversation, "pk", None)
    if conversation_id is None:
        raise ToolError("this run has no conversation whose files could be read")
    return int(conversation_id)


class SearchAttachments(ConfiguredTool):
    """Searches the files attached to this conversation."""

    name = "search_attachments"
    description = (
        "Searches the files the user attached to this conversation and returns the most "
        "relevant passages, each labelled like [file.pdf p.3] or [data.csv rows 2-40]. Cite "
        "those labels in your answer. Input: what to look for."
    )
    uses_database = True

    def run(self, query: str) -> str:
        from agents.attachments.selectors import attachment_search

        if not query.strip():
            raise ToolInputError("give some words to search for")
        hits = attachment_search(
            conversation_id=_conversation_id(self), query=query, limit=MAX_RESULTS
        )
        if not hits:
            return f"No passage of the attached files matches {query.strip()!r}."
        return "\n\n".join(f"{hit.citation} {hit.text}" for hit in hits)


class ReadAttachment(ConfiguredTool):
    """Reads an attached file, whole or some of its pages or rows."""

    name = "read_attachment"
    description = (
        'Reads a file attached to this conversation by its name: give pages ("3" or '
        '"2-5") for a PDF or slides, rows ("10-40") for a CSV or spreadsheet, or neither '
        "for the beginning of the file. Passages are labelled like [file.pdf p.3]; cite them."
    )
    uses_database = True

    def run(self, name: str, pages: str = "", rows: str = "") -> str:
        from agents.attachments.selectors import (
            attachment_by_name,
            attachment_passages,
            attachments_ready,
        )

        conversation_id = _conversation_id(self)
        attachment = attachment_by_name(conversation_id=conversation_id, name=name)
        if attachment is None:
            names = ", ".join(
                file.name for file in attachments_ready(conversation_id=conversation_id)
            )
            raise ToolInputError(
                f"no attached file is named {name!r}; the files are: {names or 'none'}"
            )
        passages = list(attachment_passages(attachment=attachment))
        if pages.strip():
            first, last = _range(pages, "pages")
            passages = [p for p in passages if p.page is not None and first <= p.page <= last]
        elif rows.strip():
            first, last = _range(rows, "rows")
            passages = [p for p in passages if p.row is not None and _rows_meet(p, first, last)]
        if not passages:
            return f"{attachment.name} has nothing at {pages or rows}."
        out: list[str] = []
        used = 0
        for passage in passages:
            label = (
                f"[{attachment.name} {passage.label}]" if passage.label else f"[{attachment.name}]"
            )
            piece = f"{label} {passage.text}"
            if used + len(piece) > MAX_READ_CHARS and out:
                out.append("(more follows: ask for a later range)")
                break
            out.append(piece)
            used += len(piece)
        return "\n\n".join(out)


def _range(text: str, what: str) -> tuple[int, int]:
    match = _RANGE.match(text)
    if match is None:
        raise ToolInputError(f"give {what} as a number or a range such as 2-5")
    first = int(match.group(1))
    last = int(match.group(2) or first)
    if last < first:
        raise ToolInputError(f"the {what} range ends before it starts")
    return first, last


def _rows_meet(passage: Any, first: int, last: int) -> bool:
    numbers = [
        int(line.split(":", 1)[0])
        for line in passage.text.splitlines()
        if line.split(":", 1)[0].isdigit()
    ]
    return any(first <= number <= last for number in numbers if number > 1)


def attachment_tools(*, user: Any, conversation: Any) -> list[ConfiguredTool]:
    """Both tools, for a run in ``conversation``."""
    return [
        SearchAttachments(user=user, conversation=conversation),
        ReadAttachment(user=user, conversation=conversation),
    ]
