"""A websocket cut mid-stream without a closing handshake (a phone going into a tunnel),
twice in one run: reconnecting with ``after_seq`` gives every stored event exactly once."""

from __future__ import annotations

import socket
import uuid

import pytest

from agents.llm.scripted import Gate, Reply
from agents.services.conversations import conversation_create
from tests.faults.checks import ACTION, assert_log_sound, model_name, stored
from tests.processes import run_ended

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LONG_ANSWER = " ".join(f"word{i}" for i in range(120))


def _cut(sock) -> None:
    """Drop the TCP connection under the websocket: no close frame is sent."""
    sock.ws.socket.shutdown(socket.SHUT_RDWR)
    sock.ws.socket.close()


def test_a_socket_cut_twice_mid_run_misses_and_repeats_nothing(live_stack, user):
    model = model_name("drop")
    answer = Gate()
    live_stack.model.script(
        model,
        [
            Reply(ACTION, delay=0.3),
            # Held until the second socket is there to hear the answer stream.
            answer.hold(
                Reply(
                    f"Thought: Done.\nFinal Answer: {LONG_ANSWER}",
                    chunk_size=8,
                    chunk_interval=0.02,
                )
            ),
        ],
    )
    conversation = conversation_create(owner=user, profile=live_stack.profile(model))

    first = live_stack.connect(conversation, user)
    first.send({"type": "message.send", "content": "6*7", "client_id": uuid.uuid4().hex})
    seen = stored(first.receive_until(lambda f: f["type"] == "step"))
    _cut(first)

    second = live_stack.connect(conversation, user, after_seq=seen[-1]["seq"])
    answer.open()
    got = second.receive_until(lambda f: f["type"] == "answer.delta")
    seen += stored(got)
    _cut(second)

    third = live_stack.connect(conversation, user, after_seq=seen[-1]["seq"])
    seen += stored(third.receive_until(run_ended))

    events = assert_log_sound(conversation)
    assert [f["seq"] for f in seen] == [e.seq for e in events]
    assert seen[-1]["type"] == "run.finished"
    assert seen[-1]["message"]["content"] == LONG_ANSWER
