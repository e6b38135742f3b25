"""Helpers for the engine's tests: build an executor on a scripted model, collect steps."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from agents.react.executor import AgentConfig, AgentExecutor
from agents.react.prompt import PromptConfig
from agents.react.testing import ScriptedChatModel
from agents.react.types import FinalAnswerStep, ModelCallRecord, Step


class Harness:
    def __init__(self) -> None:
        self.deltas: list[str] = []

    def executor(
        self,
        replies: Sequence,
        tools: Sequence = (),
        *,
        mode: str = "react",
        label_set: str = "en",
        config: AgentConfig | None = None,
        should_cancel=None,
        stream: bool = True,
        **model_options,
    ) -> AgentExecutor:
        self.model = ScriptedChatModel(replies, **model_options)
        extra = {"should_cancel": should_cancel} if should_cancel else {}
        return AgentExecutor(
            model=self.model,
            tools=tools,
            prompt=PromptConfig(mode=mode, label_set=label_set),
            config=config or AgentConfig(),
            on_answer_delta=self.deltas.append if stream else None,
            **extra,
        )

    def run(self, replies: Sequence, tools: Sequence = (), *, question: str = "q", **options):
        executor = self.executor(replies, tools, **options)
        return list(executor.run(question))


@pytest.fixture
def harness() -> Harness:
    return Harness()


def drain(steps: Iterator[Step], into: list[Step]) -> None:
    """Collect steps until the run ends or raises (the steps before the error stay)."""
    for step in steps:
        into.append(step)


def kinds(steps: Sequence[Step]) -> list[str]:
    return [step.kind for step in steps]


def without_records(steps: Sequence[Step]) -> list[Step]:
    return [step for step in steps if not isinstance(step, ModelCallRecord)]


def final(steps: Sequence[Step]) -> FinalAnswerStep:
    assert isinstance(steps[-1], FinalAnswerStep)
    assert sum(isinstance(step, FinalAnswerStep) for step in steps) == 1
    return steps[-1]
