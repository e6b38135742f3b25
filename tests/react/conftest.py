"""Helpers for the engine's tests: build an executor on a scripted model, collect steps."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence

import pytest

from agents.react.executor import AgentConfig, AgentExecutor
from agents.react.prompt import PromptConfig
from agents.react.testing import ScriptedChatModel
from agents.react.types import FinalAnswerStep, ModelCallRecord, Step, ThoughtDelta
from chatsite.server.loop import process_loop


class Harness:
    """Runs an executor on a scripted model. With ``live=True`` it also takes thought deltas
    and answer resets; ``log`` then holds every callback and step in the order they came."""

    def __init__(self) -> None:
        self.deltas: list[str] = []
        self.thoughts: list[ThoughtDelta] = []
        self.resets = 0
        self.log: list[tuple[str, object]] = []

    def _answer_delta(self, text: str) -> None:
        self.deltas.append(text)
        self.log.append(("answer", text))

    def _thought_delta(self, delta: ThoughtDelta) -> None:
        self.thoughts.append(delta)
        self.log.append(("thought", delta))

    def _answer_reset(self) -> None:
        self.resets += 1
        self.deltas.clear()
        self.log.append(("reset", None))

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
        live: bool = False,
        **model_options,
    ) -> AgentExecutor:
        self.model = ScriptedChatModel(replies, **model_options)
        return AgentExecutor(
            model=self.model,
            tools=tools,
            prompt=PromptConfig(mode=mode, label_set=label_set),
            config=config or AgentConfig(),
            should_cancel=should_cancel,
            on_answer_delta=self._answer_delta if stream else None,
            on_thought_delta=self._thought_delta if live else None,
            on_answer_reset=self._answer_reset if live else None,
        )

    def run(self, replies: Sequence, tools: Sequence = (), *, question: str = "q", **options):
        executor = self.executor(replies, tools, **options)
        steps = []
        for step in executor.run(question):
            self.log.append(("step", step))
            steps.append(step)
        return steps

    def thought_text(self, call_index: int) -> str:
        """The concatenated thought deltas of one model call, checking their offsets."""
        text = ""
        for delta in self.thoughts:
            if delta.call_index == call_index:
                assert delta.offset == len(text), (delta, text)
                text += delta.text
        return text


@pytest.fixture
def harness() -> Harness:
    return Harness()


_run_in_this_thread = AgentExecutor.run


def _run_on_a_loop(self: AgentExecutor, question: str, **options) -> Iterator[Step]:
    """``run`` driven through ``arun`` step by step on the loop the worker drives runs on
    (where the model client's connections belong), so a test that stops early or
    expects an error midway sees what it would see from ``run``."""
    loop = process_loop()
    steps = self.arun(question, **options)
    try:
        while True:
            try:
                yield asyncio.run_coroutine_threadsafe(anext(steps), loop).result()
            except StopAsyncIteration:
                return
    finally:
        asyncio.run_coroutine_threadsafe(steps.aclose(), loop).result()


@pytest.fixture(autouse=True, params=["thread", "loop"])
def driver(request, monkeypatch) -> str:
    """Every engine test runs twice: ``run`` waiting in the test's thread, and ``arun``
    awaiting the same work on an event loop, as the worker drives runs."""
    if request.param == "loop":
        monkeypatch.setattr(AgentExecutor, "run", _run_on_a_loop)
    else:
        assert AgentExecutor.run is _run_in_this_thread
    return request.param


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
