"""A client that asks for the whole log again and again but never reads cannot make a real
daphne buffer it: the replay waits for the socket to drain, and a socket that does not drain
within CHAT_SOCKET_DRAIN_TIMEOUT_SECONDS is closed (4408) and dropped."""

from __future__ import annotations

import base64
import json
import os
import socket
import time

import psutil
import pytest
from django.conf import settings
from django.test import Client
from websockets.sync.client import ClientConnection, connect

from agents.models import Conversation, RunEvent
from agents.services.conversations import conversation_create

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

EVENTS = 2000
RESUMES = 20
# Far below daphne's own keep-alive drop (a ping every 20 s, 30 s to answer it).
DROP_DEADLINE_SECONDS = 15.0


def client_frame(frame: dict) -> bytes:
    """One masked text frame, as a browser sends it."""
    payload = json.dumps(frame).encode()
    mask = os.urandom(4)
    length = len(payload)
    header = bytes([0x81, 0x80 | length]) if length < 126 else bytes([0x81, 0xFE])
    if length >= 126:
        header += length.to_bytes(2, "big")
    masked = bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))
    return header + mask + masked


def open_without_reading(port: int, path: str, cookie: str) -> socket.socket:
    """A websocket whose client reads the handshake answer and nothing after it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: http://127.0.0.1:{port}\r\nCookie: {cookie}\r\n\r\n"
        ).encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(1)
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return sock


def connection_open(daphne_pid: int, port: int, client_port: int) -> bool:
    return any(
        conn.laddr and conn.raddr and conn.laddr.port == port and conn.raddr.port == client_port
        and conn.status == psutil.CONN_ESTABLISHED
        for conn in psutil.Process(daphne_pid).net_connections(kind="tcp")
    )  # fmt: skip


def store_log(user, events: int, size: int) -> Conversation:
    """A conversation of ``events`` stored steps of ``size`` characters each."""
    conversation = conversation_create(owner=user)
    RunEvent.objects.bulk_create(
        RunEvent(conversation=conversation, seq=seq, type="step", payload={"text": "x" * size})
        for seq in range(1, events + 1)
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=events)
    return conversation


def cookie_of(user) -> str:
    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def reading_socket(port: int, conversation_id: int, cookie: str) -> ClientConnection:
    return connect(
        f"ws://127.0.0.1:{port}/ws/conversations/{conversation_id}/?after_seq=0",
        additional_headers={"Cookie": cookie, "Origin": f"http://127.0.0.1:{port}"},
        open_timeout=10,
        max_size=None,
    )


def receive_seqs(sock: ClientConnection, count: int) -> list[int]:
    return [json.loads(sock.recv(timeout=10))["seq"] for _ in range(count)]


def test_a_client_that_never_reads_is_dropped_after_one_page(spawn_daphne, user):
    daphne = spawn_daphne(CHAT_SOCKET_DRAIN_TIMEOUT_SECONDS="1", CHAT_RESUMES_PER_MINUTE="100")
    conversation = store_log(user, EVENTS, 1000)
    cookie = cookie_of(user)
    process = psutil.Process(daphne.pid)
    rss_before = process.memory_info().rss

    path = f"/ws/conversations/{conversation.pk}/?after_seq={EVENTS}"
    sock = open_without_reading(daphne.port, path, cookie)
    client_port = sock.getsockname()[1]
    for _ in range(RESUMES):  # each asks for the whole log: ~2 MB
        sock.sendall(client_frame({"type": "resume", "after_seq": 0}))

    deadline = time.monotonic() + DROP_DEADLINE_SECONDS
    while connection_open(daphne.pid, daphne.port, client_port):
        assert time.monotonic() < deadline, "daphne kept buffering for a client that never reads"
        time.sleep(0.1)
    rss_growth = process.memory_info().rss - rss_before
    print(f"daphne RSS grew by {rss_growth / 2**20:.1f} MiB for {RESUMES} unread replays")
    sock.close()


def test_one_users_unread_replays_wait_for_a_slot_and_hold_nothing(spawn_daphne, user, other_user):
    """F4: a user's sockets that read nothing cannot each hold a page of the log in daphne.

    With one replay slot per user, the user's unread replay keeps the slot; their next socket
    reads nothing from the log until the first is gone, while another user's replay goes on.
    """
    daphne = spawn_daphne(CHAT_REPLAYS_PER_USER="1", CHAT_SOCKET_DRAIN_TIMEOUT_SECONDS="120")
    # Far more than the socket buffers between daphne and an unread client can take.
    big = store_log(user, 2000, 8000)
    small = store_log(user, 5, 10)
    others = store_log(other_user, 5, 10)
    cookie = cookie_of(user)

    unread = open_without_reading(daphne.port, f"/ws/conversations/{big.pk}/?after_seq=0", cookie)
    # The unread socket's replay has its first pages out and waits for the client to read.
    with reading_socket(daphne.port, others.pk, cookie_of(other_user)) as another_users:
        assert receive_seqs(another_users, 5) == [1, 2, 3, 4, 5]
    with reading_socket(daphne.port, small.pk, cookie) as second:
        # Another user's replay was served meanwhile, so daphne is not simply stalled.
        with reading_socket(daphne.port, others.pk, cookie_of(other_user)) as another_users:
            assert receive_seqs(another_users, 5) == [1, 2, 3, 4, 5]
        with pytest.raises(TimeoutError):
            second.recv(timeout=1.0)  # the slot is the unread socket's
        unread.close()  # gone: its replay ends and frees the slot
        assert receive_seqs(second, 5) == [1, 2, 3, 4, 5]
