"""How much of a conversation's past goes into a prompt: pure functions over turns.

A turn is a user message and the assistant answer(s) to it. A run's tool calls and their
observations live inside the run, so they belong to the turn's answer and a cut made on turn
boundaries can never separate a call from its result. Nothing here touches the database:
``services.py`` loads the messages and stores the summaries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from agents.llm.tokens import (
    TOKENS_PER_MESSAGE,
    count_message_tokens,
    count_tokens,
    encoding_for,
)
from agents.react.types import ChatMessage

BUFFER = "buffer"
WINDOW = "window"
SUMMARY_BUFFER = "summary_buffer"
STRATEGIES = (BUFFER, WINDOW, SUMMARY_BUFFER)

DEFAULT_STRATEGY = SUMMARY_BUFFER
DEFAULT_WINDOW_TURNS = 6
DEFAULT_TOKEN_BUDGET = 2000

# After summarising, the summary and the turns kept verbatim each aim for this share of the
# budget, so several turns fit before the next summary is due.
SUMMARY_SHARE = 0.4
KEEP_VERBATIM_SHARE = 0.4
# The framing a summary costs once it is placed in a prompt (a message of its own or a
# labelled section of the system prompt): tests allow this much over the budget.
SUMMARY_FRAMING_TOKENS = TOKENS_PER_MESSAGE + 16
# Below this much room, a shortened copy of an oversized last turn is not worth sending.
MIN_CLIPPED_TURN_TOKENS = 64


@dataclass(frozen=True)
class MemorySettings:
    """The memory part of a profile snapshot, with the model's defaults for missing keys."""

    strategy: str = DEFAULT_STRATEGY
    window_turns: int = DEFAULT_WINDOW_TURNS
    token_budget: int = DEFAULT_TOKEN_BUDGET

    @classmethod
    def from_snapshot(cls, snapshot: dict | None) -> MemorySettings:
        snapshot = snapshot or {}
        strategy = snapshot.get("memory_strategy") or DEFAULT_STRATEGY
        if strategy not in STRATEGIES:
            raise ValueError(
                f"Unknown memory strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}."
            )
        window = snapshot.get("memory_window_turns")
        budget = snapshot.get("memory_token_budget")
        return cls(
            strategy=strategy,
            window_turns=max(int(DEFAULT_WINDOW_TURNS if window is None else window), 0),
            token_budget=max(int(DEFAULT_TOKEN_BUDGET if budget is None else budget), 1),
        )

    @property
    def summary_target_tokens(self) -> int:
        return max(int(self.token_budget * SUMMARY_SHARE), 32)

    @property
    def keep_verbatim_tokens(self) -> int:
        return int(self.token_budget * KEEP_VERBATIM_SHARE)


@dataclass(frozen=True)
class HistoryMessage:
    """A stored message as memory sees it."""

    id: int
    role: str
    content: str

    def as_chat(self) -> ChatMessage:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class ConversationTurn:
    """A user message and the answer(s) to it (the engine's ``Turn`` is one model reply)."""

    messages: tuple[HistoryMessage, ...]
    model: str = field(default="", compare=False)

    @property
    def first_id(self) -> int:
        return self.messages[0].id

    @property
    def has_answer(self) -> bool:
        return any(message.role == "assistant" for message in self.messages)

    @cached_property
    def tokens(self) -> int:
        """The turn's cost inside a prompt, without the reply priming counted once per prompt."""
        return count_message_tokens(self.as_chat(), self.model) - 2

    def as_chat(self) -> list[ChatMessage]:
        return [message.as_chat() for message in self.messages]


def split_turns(messages: Sequence[HistoryMessage], *, model: str = "") -> list[ConversationTurn]:
    """Group messages (in id order) into turns; each user message starts a new one."""
    turns: list[list[HistoryMessage]] = []
    for message in messages:
        if message.role == "user" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return [ConversationTurn(tuple(group), model) for group in turns]


def turns_to_messages(turns: Sequence[ConversationTurn]) -> list[ChatMessage]:
    return [chat for turn in turns for chat in turn.as_chat()]


def window(turns: Sequence[ConversationTurn], k: int) -> list[ConversationTurn]:
    """The last ``k`` turns."""
    return list(turns[-k:]) if k > 0 else []


def newest_within(turns: Sequence[ConversationTurn], budget: int) -> list[ConversationTurn]:
    """The longest run of newest turns whose tokens add up to at most ``budget``."""
    kept: list[ConversationTurn] = []
    used = 0
    for turn in reversed(turns):
        if used + turn.tokens > budget:
            break
        kept.append(turn)
        used += turn.tokens
    kept.reverse()
    return kept


def summary_cost(summary: str, model: str = "") -> int:
    return count_tokens(summary, model) + SUMMARY_FRAMING_TOKENS if summary else 0


def clip_to_tokens(text: str, limit: int, model: str = "") -> str:
    """``text`` cut to at most ``limit`` tokens, keeping its beginning, marked when cut."""
    if count_tokens(text, model) <= limit:
        return text
    marker = " […]"
    encoding = encoding_for(model)
    tokens = encoding.encode(text, disallowed_special=())
    keep = max(limit - count_tokens(marker, model), 0)
    return encoding.decode(tokens[:keep]) + marker


@dataclass(frozen=True)
class Selection:
    """What one prompt carries: the summary text in use and the verbatim turns after it."""

    summary: str
    turns: list[ConversationTurn]
    trimmed_turns: int = 0  # unsummarised turns left out to stay within the budget

    @property
    def history(self) -> list[ChatMessage]:
        return turns_to_messages(self.turns)


def select_summary_buffer(
    *, summary: str, turns_after_summary: Sequence[ConversationTurn], budget: int, model: str = ""
) -> Selection:
    """The summary plus as many of the newest turns as fit in ``budget`` with it.

    Normally everything after the summary's cut fits, because summarising keeps it short. When
    a summary is still pending (or failed) the oldest unsummarised turns are left out instead:
    a window bounded by tokens, so the prompt never grows without limit.
    """
    if summary_cost(summary, model) > budget:
        summary = clip_to_tokens(summary, max(budget - SUMMARY_FRAMING_TOKENS, 0), model)
    room = budget - summary_cost(summary, model)
    kept = newest_within(turns_after_summary, room)
    if not kept and turns_after_summary and room >= MIN_CLIPPED_TURN_TOKENS:
        # The last exchange alone is over the budget (a pasted document): a shortened copy
        # beats answering with no idea what was just said.
        kept = [clip_turn(turns_after_summary[-1], room, model)]
    return Selection(summary, kept, len(turns_after_summary) - len(kept))


def clip_turn(turn: ConversationTurn, budget: int, model: str = "") -> ConversationTurn:
    """``turn`` with each message's text cut to an equal share of ``budget``."""
    share = budget // len(turn.messages) - TOKENS_PER_MESSAGE
    clipped = tuple(
        HistoryMessage(m.id, m.role, clip_to_tokens(m.content, max(share, 0), model))
        for m in turn.messages
    )
    return ConversationTurn(clipped, model)


def unsummarised_tokens(
    *, summary: str, turns_after_summary: Sequence[ConversationTurn], model: str = ""
) -> int:
    """What the summary and every turn after it cost in a prompt, nothing left out."""
    return summary_cost(summary, model) + sum(turn.tokens for turn in turns_after_summary)


def needs_summary(
    *, summary: str, turns_after_summary: Sequence[ConversationTurn], budget: int, model: str = ""
) -> bool:
    """True when the summary and every turn after it no longer fit in the budget."""
    total = unsummarised_tokens(
        summary=summary, turns_after_summary=turns_after_summary, model=model
    )
    return total > budget


def choose_cut(
    turns_after_summary: Sequence[ConversationTurn],
    *,
    keep_tokens: int,
    last_turn_closed: bool,
    keep_at_least: int = 1,
) -> int:
    """How many of the oldest turns after the current cut to fold into the summary (0: none).

    The newest turns worth ``keep_tokens`` stay verbatim, and at least ``keep_at_least`` of
    them (0 means "summarise everything", for /compact). A last turn whose run is still going
    is never folded: its answer is not written yet.
    """
    foldable = list(turns_after_summary)
    if foldable and not last_turn_closed:
        foldable.pop()
    kept = newest_within(foldable, keep_tokens) if keep_tokens > 0 else []
    kept_count = max(len(kept), min(keep_at_least, len(foldable)))
    return len(foldable) - kept_count
