"""A tool that suspends the run (``SuspendRun``): its call gets no observation, the batch's
other calls end as usual, the engine raises ``RunSuspended``, and a run resumed from the
stored steps calls that tool again with the same call id, in ``run`` and ``arun`` alike."""

from __future__ import annotations

import asyncio

import pytest

from agents.react.errors import RunSuspended
from agents.react.executor import AgentConfig, AgentExecutor
from agents.react.prompt import PromptConfig
from agents.react.testing import ScriptedChatModel, tool_calls
from agents.react.tools import SuspendRun, Tool, current_interrupt
from agents.react.types import ActionStep, ObservationStep
from tests.react.conftest import final
from tests.react.test_pauses import stored
from tests.react.tools import Adder

ASK = "Thought: ask the other one\nAction: waiter\nAction Input: the task"


class Waiter(Tool):
    """Answers only once ``ready`` is set; until then it suspends the run."""

    name = "waiter"
    description = "Waits for an answer from elsewhere."

    def __init__(self, *, ready: bool = False) -> None:
        self.ready = ready
        self.call_ids: list[str] = []

    def run(self, *, text: str) -> str:
        self.call_ids.append(current_interrupt().call_id)
        if not self.ready:
            raise SuspendRun()
        return f"answer to {text}"


def executor(model, tools, *, mode="react"):
    return AgentExecutor(
        model=model, tools=tools, prompt=PromptConfig(mode=mode), config=AgentConfig()
    )


def run_until_suspended(engine, *, prior=()):
    """The steps up to the suspension, and the suspension."""
    steps = []
    generator = engine.run("q", prior_steps=prior)
    while True:
        try:
            steps.append(next(generator))
        except RunSuspended as suspended:
            return steps, suspended
        except StopIteration:
            pytest.fail(f"the run ended without suspending: {steps[-1]}")


def test_a_suspended_call_has_no_observation_and_ends_the_run_with_its_id():
    waiter = Waiter()
    steps, suspended = run_until_suspended(executor(ScriptedChatModel([ASK]), [waiter]))

    assert suspended.call_ids == ["call-1"]
    assert suspended.code == "suspended"
    assert isinstance(steps[-1], ActionStep)
    assert not any(isinstance(step, ObservationStep) for step in steps)
    assert waiter.call_ids == ["call-1"]


def test_a_resumed_run_calls_the_tool_again_with_the_same_id_and_goes_on():
    first, _ = run_until_suspended(executor(ScriptedChatModel([ASK]), [Waiter()]))
    waiter = Waiter(ready=True)
    model = ScriptedChatModel(["Final Answer: done"])

    resumed = list(executor(model, [waiter]).run("q", prior_steps=stored(first)))

    assert waiter.call_ids == ["call-1"]
    [observation] = [step for step in resumed if isinstance(step, ObservationStep)]
    assert (observation.call_id, observation.text) == ("call-1", "answer to the task")
    assert final(resumed).text == "done"
    # The model was asked once more, after the observation, not again for the same call.
    assert len(model.calls) == 1
    assert "answer to the task" in model.calls[0].last_content


def test_a_run_resumed_too_early_suspends_again_without_a_new_model_call():
    first, _ = run_until_suspended(executor(ScriptedChatModel([ASK]), [Waiter()]))
    model = ScriptedChatModel([])

    again, suspended = run_until_suspended(executor(model, [Waiter()]), prior=stored(first))

    assert again == []
    assert suspended.call_ids == ["call-1"]
    assert model.calls == []


def test_the_other_calls_of_a_batch_end_and_keep_their_observations():
    adder, waiter = Adder(), Waiter()
    batch = tool_calls(("waiter", '{"text": "t"}'), ("adder", '{"a": 2, "b": 3}'))
    steps, suspended = run_until_suspended(
        executor(ScriptedChatModel([batch]), [waiter, adder], mode="tools")
    )

    assert suspended.call_ids == ["call-1"]
    assert adder.calls == [(2, 3)]
    observed = [(s.call_id, s.text) for s in steps if isinstance(s, ObservationStep)]
    assert observed == [("call-2", "5")]

    # Resumed, only the suspended call runs; the adder is not called twice.
    adder_again, ready = Adder(), Waiter(ready=True)
    model = ScriptedChatModel(["The sum is 5."])
    resumed = list(
        executor(model, [ready, adder_again], mode="tools").run("q", prior_steps=stored(steps))
    )
    assert adder_again.calls == []
    assert ready.call_ids == ["call-1"]
    assert final(resumed).text == "The sum is 5."


def test_arun_suspends_as_run_does():
    async def drive() -> tuple[list, RunSuspended | None]:
        steps = []
        engine = executor(ScriptedChatModel([ASK]), [Waiter()])
        try:
            async for step in engine.arun("q"):
                steps.append(step)
        except RunSuspended as suspended:
            return steps, suspended
        return steps, None

    steps, suspended = asyncio.run(drive())
    assert suspended is not None
    assert suspended.call_ids == ["call-1"]
    assert not any(isinstance(step, ObservationStep) for step in steps)
