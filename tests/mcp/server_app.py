"""An MCP server built with the official SDK's MCPServer (FastMCP before mcp 2), for tests.

Run as ``python -m tests.mcp.server_app http HOST PORT CALLS_FILE`` (streamable HTTP on a
loopback address) or ``python -m tests.mcp.server_app stdio CALLS_FILE``. Every call appends one
JSON line to CALLS_FILE (the tool, its arguments and the Authorization header received), so
a test can check what the server saw.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("chatsite-test-server", log_level="WARNING")
CALLS = Path(sys.argv[-1])


def _record(tool: str, ctx: Context | None = None, **arguments: object) -> None:
    headers = (ctx.headers if ctx is not None else None) or {}
    entry = {
        "tool": tool,
        "arguments": arguments,
        "authorization": headers.get("authorization"),
        "session": headers.get("mcp-session-id"),  # streamable HTTP's session, per connection
    }
    with CALLS.open("a") as calls:
        calls.write(json.dumps(entry) + "\n")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int, ctx: Context) -> int:
    """Adds two whole numbers."""
    _record("add", ctx, a=a, b=b)
    return a + b


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def send_mail(to: str, body: str, ctx: Context) -> str:
    """Sends an email."""
    _record("send_mail", ctx, to=to, body=body)
    return f"sent to {to}"


class Forecast(BaseModel):
    city: str
    celsius: float


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def forecast(city: str, ctx: Context) -> Forecast:
    """Tomorrow's temperature in a city."""
    _record("forecast", ctx, city=city)
    return Forecast(city=city, celsius=21.5)


@server.tool()
def refuse(reason: str, ctx: Context) -> str:
    """Always fails, with the reason given."""
    _record("refuse", ctx, reason=reason)
    raise ToolError(f"refused: {reason}")


@server.tool()
async def hang(ctx: Context) -> str:
    """Never answers in time."""
    _record("hang", ctx)
    await anyio.sleep(3600)
    return "too late"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def whoami(ctx: Context) -> str:
    """Says which credentials the server received (a careless server echoes them)."""
    _record("whoami", ctx)
    return f"you sent: {(ctx.headers or {}).get('authorization')}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def token_status(ctx: Context) -> str:
    """Fails quoting the credential it received without its scheme, as careless servers do."""
    _record("token_status", ctx)
    _, _, credential = ((ctx.headers or {}).get("authorization") or "").partition(" ")
    raise ToolError(f"token {credential} is expired")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def environment_value(name: str) -> str:
    """Echoes one of the program's environment variables (a careless server's debug tool)."""
    value = os.environ.get(name)
    _record("environment_value", None, name=name, value=value)
    return f"{name} is {value}"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=sys.argv[2], port=int(sys.argv[3]))
