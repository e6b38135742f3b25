"""Fixtures for the tool tests: a small HTTP server on loopback to point http_request at."""

from __future__ import annotations

import base64
import html
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest


class _Handler(BaseHTTPRequestHandler):
    """A few behaviours to probe the tool with; it records what it received."""

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.received.append(
            {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
        )
        parts = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        if parts.path == "/hello":
            self._reply(200, f"hello {query.get('name', '')}".encode())
        elif parts.path == "/echo":
            echoed = {"path": self.path, "headers": dict(self.headers), "body": body.decode()}
            self._reply(200, json.dumps(echoed).encode(), "application/json")
        elif parts.path == "/reflect":
            # What a careless API does with what it received: quote it back, re-encoded.
            key = query.get("key", "")
            reflected = [
                f"you asked for {self.path}",
                f"form: {urlencode({'key': key})}",
                f"basic: {base64.b64encode(f'user:{key}'.encode()).decode()}",
                f"basic, other offset: {base64.b64encode(f'me:{key}'.encode()).decode()}",
                f"html: <b>{html.escape(key)}</b>",
                f"json: {json.dumps({'key': key})}",
            ]
            self._reply(200, "\n".join(reflected).encode())
        elif parts.path in ("/drip-headers", "/drip-body"):
            self._drip(header_bytes=parts.path == "/drip-headers")
        elif parts.path == "/big":
            self._reply(200, b"x" * 1_000_000)
        elif parts.path == "/slow":
            time.sleep(3)
            self._reply(200, b"late")
        elif parts.path == "/denied":
            self._reply(401, f"bad token {self.headers.get('Authorization')}".encode())
        elif parts.path == "/image":
            self._reply(200, b"\x89PNG\r\n", "image/png")
        elif parts.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", query["to"])
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._reply(404, f"no such page {self.path}".encode())

    def _drip(self, *, header_bytes: bool) -> None:
        """Send a response one byte every 0.1 s, as a slow-loris server would."""
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
        slow = b"X-Slow: " + b"a" * 40 + b"\r\n\r\n" if header_bytes else b"\r\n" + b"b" * 40
        try:
            self.wfile.write(head)
            self.wfile.flush()
            for byte in slow:
                time.sleep(0.1)
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            if header_bytes:
                self.wfile.write(b"late")
            self.server.drip_finished.set()
        except OSError:
            self.server.drip_abandoned.set()
        self.close_connection = True

    do_GET = do_POST = do_HEAD = _handle


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:
        """The tool hangs up on purpose (response cap, timeout); that is not news."""


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = _QuietServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    httpd.block_on_close = False  # the /slow handler may still be sleeping
    httpd.received = []
    httpd.drip_finished = threading.Event()
    httpd.drip_abandoned = threading.Event()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
