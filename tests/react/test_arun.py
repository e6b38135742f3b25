"""``AgentExecutor.arun``: many runs on one event loop, and ``interrupt`` ending what a run
waits on at once. (Every other engine test also runs through ``arun``: tests/react/conftest.py.)
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from agents.react.errors import RunCancelled
from agents.react.executor import AgentExecutor
from agents.react.prompt import PromptConfig
from agents.react.tools import Tool
from agents.react.types import ChatMessage, Completion, FinalAnswerStep
from tests.react.tools import Interruptible

WAIT = 30  # a ceiling for waits, never a measurement


@pytest.fixture
def driver() -> str:
    """These tests drive ``arun`` themselves: one run each, not one per driver."""
    return "loop"


class AwaitedModel:
    """A model with ``acomplete`` only: each call waits for ``release`` (or for ever), and
    records the thread it ran on and whether it was cancelled."""

    model_name = "awaited"

    def __init__(self, reply: str = "Final Answer: done") -> None:
        self.reply = reply
        self.release: asyncio.Event | None = None
        self.started = threading.Event()
        self.in_flight = 0
        self.most_in_flight = 0
        self.threads: set[int] = set()
        self.cancelled = 0
        self.calls = 0

    def complete(self, *args, **kwargs) -> Completion:
        raise AssertionError("arun awaits acomplete; it never blocks a thread on complete")

    async def acomplete(self, messages: list[ChatMessage], **options) -> Completion:
        self.calls += 1
        self.threads.add(threading.get_ident())
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.started.set()
        try:
            if self.release is None:
                await asyncio.Event().wait()  # never set: only a cancel ends it
            else:
                await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1
        return Completion(text=self.reply)


async def _until(condition) -> None:
    async with asyncio.timeout(WAIT):
        while not condition():
            await asyncio.sleep(0.001)


def _executor(model, tools=(), should_cancel=None) -> AgentExecutor:
    return AgentExecutor(
        model=model, tools=tools, prompt=PromptConfig(mode="react"), should_cancel=should_cancel
    )


async def _collect(executor: AgentExecutor, interrupt: asyncio.Event | None = None) -> list:
    return [step async for step in executor.arun("q", interrupt=interrupt)]


def test_many_runs_share_one_loop_and_wait_together():
    model = AwaitedModel()
    runs = 50

    async def main():
        model.release = asyncio.Event()
        tasks = [asyncio.ensure_future(_collect(_executor(model))) for _ in range(runs)]
        await _until(lambda: model.in_flight == runs)  # every run waits on its call at once
        model.release.set()
        return await asyncio.wait_for(asyncio.gather(*tasks), WAIT), threading.get_ident()

    results, loop_thread = asyncio.run(main())
    assert model.most_in_flight == runs
    assert model.threads == {loop_thread}
    for steps in results:
        assert isinstance(steps[-1], FinalAnswerStep)
        assert steps[-1].text == "done"


def test_an_interrupt_ends_the_model_call_in_flight():
    model = AwaitedModel()
    cancel = threading.Event()

    async def main():
        interrupt = asyncio.Event()
        run = asyncio.ensure_future(
            _collect(_executor(model, should_cancel=cancel.is_set), interrupt)
        )
        await _until(model.started.is_set)
        cancel.set()
        interrupt.set()
        await asyncio.wait_for(run, WAIT)

    with pytest.raises(RunCancelled):
        asyncio.run(main())
    assert model.cancelled == 1  # the call itself was cancelled (its stream closed), not left


def test_a_run_interrupted_before_its_call_never_makes_it():
    model = AwaitedModel()

    async def main():
        interrupt = asyncio.Event()
        interrupt.set()
        await asyncio.wait_for(_collect(_executor(model), interrupt), WAIT)

    with pytest.raises(RunCancelled):
        asyncio.run(main())
    assert model.calls == 0


def test_an_interrupt_ends_the_wait_for_a_tool_and_tells_the_tool():
    tool = Interruptible()
    model = AwaitedModel(reply="Thought: wait\nAction: interruptible\nAction Input: now")
    cancel = threading.Event()

    async def main():
        model.release = asyncio.Event()
        model.release.set()
        interrupt = asyncio.Event()
        executor = _executor(model, tools=[tool], should_cancel=cancel.is_set)
        run = asyncio.ensure_future(_collect(executor, interrupt))
        await _until(tool.started.is_set)
        cancel.set()
        interrupt.set()
        await asyncio.wait_for(run, WAIT)

    with pytest.raises(RunCancelled):
        asyncio.run(main())
    assert tool.interrupted.wait(WAIT)


def test_a_tool_that_ends_wakes_its_run_without_waiting_for_the_next_poll():
    """The tool's thread wakes the awaiting run through the loop; the run then goes on."""
    tool = Interruptible()
    replies = iter(["Thought: wait\nAction: interruptible\nAction Input: now", "Final Answer: ok"])

    class Scripted(AwaitedModel):
        async def acomplete(self, messages, **options):
            self.calls += 1
            return Completion(text=next(replies))

    async def main():
        run = asyncio.ensure_future(_collect(_executor(Scripted(), tools=[tool])))
        await _until(tool.started.is_set)
        tool.release.set()
        return await asyncio.wait_for(run, WAIT)

    steps = asyncio.run(main())
    observations = [step for step in steps if step.kind == "observation"]
    assert len(observations) == 1
    assert not observations[0].is_error
    assert steps[-1].text == "ok"


class _WhereItRan(Tool):
    """Records the thread each call ran on."""

    description = "Says where it ran."

    def __init__(self, name: str, *, inline: bool) -> None:
        self.name = name
        self.runs_inline = inline
        self.threads: list[int] = []

    def run(self, *, text: str) -> str:
        self.threads.append(threading.get_ident())
        return "ran"


@pytest.mark.parametrize("inline", [True, False])
def test_a_tool_that_runs_inline_runs_on_the_loop_and_others_on_a_tool_thread(inline):
    tool = _WhereItRan("where", inline=inline)
    replies = iter(["Thought: go\nAction: where\nAction Input: now", "Final Answer: ok"])

    class Scripted(AwaitedModel):
        async def acomplete(self, messages, **options):
            return Completion(text=next(replies))

    async def main():
        steps = await asyncio.wait_for(_collect(_executor(Scripted(), tools=[tool])), WAIT)
        return steps, threading.get_ident()

    steps, loop_thread = asyncio.run(main())
    assert [step.text for step in steps if step.kind == "observation"] == ["ran"]
    assert steps[-1].text == "ok"
    assert len(tool.threads) == 1
    assert (tool.threads[0] == loop_thread) is inline
