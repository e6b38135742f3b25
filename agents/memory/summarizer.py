"""The progressive summary: the current summary plus new lines of conversation, folded by the
model into a new summary. The prompt is data (``templates/progressive_summary.txt``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path

from agents.llm.tokens import count_tokens
from agents.memory.strategies import HistoryMessage, clip_to_tokens
from agents.react.errors import ModelBadResponse
from agents.react.types import ChatMessage, ChatModel, Completion

TEMPLATE_PATH = Path(__file__).parent / "templates" / "progressive_summary.txt"
EMPTY_SUMMARY = "(nothing yet: these are the first lines of the conversation)"
ROLE_LABELS = {"user": "User", "assistant": "Assistant"}
# One very long message (a pasted document) must not crowd out the rest of the new lines.
MAX_LINE_TOKENS = 1500
# English runs at roughly three words for every four tokens.
WORDS_PER_TOKEN = 0.75


@cache
def summary_template() -> str:
    return TEMPLATE_PATH.read_text(encoding="utf-8")


def format_new_lines(messages: Sequence[HistoryMessage], *, model: str = "") -> str:
    lines = []
    for message in messages:
        label = ROLE_LABELS.get(message.role, message.role.title())
        text = clip_to_tokens(message.content.strip(), MAX_LINE_TOKENS, model)
        lines.append(f"{label}: {text}")
    return "\n".join(lines)


def summary_prompt(
    *,
    current_summary: str,
    new_lines: Sequence[HistoryMessage],
    target_tokens: int,
    model: str = "",
) -> list[ChatMessage]:
    """The messages that ask the model for the new summary."""
    text = summary_template().format(
        summary=current_summary.strip() or EMPTY_SUMMARY,
        new_lines=format_new_lines(new_lines, model=model),
        max_words=max(int(target_tokens * WORDS_PER_TOKEN), 20),
    )
    return [{"role": "user", "content": text}]


def write_summary(
    *,
    chat_model: ChatModel,
    current_summary: str,
    new_lines: Sequence[HistoryMessage],
    target_tokens: int,
) -> Completion:
    """Ask ``chat_model`` for the new summary: the model's reply, its text stripped (and the
    call's token counts, for the usage ledger). Model failures propagate as ``ModelError``."""
    model = getattr(chat_model, "model_name", "") or ""
    messages = summary_prompt(
        current_summary=current_summary,
        new_lines=new_lines,
        target_tokens=target_tokens,
        model=model,
    )
    completion = chat_model.complete(messages, temperature=0.0)
    text = completion.text.strip()
    if not text:
        raise ModelBadResponse("The model answered the summary request with empty text.")
    return replace(completion, text=text)


def summary_tokens(text: str, model: str = "") -> int:
    return count_tokens(text, model)
