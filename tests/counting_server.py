"""An HTTP endpoint on loopback that counts the requests that reach it: the side effect of a
tool, seen from the tool's side (approval tests check that a denied call never arrives and an
approved one arrives once)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class CountingServer:
    def __init__(self) -> None:
        self.paths: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server._lock:
                    server.paths.append(self.path)
                    number = len(server.paths)
                body = f"Filed ticket {number}.".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        serve = threading.Thread(target=self.httpd.serve_forever, name="counting-server")
        serve.daemon = True
        serve.start()

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.paths)

    def tool(self, name: str, *, needs_approval: bool = True) -> None:
        """An enabled ``http_request`` tool called ``name`` that files a ticket here."""
        from agents.models import ToolConfig

        ToolConfig.objects.create(
            name=name,
            kind="http_request",
            description="Files a ticket with a title.",
            needs_approval=needs_approval,
            config={
                "url_template": f"http://127.0.0.1:{self.port}/tickets?title={{title}}",
                "allow_hosts": ["127.0.0.1"],
            },
        )

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
