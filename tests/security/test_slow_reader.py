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


def test_a_client_that_never_reads_is_dropped_after_one_page(spawn_daphne, user):
    daphne = spawn_daphne(CHAT_SOCKET_DRAIN_TIMEOUT_SECONDS="1", CHAT_RESUMES_PER_MINUTE="100")
    conversation = conversation_create(owner=user)
    RunEvent.objects.bulk_create(
        RunEvent(conversation=conversation, seq=seq, type="step", payload={"text": "x" * 1000})
        for seq in range(1, EVENTS + 1)
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=EVENTS)
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
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
