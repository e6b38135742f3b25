"""A tool call the engine stops waiting for is told so (``CallInterrupt``), so a tool that can
end its work early does, instead of running on to its own deadline."""

from __future__ import annotations

import pytest

from agents.react.errors import RunCancelled
from agents.react.testing import tool_calls
from agents.react.tools import CallInterrupt, current_interrupt, run_interruptibly
from agents.react.types import ErrorStep, ObservationStep
from tests.react.tools import Echo, Interruptible

WAIT = 30  # a ceiling for waits on threads, never a measurement


def test_a_callback_runs_once_when_interrupted():
    interrupt = CallInterrupt()
    told = []
    interrupt.on_interrupt(lambda: told.append("a"))
    assert not interrupt.interrupted
    interrupt.interrupt()
    interrupt.interrupt()
    assert told == ["a"]
    assert interrupt.interrupted


def test_a_callback_registered_after_the_interrupt_runs_at_once():
    interrupt = CallInterrupt()
    interrupt.interrupt()
    told = []
    interrupt.on_interrupt(lambda: told.append("late"))
    assert told == ["late"]


def test_a_forgotten_callback_is_not_called():
    interrupt = CallInterrupt()
    told = []
    forget = interrupt.on_interrupt(lambda: told.append("a"))
    forget()
    interrupt.interrupt()
    assert told == []


def test_current_interrupt_is_the_calls_inside_and_a_silent_one_outside():
    interrupt = CallInterrupt()
    assert run_interruptibly(interrupt, current_interrupt) is interrupt
    outside = current_interrupt()
    assert outside is not interrupt
    assert not outside.interrupted


def test_a_stop_while_waiting_for_a_tool_interrupts_the_call(harness):
    tool = Interruptible(timeout_seconds=3600)
    executor = harness.executor(
        ["Action: interruptible\nAction Input: a", "Final Answer: x"],
        [tool],
        should_cancel=tool.started.is_set,
        stream=False,
    )
    steps = []
    try:
        with pytest.raises(RunCancelled):
            steps.extend(executor.run("q"))
        assert tool.ended.wait(WAIT), "the tool was never told to stop"
    finally:
        tool.release.set()
    assert tool.interrupted.is_set()
    assert not any(isinstance(step, ObservationStep) for step in steps)
    assert len(harness.model.calls) == 1


def test_a_driver_that_gives_up_mid_batch_interrupts_the_calls_still_running(harness):
    # Native mode starts a batch's calls together and reports them in order: the driver
    # stops after the first observation (it could not store it) while the second still runs.
    tool = Interruptible(timeout_seconds=3600)
    reply = tool_calls(("echo", '{"text": "a"}'), ("interruptible", '{"text": "b"}'))
    executor = harness.executor([reply, "done"], [Echo(), tool], mode="tools", stream=False)
    steps = executor.run("q")
    try:
        for step in steps:
            if isinstance(step, ObservationStep):
                break
        assert tool.started.wait(WAIT)
        steps.close()
        assert tool.ended.wait(WAIT), "the call still running was never told"
    finally:
        tool.release.set()
    assert step.text == "echo: a"
    assert tool.interrupted.is_set()


def test_a_call_abandoned_at_its_timeout_is_interrupted(harness):
    tool = Interruptible(timeout_seconds=0.01)
    try:
        steps = harness.run(
            ["Action: interruptible\nAction Input: a", "Final Answer: gave up"], [tool]
        )
        assert tool.ended.wait(WAIT), "the tool was never told it timed out"
    finally:
        tool.release.set()
    assert tool.interrupted.is_set()
    assert any(isinstance(s, ErrorStep) and s.code == "tool_timeout" for s in steps)


def test_a_call_that_ended_by_itself_is_not_interrupted(harness):
    tool = Interruptible(timeout_seconds=3600)
    tool.release.set()
    steps = harness.run(
        [
            "Action: interruptible\nAction Input: a",
            "Action: echo\nAction Input: b",
            "Final Answer: ok",
        ],
        [tool, Echo()],
    )
    assert tool.ended.is_set()
    assert not tool.interrupted.is_set()
    observations = [s for s in steps if isinstance(s, ObservationStep)]
    assert observations[0].text == "done with a"


class CallIdReader(Echo):
    """A tool whose work must happen once per call keys it on the engine's id of the call."""

    def __init__(self) -> None:
        super().__init__()
        self.call_ids: list[str] = []

    def run(self, *, text: str) -> str:
        self.call_ids.append(current_interrupt().call_id)
        return super().run(text=text)


def test_a_tool_sees_the_engines_id_of_each_of_its_calls(harness):
    tool = CallIdReader()
    batch = tool_calls(("echo", '{"text": "a"}'), ("echo", '{"text": "b"}'))

    steps = harness.run([batch, "done"], [tool], mode="tools")

    actions = [step.call_id for step in steps if step.kind == "action"]
    assert actions == ["call-1", "call-2"]
    assert sorted(tool.call_ids) == actions  # the calls of a batch run side by side
