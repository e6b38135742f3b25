""" "Retry from here": a finished run forked at one of its steps. A real worker drives both
runs, the model is the scripted server, the tool with a side effect the counting server
(tests/counting_server.py)."""

from __future__ import annotations

import uuid

import pytest

from agents.llm.scripted import Reply
from agents.models import AgentRun, Message, RunEvent
from agents.protocol import RefusalCode, RequestRefused
from agents.runs.reads import run_numbered_steps
from agents.services.conversations import conversation_create, message_send, run_fork
from tests.counting_server import CountingServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def tickets():
    server = CountingServer()
    yield server
    server.close()


def _file(tool: str, title: str) -> Reply:
    return Reply(
        f'Thought: I will file {title}.\nAction: {tool}\nAction Input: {{"title": "{title}"}}'
    )


def _shown(run: AgentRun) -> list[tuple[str, str]]:
    shown = []
    for _seq, step in run_numbered_steps(run=run):
        shown.append((step.kind, step.tool if step.kind == "action" else step.text))
    return shown


def _three_steps(live_stack, user, tickets):
    """A run of three steps: two tickets filed through the counting server, then the answer."""
    model = f"fork-{uuid.uuid4().hex[:8]}"
    tool = f"file_ticket_{uuid.uuid4().hex[:6]}"
    tickets.tool(tool, needs_approval=False)
    profile = live_stack.profile(model, tools=(tool,))
    live_stack.model.script(
        model,
        [
            _file(tool, "printer"),
            _file(tool, "scanner"),
            Reply("Thought: Both filed.\nFinal Answer: Two tickets filed."),
        ],
    )
    conversation = conversation_create(owner=user, profile=profile)
    sent = message_send(conversation=conversation, user=user, content="File two tickets.")
    original = live_stack.wait_for_run(sent.run.pk)
    assert original.status == AgentRun.Status.SUCCEEDED, original.error_message
    assert tickets.calls == 2
    return model, tool, conversation, original


def test_a_fork_reuses_the_steps_before_it_and_calls_the_model_from_there(
    live_stack, user, tickets
):
    model, tool, conversation, original = _three_steps(live_stack, user, tickets)
    numbered = run_numbered_steps(run=original)
    # The second step starts with its thought; forking at its action cuts at the thought.
    second_action = [seq for seq, step in numbered if step.kind == "action"][1]
    requests_before = len(live_stack.model.requests(model))
    live_stack.model.script(model, [Reply("Thought: One is enough.\nFinal Answer: One ticket.")])

    fork = run_fork(run=original, user=user, step_seq=second_action)
    fork = live_stack.wait_for_run(fork.pk)

    assert fork.status == AgentRun.Status.SUCCEEDED, fork.error_message
    assert fork.forked_from_id == original.pk
    assert tickets.calls == 2  # the reused first step's tool was not called again
    first_step = _shown(original)[:3]
    assert first_step == [
        ("thought", "I will file printer."),
        ("action", tool),
        ("observation", "HTTP 200 OK\n\nFiled ticket 1."),
    ]
    assert _shown(fork) == [*first_step, ("thought", "One is enough.")]
    # One model call, and it holds the reused step: its action and its observation.
    requests = live_stack.model.requests(model)[requests_before:]
    assert len(requests) == 1
    sent = "\n".join(str(message.get("content") or "") for message in requests[0]["messages"])
    assert "Filed ticket 1." in sent
    assert "I will file printer." in sent
    assert "scanner" not in sent
    assert fork.model_calls.count() == 1
    # A new branch: the fork's answer is a sibling of the original's, and the one shown.
    answers = Message.objects.filter(conversation=conversation, role=Message.Role.ASSISTANT)
    assert {answer.parent_id for answer in answers} == {original.trigger_message_id}
    assert [answer.content for answer in answers.order_by("id")] == [
        "Two tickets filed.",
        "One ticket.",
    ]
    conversation.refresh_from_db()
    assert conversation.active_leaf.content == "One ticket."


def test_a_fork_of_no_step_of_the_run_or_of_another_users_run_is_refused(
    live_stack, user, make_user, tickets
):
    _, _, conversation, original = _three_steps(live_stack, user, tickets)
    before = list(RunEvent.objects.filter(conversation=conversation).values_list("seq", "type"))
    runs = AgentRun.objects.count()
    finished = RunEvent.objects.get(run=original, type="run.finished").seq

    with pytest.raises(RequestRefused) as refused:
        run_fork(run=original, user=user, step_seq=finished)
    assert refused.value.code == RefusalCode.NOT_FORKABLE
    assert f"Step {finished} is not a step of run {original.pk}" in str(refused.value)

    other = make_user("someone-else")
    first = run_numbered_steps(run=original)[0][0]
    with pytest.raises(RequestRefused) as refused:
        run_fork(run=original, user=other, step_seq=first)
    assert refused.value.code == RefusalCode.NOT_FOUND

    assert AgentRun.objects.count() == runs
    assert (
        list(RunEvent.objects.filter(conversation=conversation).values_list("seq", "type"))
        == before
    )
