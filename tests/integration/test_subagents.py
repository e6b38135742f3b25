"""Sub-agents with the real worker, daphne and the scripted model: a parent's ``delegate``
call starts a child run of another profile, the parent pauses (``awaiting_subagent``, no
worker, no heartbeat) until the child ends, and reads its answer as the observation; one
child per call, across a crash; Stop ends both; the child's approval reaches the owner like
any other, however long it takes (docs/architecture.md, "Sub-agents")."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from agents.llm.scripted import Hang, Reply
from agents.models import AgentRun, Message, ToolApproval, ToolConfig
from agents.services.conversations import conversation_create
from tests.counting_server import CountingServer
from tests.faults.checks import assert_log_sound, model_name, wait_until
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

HOURS = 3600.0


def _delegate_tool(profile) -> str:
    """An enabled ``delegate`` tool that hands tasks to ``profile``; its name."""
    name = "delegate_to_" + re.sub(r"[^a-z0-9]", "_", profile.slug)[:50]
    ToolConfig.objects.create(
        name=name,
        kind="delegate",
        description=f"Hands a task to {profile.name}. Input: the task.",
        config={"profile": profile.slug},
    )
    return name


def _delegating(tool: str, task: str = "Find the answer") -> Reply:
    return Reply(f"Thought: I will ask the other agent.\nAction: {tool}\nAction Input: {task}")


def _pair(live_stack, parent_replies, child_replies, *, child_tools=(), **parent_fields):
    """A child profile scripted with ``child_replies``, a parent that may delegate to it
    scripted with ``parent_replies`` (a function of the tool's name)."""
    child_model, parent_model = model_name("child"), model_name("parent")
    child = live_stack.profile(child_model, tools=child_tools, max_execution_time=HOURS)
    tool = _delegate_tool(child)
    parent = live_stack.profile(
        parent_model, tools=(tool,), max_execution_time=HOURS, **parent_fields
    )
    live_stack.model.script(child_model, list(child_replies))
    live_stack.model.script(parent_model, list(parent_replies(tool)))
    return parent, parent_model, child_model


def _send(live_stack, user, profile, content: str = "Please delegate this."):
    conversation = conversation_create(owner=user, profile=profile)
    sock = live_stack.connect(conversation, user)
    sock.send({"type": "message.send", "content": content, "client_id": uuid.uuid4().hex})
    started = sock.receive_until(lambda frame: frame["type"] == "run.started")[-1]
    return conversation, sock, started["run_id"]


def _child_of(parent_id: int) -> AgentRun:
    wait_until(
        lambda: AgentRun.objects.filter(parent_run_id=parent_id).exists(), what="the child run"
    )
    return AgentRun.objects.get(parent_run_id=parent_id)


def _observations(run_id: int, conversation) -> list[dict]:
    events = assert_log_sound(conversation)
    return [
        e.payload for e in events if e.run_id == run_id and e.payload.get("kind") == "observation"
    ]


def test_the_parent_reads_the_childs_answer_as_its_observation(live_stack, user):
    parent, parent_model, child_model = _pair(
        live_stack,
        lambda tool: [_delegating(tool), Reply("Final Answer: The helper says 42.")],
        [Reply("Thought: I know this.\nFinal Answer: It is 42.")],
    )
    conversation, sock, parent_id = _send(live_stack, user, parent)
    frames = sock.receive_until(lambda f: run_ended(f) and f["run_id"] == parent_id)

    run = live_stack.wait_for_run(parent_id)
    child = AgentRun.objects.get(parent_run_id=parent_id)
    assert run.status == AgentRun.Status.SUCCEEDED
    assert child.status == AgentRun.Status.SUCCEEDED
    assert child.task == "Find the answer"
    assert child.depth == 1
    events = assert_log_sound(conversation)
    action = next(e for e in events if e.run_id == parent_id and e.payload.get("kind") == "action")
    assert child.parent_call_id == action.payload["call_id"]
    # The child's steps are its own, stored under its run with its parent named.
    started = next(e for e in events if e.run_id == child.pk and e.type == "run.started")
    assert started.payload["parent_run_id"] == parent_id
    assert started.payload["parent_call_id"] == child.parent_call_id
    own = [e for e in events if e.run_id == child.pk]
    assert [e.payload["kind"] for e in own if e.type == "step"] == ["thought"]
    assert own[-1].type == "run.finished"
    assert own[-1].payload["message"] is None
    assert own[-1].payload["answer"] == "It is 42."
    [observation] = _observations(parent_id, conversation)
    assert observation["text"] == "It is 42."
    assert not observation["is_error"]
    # The child asked its own model its task only, and wrote no message of the chat.
    [request] = live_stack.model.requests(child_model)
    assert "Please delegate this." not in str(request["messages"])
    assert "Find the answer" in str(request["messages"][-1])
    assert not Message.objects.filter(run=child).exists()
    conversation.refresh_from_db()
    assert conversation.active_leaf_id == run.answer.pk
    assert run.answer.content == "The helper says 42."
    # The socket saw the child's frames, each with the child's run id.
    assert any(f.get("run_id") == child.pk and f["type"] == "run.finished" for f in frames)
    assert len(live_stack.model.requests(parent_model)) == 2


def test_a_childs_steps_are_bounded_by_what_the_parent_has_left(live_stack, user):
    add = "Thought: Add.\nAction: calculator\nAction Input: 1+1"
    parent, _, child_model = _pair(
        live_stack,
        lambda tool: [_delegating(tool), Reply("Final Answer: done")],
        [Reply(add)] * 10,
        child_tools=("calculator",),
        max_iterations=3,
    )
    conversation, sock, parent_id = _send(live_stack, user, parent)
    sock.receive_until(lambda f: run_ended(f) and f["run_id"] == parent_id)

    child = AgentRun.objects.get(parent_run_id=parent_id)
    # The parent's limit is 3 and it had used one model call when it delegated.
    assert child.max_steps == 2
    assert child.status == AgentRun.Status.SUCCEEDED
    # Two iterations (two tool calls), then the engine's one last call for the answer.
    events = assert_log_sound(conversation)
    own = [e for e in events if e.run_id == child.pk]
    assert [e.payload["kind"] for e in own if e.type == "step"].count("action") == 2
    assert own[-1].payload["stop_reason"] == "max_iterations"
    assert len(live_stack.model.requests(child_model)) == 3
    assert live_stack.wait_for_run(parent_id).status == AgentRun.Status.SUCCEEDED


def test_a_child_at_the_depth_limit_gets_no_delegate_tools(live_stack, user):
    # A delegates to B, B to C; C (depth 2, the default limit) has a delegate tool to a
    # fourth profile in its profile, but not in its run.
    models = [model_name(f"depth{level}") for level in range(4)]
    profiles = [None] * 4
    profiles[3] = live_stack.profile(models[3], tools=(), max_execution_time=HOURS)
    for level in (2, 1, 0):
        tool = _delegate_tool(profiles[level + 1])
        profiles[level] = live_stack.profile(models[level], tools=(tool,), max_execution_time=HOURS)
        live_stack.model.script(
            models[level], [_delegating(tool, f"task {level}"), Reply(f"Final Answer: {level}")]
        )
    conversation, sock, top_id = _send(live_stack, user, profiles[0])
    sock.receive_until(lambda f: run_ended(f) and f["run_id"] == top_id)

    middle = AgentRun.objects.get(parent_run_id=top_id)
    deepest = AgentRun.objects.get(parent_run_id=middle.pk)
    assert (middle.depth, deepest.depth) == (1, 2)
    assert not AgentRun.objects.filter(parent_run_id=deepest.pk).exists()
    assert live_stack.model.requests(models[3]) == []
    # C's model was offered no tool, so its call named a tool it does not have.
    [observation] = _observations(deepest.pk, conversation)
    assert observation["is_error"]
    assert "tools" not in live_stack.model.requests(models[2])[0]
    assert live_stack.wait_for_run(top_id).status == AgentRun.Status.SUCCEEDED
    assert [o["text"] for o in _observations(middle.pk, conversation)] == ["2"]


def _waiting(parent_id: int) -> AgentRun:
    """The parent once it waits for its sub-agent: paused, holding no worker."""
    wait_until(
        lambda: AgentRun.objects.get(pk=parent_id).status == AgentRun.Status.AWAITING_SUBAGENT,
        what="the parent's pause",
    )
    return AgentRun.objects.get(pk=parent_id)


def test_stop_during_the_child_cancels_both(live_stack, user):
    parent, _, child_model = _pair(
        live_stack,
        lambda tool: [_delegating(tool), Reply("Final Answer: never")],
        [Hang(HOURS)],
    )
    conversation, sock, parent_id = _send(live_stack, user, parent)
    wait_until(lambda: len(live_stack.model.requests(child_model)) == 1, what="the child's call")
    child = _child_of(parent_id)
    waiting = _waiting(parent_id)
    assert (waiting.worker_id, waiting.heartbeat_at) == ("", None)

    sock.send({"type": "run.cancel", "run_id": parent_id})

    assert live_stack.wait_for_run(parent_id).status == AgentRun.Status.CANCELLED
    assert live_stack.wait_for_run(child.pk).status == AgentRun.Status.CANCELLED
    assert _observations(parent_id, conversation) == []
    assert len(live_stack.model.requests(child_model)) == 1


def test_the_owner_approves_the_childs_call_and_both_finish(live_stack, user):
    server = CountingServer()
    try:
        ticket = f"file_ticket_{uuid.uuid4().hex[:6]}"
        server.tool(ticket)
        file_it = f'Thought: File it.\nAction: {ticket}\nAction Input: {{"title": "child"}}'
        parent, _, _ = _pair(
            live_stack,
            lambda tool: [_delegating(tool), Reply("Final Answer: The ticket is filed.")],
            [Reply(file_it), Reply("Final Answer: Filed ticket 1.")],
            child_tools=(ticket,),
        )
        conversation, sock, parent_id = _send(live_stack, user, parent)
        frames = sock.receive_until(lambda f: f["type"] == "approval.requested")
        requested = frames[-1]
        child = _child_of(parent_id)
        assert requested["run_id"] == child.pk
        assert AgentRun.objects.get(pk=child.pk).status == AgentRun.Status.AWAITING_APPROVAL
        assert server.calls == 0
        # The parent waits paused, not running: no worker, no heartbeat, no thread.
        waiting = _waiting(parent_id)
        assert (waiting.worker_id, waiting.heartbeat_at) == ("", None)
        if not any(f["type"] == "run.waiting" for f in frames):  # it may come after
            frames += sock.receive_until(lambda f: f["type"] == "run.waiting")
        said = next(f for f in frames if f["type"] == "run.waiting")
        assert said["child_run_ids"] == [child.pk]
        assert said["call_ids"] == [child.parent_call_id]

        sock.send(
            {"type": "approval.decide", "approval_id": requested["approval_id"], "approve": True}
        )
        sock.receive_until(lambda f: run_ended(f) and f["run_id"] == parent_id)

        assert live_stack.wait_for_run(child.pk).status == AgentRun.Status.SUCCEEDED
        parent_run = live_stack.wait_for_run(parent_id)
        assert parent_run.status == AgentRun.Status.SUCCEEDED
        assert [o["text"] for o in _observations(parent_id, conversation)] == ["Filed ticket 1."]
        assert server.calls == 1
        # Resumed once, by the child's end: one attempt before the pause, one after.
        assert (parent_run.attempts, parent_run.resumes) == (2, 1)
        assert AgentRun.objects.filter(parent_run_id=parent_id).count() == 1
    finally:
        server.close()


def test_an_approval_decided_after_the_parents_hard_limit_still_finishes_both(
    live_stack, spawn_worker, user
):
    hard_limit = 3
    live_stack.worker.stop()  # only this test's worker takes runs; the next test restarts it
    spawn_worker(AGENT_RUN_HARD_LIMIT_SECONDS=str(hard_limit))
    server = CountingServer()
    try:
        ticket = f"file_ticket_{uuid.uuid4().hex[:6]}"
        server.tool(ticket)
        file_it = f'Thought: File it.\nAction: {ticket}\nAction Input: {{"title": "late"}}'
        parent, _, _ = _pair(
            live_stack,
            lambda tool: [_delegating(tool), Reply("Final Answer: Filed, late.")],
            [Reply(file_it), Reply("Final Answer: Filed ticket 7.")],
            child_tools=(ticket,),
        )
        conversation, sock, parent_id = _send(live_stack, user, parent)
        requested = sock.receive_until(lambda f: f["type"] == "approval.requested")[-1]
        _waiting(parent_id)
        asked_at = ToolApproval.objects.get(pk=requested["approval_id"]).requested_at
        # The owner decides only once a run held that long would have been failed.
        wait_until(
            lambda: timezone.now() - asked_at > timedelta(seconds=hard_limit + 1),
            what="the hard limit to pass",
        )
        assert AgentRun.objects.get(pk=parent_id).status == AgentRun.Status.AWAITING_SUBAGENT

        sock.send(
            {"type": "approval.decide", "approval_id": requested["approval_id"], "approve": True}
        )
        sock.receive_until(lambda f: run_ended(f) and f["run_id"] == parent_id)

        parent_run = live_stack.wait_for_run(parent_id)
        assert parent_run.status == AgentRun.Status.SUCCEEDED
        assert parent_run.answer.content == "Filed, late."
        assert [o["text"] for o in _observations(parent_id, conversation)] == ["Filed ticket 7."]
        assert server.calls == 1
    finally:
        server.close()


def test_stop_while_the_child_waits_for_approval_ends_both(live_stack, user):
    server = CountingServer()
    try:
        ticket = f"file_ticket_{uuid.uuid4().hex[:6]}"
        server.tool(ticket)
        file_it = f'Thought: File it.\nAction: {ticket}\nAction Input: {{"title": "no"}}'
        parent, _, _ = _pair(
            live_stack,
            lambda tool: [_delegating(tool), Reply("Final Answer: never")],
            [Reply(file_it), Reply("Final Answer: never")],
            child_tools=(ticket,),
        )
        conversation, sock, parent_id = _send(live_stack, user, parent)
        requested = sock.receive_until(lambda f: f["type"] == "approval.requested")[-1]
        _waiting(parent_id)

        sock.send({"type": "run.cancel", "run_id": parent_id})
        sock.receive_until(lambda f: f["type"] == "run.cancelled" and f["run_id"] == parent_id)

        assert live_stack.wait_for_run(parent_id).status == AgentRun.Status.CANCELLED
        assert live_stack.wait_for_run(requested["run_id"]).status == AgentRun.Status.CANCELLED
        approval = ToolApproval.objects.get(pk=requested["approval_id"])
        assert approval.decision == ToolApproval.Decision.CANCELLED
        assert server.calls == 0
        assert _observations(parent_id, conversation) == []
        assert AgentRun.objects.get(pk=parent_id).resumes == 0
    finally:
        server.close()


def test_a_worker_killed_during_the_child_resumes_both_without_a_second_child(live_stack, user):
    add = "Thought: Add.\nAction: calculator\nAction Input: 40+2"
    parent, parent_model, child_model = _pair(
        live_stack,
        lambda tool: [_delegating(tool), Reply("Final Answer: The helper says 42.")],
        [Reply(add), Hang(60), Reply("Final Answer: It is 42.")],
        child_tools=("calculator",),
    )
    conversation, _sock, parent_id = _send(live_stack, user, parent)
    wait_until(lambda: len(live_stack.model.requests(child_model)) >= 2, what="its 2nd call")
    _waiting(parent_id)
    live_stack.worker.kill()
    live_stack.worker.start()

    parent_run = live_stack.wait_for_run(parent_id, timeout=90)
    child = AgentRun.objects.get(parent_run_id=parent_id)
    assert parent_run.status == AgentRun.Status.SUCCEEDED
    assert child.status == AgentRun.Status.SUCCEEDED
    # The parent waited paused (no worker to lose) and was resumed once, by its child's end;
    # the child was picked up again after the crash.
    assert (parent_run.attempts, parent_run.resumes) == (2, 1)
    assert (child.attempts, child.resumes) == (2, 0)
    assert AgentRun.objects.filter(conversation=conversation).count() == 2
    assert [o["text"] for o in _observations(parent_id, conversation)] == ["It is 42."]
    assert [o["text"].strip() for o in _observations(child.pk, conversation)] == ["42"]
    assert len(live_stack.model.requests(parent_model)) == 2
    assert parent_run.answer.content == "The helper says 42."
