"""A hundred turns through the real path: memory_for_run before each run, memory_after_run
after it, the summariser task run by Celery (eagerly) against the scripted model."""

from __future__ import annotations

import pytest

from agents.llm.tokens import count_message_tokens
from agents.memory.services import memory_after_run, memory_for_run
from agents.profile_snapshot import ProfileSnapshot
from agents.react.prompt import PromptConfig, react_messages, tools_messages
from tests.memory.conftest import append, assert_summaries_tile_the_history, filler

pytestmark = pytest.mark.django_db

BUDGET = 500
# What a prompt may carry beyond the budget: the summary's framing and per-message overhead.
SLACK = 40
FACTS = {
    2: "Please remember that my name is Ada Quintero.",
    5: "Remember that I am allergic to peanuts.",
    9: "Remember that the project deadline is 14 March.",
    14: "I live in Tromsø, remember that for the weather questions.",
}


def memory_tokens(mode: str, *, question: str, summary: str, history: list) -> int:
    """Tokens the memory adds to the first request of a run, as the engine renders it."""
    prompt = PromptConfig(mode=mode)
    render = react_messages if mode == "react" else tools_messages
    with_memory = render(prompt, tools=[], question=question, history=history,
                         memory_summary=summary)  # fmt: skip
    without = render(prompt, tools=[], question=question)
    return count_message_tokens(with_memory) - count_message_tokens(without)


def test_a_hundred_turns_stay_in_budget_and_keep_early_facts(
    conversation,
    memory_profile,
    eager_tasks,
    django_capture_on_commit_callbacks,
    scripted_server,
    summariser_name,
):
    conversation.profile = memory_profile(budget=BUDGET)
    conversation.save(update_fields=["profile"])
    snapshot = ProfileSnapshot.from_profile(conversation.profile)
    sizes = []

    for turn in range(1, 101):
        question = append(conversation, "user", FACTS.get(turn, filler(25)))
        context = memory_for_run(
            conversation=conversation,
            snapshot=snapshot,
            model_name=summariser_name,
            before_message=question,
        )
        as_messages = [{"role": "system", "content": context.summary}] if context.summary else []
        as_messages += context.history
        sizes.append(count_message_tokens(as_messages))
        for mode in ("react", "tools"):
            rendered = memory_tokens(
                mode,
                question=question.content,
                summary=context.summary,
                history=context.history,
            )
            assert rendered <= BUDGET + SLACK, (turn, mode, rendered)
        assert sizes[-1] <= BUDGET + SLACK, (turn, sizes[-1])

        append(conversation, "assistant", filler(30))
        with django_capture_on_commit_callbacks(execute=True):
            memory_after_run(conversation=conversation, snapshot=snapshot)

    # Memory was really used and really bounded: it grew to the budget and stayed there.
    assert max(sizes) > BUDGET // 2
    assert context.summary_id is not None
    for fact in FACTS.values():
        assert fact.split(", remember")[0] in context.summary
    rows = assert_summaries_tile_the_history(conversation)
    assert len(rows) > 5
    # The summariser counted every folded turn: proof each prompt carried the summary before.
    in_use = next(row for row in rows if row.pk == context.summary_id)
    folded_turns = conversation.messages.filter(
        role="user", id__lte=in_use.covers_through_id
    ).count()
    assert f"covered {folded_turns} turns" in context.summary
    assert len(scripted_server.requests(summariser_name)) == len(rows)
