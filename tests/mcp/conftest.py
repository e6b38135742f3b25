"""Real MCP servers (the SDK's MCPServer in a child process) and a small JSON API on loopback.

An HTTP server is ready when its port accepts connections; the tests wait for that, not
for a fixed time.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from agents.tools.mcp_client import close_sessions

# The admin pages' fixtures (a plain-HTTP admin, a superuser), shared with tests/admin.
from tests.admin.conftest import _plain_http_admin, staff, staff_client  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
SECRET_TOKEN = "mcp-header-secret-7f3a9c2e41"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class McpHttpServer:
    port: int
    calls_file: Path
    process: subprocess.Popen | None = None
    host: str = "127.0.0.1"  # any loopback address

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/mcp"

    def calls(self) -> list[dict[str, Any]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]

    def start(self) -> McpHttpServer:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.mcp.server_app",
                "http",
                self.host,
                str(self.port),
                str(self.calls_file),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("the MCP test server exited")
            try:
                socket.create_connection((self.host, self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise TimeoutError("the MCP test server did not open its port")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def mcp_http_server(tmp_path) -> Iterator[McpHttpServer]:
    server = McpHttpServer(port=_free_port(), calls_file=tmp_path / "http-calls.jsonl").start()
    yield server
    close_sessions()
    server.stop()


@pytest.fixture
def mcp_stdio(tmp_path) -> tuple[str, list[str], Path]:
    """(command, args, calls file) of the same server over stdio."""
    calls = tmp_path / "stdio-calls.jsonl"
    return sys.executable, ["-m", "tests.mcp.server_app", "stdio", str(calls)], calls


@pytest.fixture
def down_url() -> str:
    """A loopback URL where nothing listens."""
    return f"http://127.0.0.1:{_free_port()}/mcp"


@pytest.fixture
def make_server(db):
    from agents.models import McpServer
    from agents.services.mcp import mcp_server_environment_update, mcp_server_headers_update

    def make(
        *,
        name: str = "tests",
        headers: dict[str, str] | None = None,
        environment: dict[str, str] | None = None,
        **fields: Any,
    ):
        server = McpServer(name=name, **fields)
        if headers:
            mcp_server_headers_update(server=server, entered=headers)
        if environment:
            mcp_server_environment_update(server=server, entered=environment)
        server.full_clean()
        server.save()
        return server

    yield make
    close_sessions()


# -- a JSON API for the OpenAPI tests -------------------------------------------------------


class _ApiHandler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        received = {
            "method": self.command,
            "path": parts.path,
            "query": {key: values[0] for key, values in parse_qs(parts.query).items()},
            "headers": {key.lower(): value for key, value in self.headers.items()},
            "body": json.loads(body) if body else None,
        }
        self.server.received.append(received)  # type: ignore[attr-defined]
        if parts.path.startswith("/v1/pets/"):
            reply = {"id": parts.path.rsplit("/", 1)[-1], "name": "Rex", "kind": "dog"}
        elif parts.path == "/v1/pets":
            reply = {"created": received["body"]} if self.command == "POST" else {"pets": ["Rex"]}
        else:
            # A careless API quotes the request back, query string (and API key) included.
            reply = {"error": "no such path", "asked": self.path}
        data = json.dumps(reply).encode()
        self.send_response(200 if "error" not in reply else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _handle


@pytest.fixture
def pet_api() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ApiHandler)
    server.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def pet_api_document() -> dict[str, Any]:
    """Four operations, an API key in the query and a bearer token, and one private server."""
    return {
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1.0"},
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "listPets",
                    "summary": "List pets",
                    "parameters": [
                        {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    ],
                    "security": [{"queryKey": []}],
                    "responses": {"200": {"description": "ok"}},
                },
                "post": {
                    "operationId": "createPet",
                    "summary": "Add a pet",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/NewPet"}}
                        },
                    },
                    "security": [{"bearer": []}],
                    "responses": {"201": {"description": "made"}},
                },
            },
            "/pets/{petId}": {
                "get": {
                    "operationId": "getPet",
                    "summary": "One pet by id",
                    "parameters": [
                        {
                            "name": "petId",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                    ],
                    "security": [{"headerKey": []}],
                    "responses": {"200": {"description": "ok"}},
                }
            },
            "/internal/stats": {
                "get": {
                    "operationId": "internalStats",
                    "servers": [{"url": "http://10.1.2.3/admin"}],
                    "responses": {"200": {"description": "ok"}},
                }
            },
        },
        "components": {
            "schemas": {
                "NewPet": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "kind": {"type": "string"}},
                    "required": ["name"],
                }
            },
            "securitySchemes": {
                "queryKey": {"type": "apiKey", "in": "query", "name": "api_key"},
                "headerKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
    }
