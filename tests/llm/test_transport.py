"""The model client's HTTP path (agents/llm/http.py, aiohttp) on real sockets."""

from __future__ import annotations

import json
import socket
import struct
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agents.llm.client import OpenAIChatModel
from agents.react.errors import ModelTimeout, ModelUnavailable

QUESTION = [{"role": "user", "content": "hi"}]


def _stream_body(text: str) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\ndata: [DONE]\n\n"


class _ClosesAfterEachReply(BaseHTTPRequestHandler):
    """Answers with keep-alive headers, then closes the connection anyway (as a server's
    idle timeout does): the client has to notice before it reuses the connection."""

    protocol_version = "HTTP/1.1"
    connections: list[tuple[str, int]] = []

    def log_message(self, format, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).connections.append(self.client_address)
        body = _stream_body(f"reply {len(type(self).connections)}")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture
def closing_server():
    _ClosesAfterEachReply.connections = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ClosesAfterEachReply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_a_connection_the_server_closed_is_not_reused(closing_server):
    # No retries: a request sent on the dead connection would fail the call.
    model = OpenAIChatModel(base_url=closing_server, api_key="k", model="m", max_retries=0)

    first = model.complete(QUESTION)
    second = model.complete(QUESTION)

    assert (first.text, second.text) == ("reply 1", "reply 2")
    assert len(_ClosesAfterEachReply.connections) == 2


def test_a_server_that_accepts_and_never_answers_times_out():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        port = listener.getsockname()[1]
        model = OpenAIChatModel(
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="k",
            model="m",
            deadline_seconds=0.5,
            max_retries=0,
        )
        with pytest.raises(ModelTimeout):
            model.complete(QUESTION)
    finally:
        listener.close()


def test_a_connection_reset_before_the_reply_is_unavailable():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)

    def reset_each() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            # Linger on, for 0 s: close sends an RST, not a FIN.
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    threading.Thread(target=reset_each, daemon=True).start()
    try:
        port = listener.getsockname()[1]
        model = OpenAIChatModel(
            base_url=f"http://127.0.0.1:{port}/v1", api_key="k", model="m", max_retries=1
        )
        with pytest.raises(ModelUnavailable, match="cannot reach"):
            model.complete(QUESTION)
    finally:
        listener.close()


class _ChunkedKeepAlive(BaseHTTPRequestHandler):
    """Streams as real endpoints do (a chunked body whose last, empty chunk follows
    ``[DONE]``) and keeps the connection open; ``hold_after_done`` never sends that last chunk.
    """

    protocol_version = "HTTP/1.1"
    connections: list[tuple[str, int]] = []
    hold_after_done = False

    def log_message(self, format, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).connections.append(self.client_address)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for part in _stream_body(f"reply {len(type(self).connections)}").split(b"\n\n")[:-1]:
            data = part + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        if type(self).hold_after_done:
            threading.Event().wait(5)  # the body never ends; the client must not wait for it
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture
def keep_alive_server():
    _ChunkedKeepAlive.connections = []
    _ChunkedKeepAlive.hold_after_done = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChunkedKeepAlive)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_calls_one_after_another_share_one_connection(keep_alive_server):
    # The body's last chunk comes after [DONE]: read to it, or httpcore drops the connection
    # and every call pays for a new one (a TLS handshake on a real endpoint).
    model = OpenAIChatModel(base_url=keep_alive_server, api_key="k", model="m", max_retries=0)

    texts = [model.complete(QUESTION).text for _ in range(3)]

    assert texts == ["reply 1", "reply 2", "reply 3"]
    assert len(set(_ChunkedKeepAlive.connections)) == 1


def test_a_body_left_open_after_done_does_not_hold_the_call(keep_alive_server, monkeypatch):
    monkeypatch.setattr("agents.llm.http.DRAIN_AFTER_DONE_SECONDS", 0.2)
    _ChunkedKeepAlive.hold_after_done = True
    model = OpenAIChatModel(
        base_url=keep_alive_server, api_key="k", model="m", max_retries=0, deadline_seconds=3
    )

    first = model.complete(QUESTION)
    second = model.complete(QUESTION)

    # Both answered well inside the deadline; the open connection was given up, not reused.
    assert (first.text, second.text) == ("reply 1", "reply 2")
    assert len(set(_ChunkedKeepAlive.connections)) == 2


class _RecordingProxy(_ChunkedKeepAlive):
    """A forward proxy that answers in the endpoint's place: the request line it got tells
    whether the call went through it (an absolute URL) and to where."""

    paths: list[str] = []

    def do_POST(self):
        type(self).paths.append(self.path)
        super().do_POST()


@pytest.fixture
def proxy(monkeypatch):
    _RecordingProxy.paths = []
    _ChunkedKeepAlive.connections = []
    _ChunkedKeepAlive.hold_after_done = False
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RecordingProxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server_address[1]}")
    yield _RecordingProxy.paths
    server.shutdown()
    server.server_close()


def test_calls_go_through_the_proxy_the_environment_names(proxy):
    # A host that resolves nowhere: only the proxy can answer for it.
    base_url = f"http://model-{uuid.uuid4().hex[:8]}.invalid/v1"
    model = OpenAIChatModel(base_url=base_url, api_key="k", model="m", max_retries=0)

    assert model.complete(QUESTION).text == "reply 1"
    assert proxy == [f"{base_url}/chat/completions"]


def test_no_proxy_exempts_its_hosts(proxy, keep_alive_server, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    model = OpenAIChatModel(base_url=keep_alive_server, api_key="k", model="m", max_retries=0)

    assert model.complete(QUESTION).text == "reply 1"
    assert proxy == []  # straight to the endpoint
