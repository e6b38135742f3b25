"""A scripted summariser for tests and benchmarks: a policy for ``ScriptedServer``.

It reads the progressive-summary prompt the way a careful model would: it keeps every
sentence of the memory so far, adds each sentence of the new lines that states something to
remember, and keeps a running count of the turns it has folded. Facts therefore survive only
if the prompt really carries the previous summary forward, which is what the tests check.
"""

from __future__ import annotations

import re
from typing import Any

from agents.llm.scripted import Reply
from agents.memory.summarizer import EMPTY_SUMMARY

FACT_WORDS = ("remember", "my name is", "i live", "i prefer", "deadline", "allergic")
_COUNT_LINE = re.compile(r"^So far the conversation has covered (\d+) turns?\.$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _section(prompt: str, start: str, end: str) -> str:
    """The text between the last ``start`` heading and the ``end`` heading after it."""
    head = prompt.rfind(start)
    if head < 0:
        raise ValueError(f"the summary prompt has no {start!r} section")
    body = prompt[head + len(start) :]
    tail = body.find(end)
    return (body if tail < 0 else body[:tail]).strip()


def _is_fact(sentence: str) -> bool:
    lowered = sentence.lower()
    return any(word in lowered for word in FACT_WORDS)


def fold_summary(prompt: str) -> str:
    """The new summary for one progressive-summary prompt."""
    previous = _section(prompt, "Memory so far:", "New lines:")
    new_lines = _section(prompt, "New lines:", "Updated memory:")
    turns_before = 0
    kept: list[str] = []
    if previous != EMPTY_SUMMARY:
        for line in previous.splitlines():
            match = _COUNT_LINE.match(line.strip())
            if match:
                turns_before = int(match.group(1))
            elif line.strip():
                kept.append(line.strip())
    new_turns = 0
    for line in new_lines.splitlines():
        role, _, text = line.partition(": ")
        if role == "User":
            new_turns += 1
        if role not in ("User", "Assistant"):
            continue
        for sentence in _SENTENCE_END.split(text):
            if _is_fact(sentence):
                kept.append(f"{role}: {sentence.strip()}")
    kept.append(f"So far the conversation has covered {turns_before + new_turns} turns.")
    return "\n".join(kept)


def summariser_policy(body: dict[str, Any]) -> Reply:
    """``ScriptedServer.policy`` callable: answers a summary request with ``fold_summary``."""
    prompt = "\n".join(str(message.get("content") or "") for message in body["messages"])
    return Reply(fold_summary(prompt))
