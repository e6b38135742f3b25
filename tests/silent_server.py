"""An HTTP endpoint on loopback that accepts requests and never answers: a tool call that
hangs, for the stop tests and ``bench/stop_latency.py``."""

from __future__ import annotations

import socket
import threading
import time


class SilentServer:
    """``called`` is set once a request has arrived; ``calls`` counts them; ``hung_up`` is set
    once a client that sent a request has closed its end (gave up on the answer), and
    ``hung_up_at`` keeps when each did (``time.monotonic()``)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self.listener.getsockname()[1]
        self.called = threading.Event()
        self.hung_up = threading.Event()
        self.hung_up_at: list[float] = []
        self.calls = 0
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, name="silent-server", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            conn.recv(65536)
            self.calls += 1
            self.called.set()
            threading.Thread(target=self._watch, args=(conn,), daemon=True).start()

    def _watch(self, conn: socket.socket) -> None:
        try:
            while conn.recv(65536):
                pass
        except OSError:
            return  # closed by ``close()``, not by the client
        self.hung_up_at.append(time.monotonic())
        self.hung_up.set()

    def tool(self, name: str, *, timeout_seconds: float) -> None:
        """An enabled ``http_request`` tool called ``name`` whose endpoint is this server."""
        from agents.models import ToolConfig

        ToolConfig.objects.create(
            name=name,
            kind="http_request",
            description="Calls an API that never answers.",
            timeout_seconds=timeout_seconds,
            config={
                "url_template": f"http://127.0.0.1:{self.port}/slow?q={{q}}",
                "allow_hosts": ["127.0.0.1"],
                "timeout_seconds": 300,
            },
        )

    def close(self) -> None:
        for conn in self.connections:
            conn.close()
        self.listener.close()
