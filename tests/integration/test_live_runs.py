"""Whole runs through real processes: browser socket → daphne → services → Redis → celery
worker → scripted model → database → channel layer → every socket on the conversation.

Only the model is scripted (tests/processes.py starts the rest). Each test uses its own model
name, so the scripted server keeps their replies apart.
"""

from __future__ import annotations

import json
import uuid

import pytest

from agents import protocol
from agents.llm.scripted import Gate, Hang, Reply
from agents.models import AgentRun, Message
from agents.selectors import events_after
from agents.services.conversations import conversation_create
from tests.faults.checks import kill_while_waiting_on_the_model
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ACTION = Reply("Thought: I should multiply.\nAction: calculator\nAction Input: 6*7")
ANSWER = "Six times seven is **42**."
FINAL = f"Thought: The calculator says 42.\nFinal Answer: {ANSWER}"


def _model_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _conversation(live_stack, user, model_name: str, *replies: Reply):
    live_stack.model.script(model_name, list(replies))
    return conversation_create(owner=user, profile=live_stack.profile(model_name))


def _send(sock, content: str = "What is 6 times 7?") -> str:
    client_id = uuid.uuid4().hex
    sock.send({"type": "message.send", "content": content, "client_id": client_id})
    return client_id


def _stored(frames: list[dict]) -> list[dict]:
    return [frame for frame in frames if "seq" in frame]


def _seqs(frames: list[dict]) -> list[int]:
    return [frame["seq"] for frame in _stored(frames)]


def _step_kinds(frames: list[dict]) -> list[str]:
    return [frame["kind"] for frame in frames if frame["type"] == "step"]


def test_a_full_run_over_a_real_websocket(live_stack, user):
    model = _model_name("full")
    conversation = _conversation(live_stack, user, model, ACTION, Reply(FINAL))
    sock = live_stack.connect(conversation, user)

    client_id = _send(sock)
    frames = sock.receive_until(run_ended)

    stored = _stored(frames)
    assert _seqs(frames) == list(range(1, len(stored) + 1))
    assert stored[0]["type"] == "message.created"
    assert stored[0]["message"]["client_id"] == client_id
    assert stored[1]["type"] == "run.started"
    assert stored[1]["attempt"] == 1
    kinds = _step_kinds(stored)
    assert kinds[:3] == ["thought", "action", "observation"]
    assert set(kinds[3:]) <= {"thought"}
    action = next(f for f in stored if f.get("kind") == "action")
    observation = next(f for f in stored if f.get("kind") == "observation")
    assert action["tool"] == "calculator"
    assert observation["tool"] == "calculator"
    assert observation["text"].strip() == "42"
    assert not observation["is_error"]
    finished = stored[-1]
    assert finished["type"] == "run.finished"
    assert finished["message"]["content"] == ANSWER
    assert "<strong>42</strong>" in finished["message"]["html"]
    assert finished["usage"]["prompt_tokens"] > 0
    assert {frame["run_id"] for frame in stored} == {stored[0]["run_id"]}
    # What went over the socket is exactly what a fresh read of the log gives.
    assert stored == [
        protocol.event_frame(e) for e in events_after(conversation=conversation, after_seq=0)
    ]
    # The streamed answer adds up to the stored one.
    deltas = "".join(f["text"] for f in frames if f["type"] == "answer.delta")
    assert ANSWER.startswith(deltas)
    run = AgentRun.objects.get(pk=stored[0]["run_id"])
    assert run.status == AgentRun.Status.SUCCEEDED
    assert run.model_calls.count() == 2
    assert Message.objects.get(run=run).content == ANSWER


def test_reconnecting_mid_run_with_after_seq_gets_every_event_once(live_stack, user):
    model = _model_name("reconnect")
    answer = Gate()
    conversation = _conversation(live_stack, user, model, ACTION, answer.hold(Reply(FINAL)))
    first = live_stack.connect(conversation, user)
    _send(first)
    before = first.receive_until(lambda f: f.get("kind") == "observation")
    first.close()

    answer.wait_arrived()
    second = live_stack.connect(conversation, user, after_seq=before[-1]["seq"])
    assert not AgentRun.objects.get(conversation=conversation).is_terminal
    answer.open()
    after = second.receive_until(run_ended)

    seqs = _seqs(before) + _seqs(after)
    assert seqs == list(range(1, len(seqs) + 1))
    assert after[-1]["type"] == "run.finished"
    conversation.refresh_from_db()
    assert seqs[-1] == conversation.last_seq


def test_two_tabs_see_the_same_events(live_stack, user):
    model = _model_name("tabs")
    conversation = _conversation(live_stack, user, model, ACTION, Reply(FINAL))
    tab_a = live_stack.connect(conversation, user)
    tab_b = live_stack.connect(conversation, user)

    _send(tab_a)
    seen_a = _stored(tab_a.receive_until(run_ended))
    seen_b = _stored(tab_b.receive_until(run_ended))

    assert seen_a == seen_b
    assert _seqs(seen_a) == list(range(1, len(seen_a) + 1))


def test_a_killed_worker_does_not_repeat_a_tool_or_a_seq(live_stack, user):
    model = _model_name("killed")
    # The second reply never comes: the worker dies waiting for it.
    conversation = _conversation(live_stack, user, model, ACTION, Hang(), Reply(FINAL))
    sock = live_stack.connect(conversation, user)
    _send(sock)

    kill_while_waiting_on_the_model(live_stack.worker, live_stack.model, model, calls=2)
    run = AgentRun.objects.get(conversation=conversation)
    ended = live_stack.wait_for_run(run.pk)
    frames = sock.receive_until(run_ended)

    assert ended.status == AgentRun.Status.SUCCEEDED
    assert ended.attempts == 2
    stored = list(events_after(conversation=conversation, after_seq=0))
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert [e.payload.get("kind") for e in stored if e.type == "step"].count("action") == 1
    assert [e.payload.get("kind") for e in stored if e.type == "step"].count("observation") == 1
    assert [e.payload["attempt"] for e in stored if e.type == "run.started"] == [1, 2]
    # The model was asked once for the action and never again: the resumed attempt went on
    # from the stored observation.
    requests = live_stack.model.requests(model)
    assert len(requests) == 3
    assert "42" in json.dumps(requests[2]["messages"])
    assert ended.answer.content == ANSWER
    # The socket saw the whole log once, in order, across the crash.
    assert _seqs(frames) == [e.seq for e in stored]


def test_cancelling_mid_run_keeps_the_partial_answer(live_stack, user):
    model = _model_name("cancel")
    long_answer = " ".join(f"word{i}" for i in range(400))
    slow_final = Reply(
        f"Thought: I will answer at length.\nFinal Answer: {long_answer}",
        chunk_size=6,
        chunk_interval=0.05,
    )
    conversation = _conversation(live_stack, user, model, ACTION, slow_final)
    sock = live_stack.connect(conversation, user)
    _send(sock)
    first_delta = sock.receive_until(lambda f: f["type"] == "answer.delta")[-1]

    sock.send({"type": "run.cancel", "run_id": first_delta["run_id"]})
    frames = sock.receive_until(run_ended)

    cancelled = frames[-1]
    assert cancelled["type"] == "run.cancelled"
    partial = cancelled["partial_answer"]
    assert partial
    assert long_answer.startswith(partial)
    assert partial != long_answer
    run = live_stack.wait_for_run(first_delta["run_id"])
    assert run.status == AgentRun.Status.CANCELLED
    assert run.answer.content == partial
    assert len(live_stack.model.requests(model)) == 2


def test_any_daphne_delivers_runs_from_any_worker(live_stack, user, spawn_daphne, spawn_worker):
    daphne_b = spawn_daphne()
    worker_b = spawn_worker()
    daphnes = [live_stack.daphne, daphne_b]
    runs = []
    for i in range(6):
        model = _model_name(f"multi{i}")
        conversation = _conversation(live_stack, user, model, ACTION, Reply(FINAL))
        sockets = [live_stack.connect(conversation, user, daphne=d) for d in daphnes]
        _send(sockets[i % 2])
        seen = [_stored(sock.receive_until(run_ended)) for sock in sockets]
        assert seen[0] == seen[1]
        assert _seqs(seen[0]) == list(range(1, len(seen[0]) + 1))
        assert seen[0][-1]["type"] == "run.finished"
        runs.append(AgentRun.objects.get(pk=seen[0][0]["run_id"]))

    worker_pids = {int(run.worker_id.rsplit(":", 1)[1]) for run in runs}
    assert worker_pids == {live_stack.worker.pid, worker_b.pid}
