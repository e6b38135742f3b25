"""``knowledge_search``: passages from the admin's documents, labelled so answers can cite them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agents.react.tools import ToolInputError
from agents.tools.base import ConfiguredTool

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "collection": {"type": "string", "minLength": 1, "maxLength": 50, "default": "default"},
        "max_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 4},
        "max_passage_chars": {"type": "integer", "minimum": 50, "maximum": 5000, "default": 1200},
    },
    "additionalProperties": False,
}


class KnowledgeSearch(ConfiguredTool):
    """Searches the documents of one knowledge collection."""

    read_only = True

    name = "knowledge_search"
    description = (
        "Searches the knowledge base and returns the most relevant passages, each labelled "
        "[Document title §section]. Cite those labels in your answer. Input: what to look for."
    )

    uses_database = True

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> dict[str, str]:
        if not re.fullmatch(r"[-a-zA-Z0-9_]+", config["collection"]):
            return {"collection": "use the collection's slug: letters, digits, - and _"}
        return {}

    def run(self, query: str) -> str:
        from agents.services.knowledge import knowledge_search

        if not query.strip():
            raise ToolInputError("give some words to search for")
        collection = self.config.get("collection", "default")
        hits = knowledge_search(
            collection=collection, query=query, limit=int(self.config.get("max_results", 4))
        )
        if not hits:
            return f"No passage in the knowledge base matches {query.strip()!r}."
        limit = int(self.config.get("max_passage_chars", 1200))
        return "\n\n".join(
            f"[{hit.title} §{hit.position}] {_clip(hit.text, limit)}" for hit in hits
        )


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
