"""Talking to MCP servers from synchronous code, with one session per server per process.

The official ``mcp`` SDK is async (anyio) while the engine calls tools from plain threads.
One event loop runs in a daemon thread of each process (made again after a fork, so every
Celery child has its own). A server's session lives in a task of its own on that loop,
because anyio wants a session entered and left by the same task; calls from any thread are
coroutines on the same loop that use the open session. A call that fails for any reason
other than the tool's own error closes the session, so the next call connects afresh: a
restarted server is picked up without restarting the worker.

No Django at run time: ``McpEndpoint`` carries everything needed to connect
(``endpoint_for`` reads it from a server's row), and the tool (``tools/builtin/mcp_tool.py``)
and the services (``services/mcp.py``) both build on this module.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import anyio
import httpx2
from django.conf import settings

from agents.tools.base import ToolError
from agents.tools.builtin.http_request import checked_target
from chatsite.server.per_process import PerProcess

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult

    from agents.models import McpServer

T = TypeVar("T")
logger = logging.getLogger(__name__)


class McpUnavailable(Exception):
    """The server could not be reached, or the call did not complete (no tool result)."""


# What every failure to open a session with an HTTP server says, whatever the cause: a
# closed port, a port open to something else and an HTTP server that is not MCP must not be
# told apart, or a server URL would map the network. The cause is logged for operators.
NO_SESSION = (
    "no MCP session could be opened: the server is down, unreachable, too slow to answer "
    "or not an MCP server"
)


@dataclass(frozen=True)
class McpEndpoint:
    """How to reach one server. ``key`` changes whenever its settings do."""

    key: str
    transport: str  # "http" or "stdio"
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    command: str = ""
    args: tuple[str, ...] = ()
    # stdio: added to the SDK's safe default environment of the program.
    environment: tuple[tuple[str, str], ...] = ()
    connect_timeout: float = 15.0

    def secret_values(self) -> list[str]:
        return [value for _, value in (*self.headers, *self.environment)]


@dataclass(frozen=True)
class RemoteTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] = field(default_factory=dict)


def needs_approval_by_default(annotations: Mapping[str, Any]) -> bool:
    """Whether a tool with these MCP annotations should wait for the user's approval.

    Yes when the server marks it destructive or does not mark it read-only (the protocol's
    default for a missing hint is "not read-only").
    """
    return annotations.get("destructiveHint") is True or annotations.get("readOnlyHint") is not True


def endpoint_for(server: McpServer) -> McpEndpoint:
    """How to reach ``server``; the key changes with every save, so sessions follow edits."""
    stamp = server.updated_at.isoformat() if server.updated_at else "new"
    return McpEndpoint(
        key=f"{server.pk}:{stamp}",
        transport=server.transport,
        url=server.url,
        headers=tuple(server.get_headers().items()),
        command=server.command,
        args=tuple(str(arg) for arg in server.args or ()),
        environment=tuple(server.get_environment().items()),
        connect_timeout=float(server.timeout_seconds),
    )


def server_url_refusal(url: str) -> str:
    """Why an HTTP server's URL must not be reached ("" when it may): ``http_request``'s
    SSRF guard, with ``CHAT_MCP_ALLOW_HOSTS`` as the internal hosts it may reach. Checked
    before every contact, since DNS may change."""
    try:
        checked_target(httpx2.URL(url), allow_hosts=settings.CHAT_MCP_ALLOW_HOSTS)
    except ToolError as exc:
        return f"the server URL is refused: {exc}".replace(
            "allow_hosts or allow_networks", "CHAT_MCP_ALLOW_HOSTS"
        )
    except (httpx2.InvalidURL, ValueError):
        return "the server URL is refused: it is not a valid http(s) URL"
    return ""


def list_tools(endpoint: McpEndpoint) -> list[RemoteTool]:
    """Every tool the server offers, over a connection of its own (closed afterwards)."""

    async def discover() -> list[RemoteTool]:
        try:
            with anyio.fail_after(endpoint.connect_timeout):
                async with _client(endpoint) as client:
                    tools: list[RemoteTool] = []
                    cursor: str | None = None
                    for _ in range(100):  # a paginator that never ends must not hang it
                        listing = await client.list_tools(cursor=cursor)
                        tools.extend(_remote_tool(tool) for tool in listing.tools)
                        cursor = listing.next_cursor
                        if not cursor:
                            break
                    return tools
        except Exception as exc:  # anyio wraps failures in groups
            raise McpUnavailable(_opening_failure(endpoint, exc)) from None

    return _run_on_loop(discover(), timeout=endpoint.connect_timeout + 1)


def call_tool(
    endpoint: McpEndpoint, name: str, arguments: dict[str, Any], *, timeout: float
) -> CallToolResult:
    """One ``tools/call`` on this process's session with the server (opened if needed).

    Raises ``McpUnavailable`` when there is no answer: the server is down, the call timed
    out, or the session broke. A result with ``isError`` is returned, not raised.
    """
    return _run_on_loop(
        _pool().call(endpoint, name, arguments, timeout=timeout),
        timeout=timeout + endpoint.connect_timeout + 1,
    )


def close_sessions() -> None:
    """Close every session of this process (tests; a worker simply exits)."""
    sessions = _sessions.current()
    if sessions is not None:
        _run_on_loop(sessions.pool.close_all(), timeout=10)


# -- the sessions ---------------------------------------------------------------------


class _Session:
    def __init__(self, endpoint: McpEndpoint) -> None:
        self.endpoint = endpoint
        self.client: Client | None = None
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closing = asyncio.Event()
        self.task = asyncio.ensure_future(self._hold())

    @property
    def usable(self) -> bool:
        return not self.task.done() and not self.closing.is_set()

    async def _hold(self) -> None:
        try:
            async with _client(self.endpoint) as client:
                self.client = client
                self.opened.set_result(None)
                await self.closing.wait()
        except BaseException as exc:  # anyio wraps failures in groups: report the first leaf
            if not self.opened.done():
                self.opened.set_exception(McpUnavailable(_opening_failure(self.endpoint, exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise

    async def client_when_open(self) -> Client:
        # The connect timeout is kept here, not around the connection in ``_hold``: a
        # cancel scope there would have to close before the session it wraps does.
        try:
            await asyncio.wait_for(asyncio.shield(self.opened), self.endpoint.connect_timeout)
        except TimeoutError:
            self.closing.set()
            self.task.cancel()
            reason = f"no connection within {self.endpoint.connect_timeout:g} s"
            if self.endpoint.transport != "stdio":
                logger.info("MCP server #%s: %s", _server_id(self.endpoint), reason)
                reason = NO_SESSION
            raise McpUnavailable(reason) from None
        assert self.client is not None
        return self.client


class _Pool:
    def __init__(self) -> None:
        self.sessions: dict[str, _Session] = {}

    async def call(
        self, endpoint: McpEndpoint, name: str, arguments: dict[str, Any], *, timeout: float
    ) -> CallToolResult:
        session = self._session_for(endpoint)
        try:
            client = await session.client_when_open()
            with anyio.fail_after(timeout):
                result = await client.call_tool(name, arguments, read_timeout_seconds=timeout)
        except McpUnavailable:
            self._drop(session)
            raise
        except TimeoutError:
            self._drop(session)
            raise McpUnavailable(f"no answer within {timeout:g} s") from None
        except Exception as exc:
            self._drop(session)
            raise McpUnavailable(describe_failure(exc)) from None
        return result

    def _session_for(self, endpoint: McpEndpoint) -> _Session:
        server_id = endpoint.key.split(":", 1)[0]
        for key, session in list(self.sessions.items()):
            # Settings changed (another key for the same server) or broken: replace it.
            if key.split(":", 1)[0] == server_id and (key != endpoint.key or not session.usable):
                self._drop(session)
        existing = self.sessions.get(endpoint.key)
        if existing is not None:
            return existing
        opened = self.sessions[endpoint.key] = _Session(endpoint)
        return opened

    def _drop(self, session: _Session) -> None:
        session.closing.set()
        if self.sessions.get(session.endpoint.key) is session:
            del self.sessions[session.endpoint.key]

    async def close_all(self) -> None:
        sessions = list(self.sessions.values())
        for session in sessions:
            self._drop(session)
        for session in sessions:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(session.task, timeout=5)


@contextlib.asynccontextmanager
async def _client(endpoint: McpEndpoint) -> Any:
    # The SDK is imported when a server is first reached: every daphne and worker imports
    # this module (the tool registry, the admin), and the SDK is a large share of each
    # process's memory, which a site without MCP servers never uses
    # (docs/performance.md#start-up-imports).
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with contextlib.AsyncExitStack() as stack:
        if endpoint.transport == "stdio":
            server: Any = StdioServerParameters(
                command=endpoint.command,
                args=list(endpoint.args),
                env=dict(endpoint.environment) or None,
            )
        else:
            url = httpx2.URL(endpoint.url)
            # Resolved and checked now, for this connection: the address the session uses.
            target = await anyio.to_thread.run_sync(_checked_target, url)
            http = await stack.enter_async_context(
                create_mcp_http_client(
                    headers=dict(endpoint.headers),
                    timeout=httpx2.Timeout(endpoint.connect_timeout, read=300),
                )
            )
            http.event_hooks = {"request": [_pinned_to(url, target.address)]}
            server = streamable_http_client(endpoint.url, http_client=http)
        # No response cache: a call must reach the server, and discovery must be current.
        client = await stack.enter_async_context(Client(server, cache=None, mode="legacy"))
        yield client


def _checked_target(url: httpx2.URL) -> Any:
    try:
        return checked_target(url, allow_hosts=settings.CHAT_MCP_ALLOW_HOSTS)
    except (ToolError, ValueError) as exc:
        raise McpUnavailable(f"the server URL is refused: {exc}") from None


def _pinned_to(url: httpx2.URL, address: str) -> Callable[[httpx2.Request], Awaitable[None]]:
    """A request hook sending every request for ``url``'s host to ``address``.

    The guard checked the address the name resolved to; left to itself the client would
    resolve the name again when it connects, and a name whose answer changes in between (DNS
    rebinding) would reach an address nobody checked. The Host header and TLS's server name
    stay the name. The SDK follows redirects only within the endpoint's origin, so no request
    of the session goes to another host.
    """
    host = url.host
    host_header = url.netloc.decode("ascii").rsplit("@", 1)[-1]

    async def pin(request: httpx2.Request) -> None:
        if request.url.host != host:
            raise McpUnavailable("a request left the server's origin")
        request.url = request.url.copy_with(host=address)
        request.headers["Host"] = host_header
        if request.url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": host}

    return pin


def _opening_failure(endpoint: McpEndpoint, exc: BaseException) -> str:
    """Why no session opened: the cause for a program of ours (stdio), ``NO_SESSION`` for
    a URL (the cause goes to the log)."""
    reason = describe_failure(exc)
    if endpoint.transport == "stdio":
        return reason
    logger.info("MCP server #%s: no session: %s", _server_id(endpoint), reason)
    return NO_SESSION


def _server_id(endpoint: McpEndpoint) -> str:
    """The server's id, for the log (its URL may carry a token)."""
    return endpoint.key.split(":", 1)[0]


def describe_failure(exc: BaseException) -> str:
    """A one-line reason from an exception, unwrapping anyio's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, httpx2.ConnectError):
        return f"cannot connect ({exc})"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from the server"
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text


def _remote_tool(tool: Any) -> RemoteTool:
    annotations = (
        tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else {}
    )
    return RemoteTool(
        name=tool.name,
        description=tool.description or tool.title or "",
        input_schema=dict(tool.input_schema or {"type": "object", "properties": {}}),
        annotations=annotations,
    )


# -- the loop thread ------------------------------------------------------------------


class _Sessions(NamedTuple):
    """The sessions' own loop, in a thread of its own, and the sessions held on it."""

    loop: asyncio.AbstractEventLoop
    pool: _Pool


def _start_sessions() -> _Sessions:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, name="mcp-sessions", daemon=True).start()
    return _Sessions(loop, _Pool())


# After a fork the parent's loop thread does not exist here: the child starts its own.
_sessions = PerProcess(_start_sessions)


def _event_loop() -> asyncio.AbstractEventLoop:
    return _sessions.get().loop


def _pool() -> _Pool:
    return _sessions.get().pool


def _run_on_loop(coroutine: Awaitable[T], *, timeout: float) -> T:
    future = asyncio.run_coroutine_threadsafe(_as_coroutine(coroutine), _event_loop())
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise McpUnavailable(f"no answer within {timeout:g} s") from None
    except McpUnavailable:
        raise
    except TimeoutError:
        raise McpUnavailable("no answer in time") from None
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise McpUnavailable(describe_failure(exc)) from None


async def _as_coroutine(awaitable: Awaitable[T]) -> T:
    return await awaitable
