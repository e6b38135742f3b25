"""Turns, windows and cuts, without a database."""

from __future__ import annotations

import pytest

from agents.llm.tokens import count_tokens
from agents.memory.strategies import (
    SUMMARY_FRAMING_TOKENS,
    HistoryMessage,
    MemorySettings,
    choose_cut,
    clip_to_tokens,
    newest_within,
    select_summary_buffer,
    split_turns,
    summary_cost,
    window,
)


def history(*roles_and_texts: tuple[str, str]) -> list[HistoryMessage]:
    return [
        HistoryMessage(id=index, role=role, content=text)
        for index, (role, text) in enumerate(roles_and_texts, start=1)
    ]


def test_each_user_message_starts_a_turn_and_answers_stay_with_their_question():
    turns = split_turns(
        history(
            ("assistant", "Hello, how can I help?"),
            ("user", "q1"),
            ("assistant", "a1"),
            ("user", "q2 (its run failed: no answer)"),
            ("user", "q3"),
            ("assistant", "a3 part one"),
            ("assistant", "a3 regenerated"),
        )
    )
    assert [[m.id for m in turn.messages] for turn in turns] == [[1], [2, 3], [4], [5, 6, 7]]
    assert [turn.has_answer for turn in turns] == [True, True, False, True]


def test_window_keeps_the_last_k_turns():
    turns = split_turns(history(*[("user", f"q{i}") for i in range(5)]))
    assert [t.first_id for t in window(turns, 2)] == [4, 5]
    assert window(turns, 0) == []
    assert len(window(turns, 50)) == 5


def test_newest_within_stops_at_the_first_turn_that_does_not_fit():
    turns = split_turns(history(("user", "short"), ("user", "long " * 200), ("user", "short")))
    kept = newest_within(turns, turns[2].tokens + 10)
    assert [t.first_id for t in kept] == [3]


def test_a_cut_keeps_the_newest_turns_and_never_folds_a_turn_still_running():
    turns = split_turns(
        history(
            ("user", "q1"), ("assistant", "a1"),
            ("user", "q2"), ("assistant", "a2"),
            ("user", "q3"), ("assistant", "a3"),
        )
    )  # fmt: skip
    assert choose_cut(turns, keep_tokens=turns[2].tokens, last_turn_closed=True) == 2
    assert choose_cut(turns, keep_tokens=0, last_turn_closed=True, keep_at_least=0) == 3
    # The last turn's run is still answering: at most the two before it can be folded.
    assert choose_cut(turns, keep_tokens=0, last_turn_closed=False, keep_at_least=0) == 2
    # keep_at_least keeps a turn even when it alone is over the verbatim share.
    assert choose_cut(turns, keep_tokens=1, last_turn_closed=True, keep_at_least=1) == 2


def test_summary_buffer_leaves_out_the_oldest_unsummarised_turns_when_over_budget():
    turns = split_turns(history(*[("user", filler_text(i)) for i in range(10)]))
    budget = summary_cost("A summary.") + sum(t.tokens for t in turns[-3:])
    selection = select_summary_buffer(
        summary="A summary.", turns_after_summary=turns, budget=budget
    )
    assert [t.first_id for t in selection.turns] == [8, 9, 10]
    assert selection.trimmed_turns == 7


def test_a_summary_longer_than_the_budget_is_clipped_and_marked():
    long_summary = "The user likes tea. " * 500
    selection = select_summary_buffer(summary=long_summary, turns_after_summary=[], budget=100)
    assert selection.summary.startswith("The user likes tea.")
    assert selection.summary.endswith("[…]")
    assert count_tokens(selection.summary) + SUMMARY_FRAMING_TOKENS <= 100


def test_clip_leaves_short_text_alone():
    assert clip_to_tokens("short", 10) == "short"


def test_settings_come_from_the_snapshot_with_defaults_and_reject_unknown_strategies():
    assert MemorySettings.from_snapshot({}) == MemorySettings("summary_buffer", 6, 2000)
    assert MemorySettings.from_snapshot(
        {"memory_strategy": "window", "memory_window_turns": 2, "memory_token_budget": 300}
    ) == MemorySettings("window", 2, 300)
    with pytest.raises(ValueError, match="Unknown memory strategy 'everything'"):
        MemorySettings.from_snapshot({"memory_strategy": "everything"})


def filler_text(index: int) -> str:
    return f"question number {index} " + "detail " * 20
