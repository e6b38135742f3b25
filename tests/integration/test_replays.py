"""Replaying a stored run against another prompt version: a real worker drives both the
original and the replay, the model is the scripted server, the tool with a side effect is
the counting server (tests/counting_server.py)."""

from __future__ import annotations

import uuid

import pytest

from agents.comparison import run_steps_compared
from agents.llm.scripted import Reply
from agents.models import AgentRun, Conversation, Message, RunEvent, UsageEntry
from agents.runs.reads import run_log_steps
from agents.selectors import conversation_list
from agents.services.conversations import conversation_create, message_send
from agents.services.prompt_versions import prompt_version_ensure
from agents.services.replays import ReplayRefused, run_replay_start
from tests.counting_server import CountingServer

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FINAL = "Thought: That is done.\nFinal Answer: Ticket filed."


@pytest.fixture
def tickets():
    server = CountingServer()
    yield server
    server.close()


def _file(tool: str, input_text: str) -> Reply:
    return Reply(f"Thought: I will file it.\nAction: {tool}\nAction Input: {input_text}")


def _steps(run: AgentRun) -> list[tuple[str, str]]:
    shown = []
    for step in run_log_steps(run=run):
        if step.kind == "action":
            shown.append(("action", step.tool))
        elif step.kind in ("observation", "final_answer", "thought"):
            shown.append((step.kind, step.text))
        elif step.kind == "error":
            shown.append(("error", step.code))
    return shown


def _recorded(live_stack, user, tickets, *, tools=()):
    """A run that filed one ticket through the counting server, then answered."""
    model = f"replay-{uuid.uuid4().hex[:8]}"
    tool = f"file_ticket_{uuid.uuid4().hex[:6]}"
    tickets.tool(tool, needs_approval=False)
    profile = live_stack.profile(model, tools=(tool, "calculator", *tools))
    live_stack.model.script(model, [_file(tool, '{"title": "Broken printer"}'), Reply(FINAL)])
    conversation = conversation_create(owner=user, profile=profile)
    sent = message_send(conversation=conversation, user=user, content="File a ticket, please.")
    original = live_stack.wait_for_run(sent.run.pk)
    assert original.status == AgentRun.Status.SUCCEEDED
    assert tickets.calls == 1
    return model, tool, profile, conversation, original


def _second_version(profile):
    profile.system_prompt = "You are a terse ticket clerk. " + profile.system_prompt
    profile.save()
    return prompt_version_ensure(profile=profile)


def _log_of(conversation: Conversation):
    return (
        list(RunEvent.objects.filter(conversation=conversation).values_list("seq", "type")),
        list(Message.objects.filter(conversation=conversation).values_list("pk", "content")),
    )


def test_a_replay_answers_recorded_calls_from_the_record_and_is_kept_apart(
    live_stack, user, make_user, tickets
):
    staff = make_user("replaying-staff", is_staff=True)
    model, tool, profile, conversation, original = _recorded(live_stack, user, tickets)
    before = _log_of(conversation)
    original_row = AgentRun.objects.filter(pk=original.pk).values().get()
    version = _second_version(profile)
    assert version.pk != original.profile_version_id
    # The new version files the same ticket (its arguments written in another key order
    # and spacing), then the same ticket once more: only one call was recorded.
    live_stack.model.script(
        model,
        [
            _file(tool, '{ "title":"Broken printer" }'),
            _file(tool, '{"title": "Broken printer"}'),
            Reply("Thought: Filed twice.\nFinal Answer: Two tickets filed."),
        ],
    )

    replay = run_replay_start(run=original, user=staff, version=version)
    replay = live_stack.wait_for_run(replay.pk)

    assert replay.status == AgentRun.Status.SUCCEEDED, replay.error_message
    assert tickets.calls == 1  # the counting server saw nothing of the replay
    assert replay.profile_version_id == version.pk
    # The model was called for real, with the second version's prompt.
    requests = live_stack.model.requests(model)
    assert "terse ticket clerk" in requests[-1]["messages"][0]["content"]
    recorded = _steps(original)[2]
    assert recorded == ("observation", "HTTP 200 OK\n\nFiled ticket 1.")
    assert _steps(replay) == [
        ("thought", "I will file it."),
        ("action", tool),
        recorded,
        ("thought", "I will file it."),
        ("action", tool),
        ("error", "not_recorded"),
        ("observation", _steps(replay)[6][1]),
        ("thought", "Filed twice."),
        ("final_answer", "Two tickets filed."),
    ]
    assert "not recorded in the original run" in _steps(replay)[6][1]
    assert replay.prompt_tokens > 0
    assert replay.completion_tokens > 0

    # The diff: the first call and its observation are the same, the second call is new,
    # the answer changed.
    rows = run_steps_compared(original=original, replay=replay)
    assert [row.same for row in rows][:3] == [True, True, True]
    changed = [row for row in rows if not row.same]
    assert any(row.original is None and row.replay.kind == "action" for row in changed)
    answer = next(row for row in rows if row.replay and row.replay.kind == "final_answer")
    assert answer.original.text == "Ticket filed."
    assert [s.text for s in answer.replay_segments if s.op == "changed"] == ["Two tickets"]

    # The original run and the user's conversation are untouched.
    assert AgentRun.objects.filter(pk=original.pk).values().get() == original_row
    assert _log_of(conversation) == before
    assert list(conversation_list(user=user)) == [conversation]
    # The replay lives in a copy owned by the staff member, listed in no chat, and its
    # tokens are on the staff member's ledger, not the user's.
    assert replay.conversation.owner == staff
    assert replay.conversation.for_replay
    assert list(conversation_list(user=staff)) == []
    entry = UsageEntry.objects.get(run_id=replay.pk)
    assert entry.user_id == staff.pk
    assert entry.prompt_tokens == replay.prompt_tokens
    assert not UsageEntry.objects.filter(user=user, run_id=replay.pk).exists()


@pytest.mark.parametrize("unrecorded", list(AgentRun.Unrecorded))
def test_an_unrecorded_call_is_run_or_answered_by_the_setting(
    live_stack, user, make_user, tickets, unrecorded
):
    staff = make_user("replaying-staff", is_staff=True)
    model, tool, profile, _, original = _recorded(live_stack, user, tickets)
    live_stack.model.script(
        model,
        [
            Reply("Thought: Let me count.\nAction: calculator\nAction Input: 6*7"),
            # A call to the side-effect tool with other arguments: never recorded, never
            # read-only, so it is answered whatever the setting.
            _file(tool, '{"title": "Another printer"}'),
            Reply(FINAL),
        ],
    )

    replay = run_replay_start(
        run=original, user=staff, version=_second_version(profile), unrecorded=unrecorded
    )
    replay = live_stack.wait_for_run(replay.pk)

    assert replay.status == AgentRun.Status.SUCCEEDED, replay.error_message
    steps = _steps(replay)
    calculator = steps[2]
    if unrecorded == AgentRun.Unrecorded.RUN_READ_ONLY:
        assert calculator == ("observation", "42")  # the calculator only reads: it ran
    else:
        assert calculator == ("error", "not_recorded")
    assert ("error", "not_recorded") in steps[steps.index(("action", tool)) :]
    assert tickets.calls == 1


def test_a_tool_needing_approval_is_never_run_by_a_replay(live_stack, user, make_user, tickets):
    staff = make_user("replaying-staff", is_staff=True)
    guarded = f"guarded_{uuid.uuid4().hex[:6]}"
    tickets.tool(guarded, needs_approval=True)
    # Even marked read-only, a tool that needs approval is not run by a replay.
    from agents.models import ToolConfig

    ToolConfig.objects.filter(name=guarded).update(read_only=True)
    model, _, _, _, original = _recorded(live_stack, user, tickets, tools=(guarded,))
    live_stack.model.script(model, [_file(guarded, '{"title": "Urgent"}'), Reply(FINAL)])

    replay = run_replay_start(
        run=original,
        user=staff,
        version=original.profile_version,
        unrecorded=AgentRun.Unrecorded.RUN_READ_ONLY,
    )
    replay = live_stack.wait_for_run(replay.pk)

    # It did not wait for anyone: the call was answered, and the run went on to its end.
    assert replay.status == AgentRun.Status.SUCCEEDED
    assert not replay.approvals.exists()
    assert ("error", "not_recorded") in _steps(replay)
    assert tickets.calls == 1


def test_a_run_still_going_or_a_replay_cannot_be_replayed(live_stack, user, make_user, tickets):
    staff = make_user("replaying-staff", is_staff=True)
    model, _, _, _, original = _recorded(live_stack, user, tickets)
    live_stack.model.script(model, [Reply(FINAL)])
    replay = live_stack.wait_for_run(
        run_replay_start(run=original, user=staff, version=original.profile_version).pk
    )
    with pytest.raises(ReplayRefused):
        run_replay_start(run=replay, user=staff, version=original.profile_version)
    AgentRun.objects.filter(pk=original.pk).update(status=AgentRun.Status.RUNNING)
    original.refresh_from_db()
    with pytest.raises(ReplayRefused):
        run_replay_start(run=original, user=staff, version=original.profile_version)
    assert AgentRun.objects.filter(replay_of=original).count() == 1
