"""``conversation_search``: finds what was said in the user's own earlier conversations."""

from __future__ import annotations

from typing import Any

from agents.react.tools import ToolInputError
from agents.tools.base import ConfiguredTool, ToolError

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        "snippet_chars": {"type": "integer", "minimum": 40, "maximum": 2000, "default": 240},
    },
    "additionalProperties": False,
}


class ConversationSearch(ConfiguredTool):
    """Searches the current user's own past conversations."""

    read_only = True

    name = "conversation_search"
    description = (
        "Searches the user's earlier conversations (titles and messages) and returns matching "
        "snippets with the conversation title and date. Input: words to look for."
    )

    uses_database = True
    reads_private_data = True

    def run(self, query: str) -> str:
        from agents.selectors import message_search

        if not query.strip():
            raise ToolInputError("give some words to search for")
        if self.user is None:
            raise ToolError("there is no signed-in user whose conversations could be searched")
        messages = message_search(
            user=self.user,
            q=query,
            exclude_conversation_id=getattr(self.conversation, "pk", None),
            limit=int(self.config.get("max_results", 5)),
        )
        if not messages:
            return f"No earlier conversation mentions {query.strip()!r}."
        width = int(self.config.get("snippet_chars", 240))
        lines = []
        for message in messages:
            conversation = message.conversation
            title = conversation.title or f"Conversation {conversation.pk}"
            speaker = "user" if message.role == "user" else "assistant"
            lines.append(
                f'- "{title}" ({message.created_at:%Y-%m-%d}, {speaker}): '
                f"{snippet(message.content, query, width)}"
            )
        return "\n".join(lines)


def snippet(text: str, query: str, width: int) -> str:
    """About ``width`` characters of ``text`` around the first word of ``query`` it contains."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    lowered = flat.lower()
    found = [lowered.find(word.lower()) for word in query.split()]
    start = min((index for index in found if index >= 0), default=0)
    begin = max(0, min(start - width // 3, len(flat) - width))
    clipped = flat[begin : begin + width]
    return ("…" if begin else "") + clipped + ("…" if begin + width < len(flat) else "")
