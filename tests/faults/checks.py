"""What every fault test proves at its end: the log is whole and every run ended visibly.

- ``seq`` runs 1..N with no gap or repeat, and the conversation's ``last_seq`` is N;
- every run ended (succeeded, failed or cancelled), none is left ``running`` or ``queued``;
- a failed run carries an error code and message, and its last event says so;
- each run has exactly one terminal event, and it is the run's last;
- the steps follow the ReAct order: every action is answered by exactly one observation
  before the next action, so a resumed attempt neither lost nor repeated one.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator

from agents.models import AgentRun, Conversation, RunEvent

TERMINAL_TYPES = ("run.finished", "run.failed", "run.cancelled")
ENDED = (AgentRun.Status.SUCCEEDED, AgentRun.Status.FAILED, AgentRun.Status.CANCELLED)

ACTION = "Thought: I should multiply.\nAction: calculator\nAction Input: 6*7"
FINAL = "Thought: The calculator says 42.\nFinal Answer: It is 42."


def model_name(prefix: str) -> str:
    return f"fault-{prefix}-{uuid.uuid4().hex[:8]}"


def wait_until(condition: Callable[[], object], *, timeout: float = 30.0, what: str = "") -> None:
    """Poll ``condition`` until true; a ceiling for a hung test, not a measured time."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what or condition}")
        time.sleep(0.05)


def kill_while_waiting_on_the_model(worker, scripted, model: str, *, calls: int) -> None:
    """Once ``model`` has had ``calls`` requests, SIGKILL ``worker`` and start it again."""
    wait_until(lambda: len(scripted.requests(model)) >= calls, what=f"model call {calls}")
    worker.kill()
    worker.start()


def assert_log_sound(conversation: Conversation) -> list[RunEvent]:
    """The checks in the module docstring; returns the conversation's events in order."""
    events = list(RunEvent.objects.filter(conversation=conversation).order_by("seq"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    conversation.refresh_from_db()
    assert conversation.last_seq == len(events)

    runs = list(AgentRun.objects.filter(conversation=conversation).order_by("pk"))
    assert runs, "the conversation has no run"
    for run in runs:
        assert run.status in ENDED, f"run {run.pk} left {run.status}"
        own = [e for e in events if e.run_id == run.pk]
        terminal = [e for e in own if e.type in TERMINAL_TYPES]
        assert len(terminal) == 1, [e.type for e in own]
        assert terminal[0] is own[-1]
        if run.status == AgentRun.Status.FAILED:
            assert run.error_code
            assert run.error_message
            assert terminal[0].type == "run.failed"
            assert terminal[0].payload["code"] == run.error_code
        steps = [e.payload for e in own if e.type == "step"]
        assert_steps_in_order(steps)
    return events


def assert_steps_in_order(steps: list[dict]) -> None:
    waiting_for_observation = False
    for step in steps:
        kind = step["kind"]
        if kind == "action":
            assert not waiting_for_observation, "an action without its observation"
            waiting_for_observation = True
        elif kind == "observation":
            assert waiting_for_observation, "an observation nobody asked for (a repeated tool)"
            waiting_for_observation = False
    assert not waiting_for_observation or steps[-1]["kind"] == "action"


def step_kinds(events: list[RunEvent]) -> list[str]:
    return [e.payload["kind"] for e in events if e.type == "step"]


def stored(frames: list[dict]) -> list[dict]:
    return [frame for frame in frames if "seq" in frame]


@contextlib.contextmanager
def supervised(process) -> Iterator[None]:
    """Restart ``process`` whenever it exits, as systemd's ``Restart=always`` would."""
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.2):
            if not process.alive:
                process.start()

    watcher = threading.Thread(target=watch, name="test-supervisor", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(timeout=90)
