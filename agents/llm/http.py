"""The HTTP request of a streamed completion, sent on aiohttp.

The openai SDK stays what an endpoint is configured with and what its failures mean
(``agents/llm/client.py``): base URL, API key, default headers, and the SDK's exception for
every failure, built by the SDK from the status and body. Only the request itself goes out
here. The SDK's ``httpx2`` client spends more CPU than aiohttp on a streamed completion
(request building, the connection pool's bookkeeping, h11 and the response's byte iterators
per chunk), and a worker streams one completion per step of every run it drives
(docs/performance.md#model-client).

One ``ClientSession`` per event loop: the process's loop (``chatsite/server/loop.py``) of a
worker keeps its connections alive between a run's calls. Proxies come from the
environment (``HTTPS_PROXY``, ``NO_PROXY``) as with httpx, and TLS from the system's
certificate store (``SSL_CERT_FILE`` points elsewhere).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import ssl
import urllib.request
import weakref
from collections.abc import AsyncIterator

import aiohttp
import httpx2
import openai
import yarl

# A worker streams one call per run it drives, all at once: every connection is kept alive
# for the run's next call (a new one costs a TCP and TLS handshake).
MAX_CONNECTIONS = 1000
KEEPALIVE_SECONDS = 5.0
# How long the rest of a body after ``[DONE]`` may take to arrive (it is one empty chunk).
DRAIN_AFTER_DONE_SECONDS = 1.0

_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
    weakref.WeakKeyDictionary()
)


def _session() -> aiohttp.ClientSession:
    loop = asyncio.get_running_loop()
    session = _sessions.get(loop)
    if session is None or session.closed:
        if not _sessions:
            atexit.register(_close_sessions)
        connector = aiohttp.TCPConnector(
            limit=MAX_CONNECTIONS,
            keepalive_timeout=KEEPALIVE_SECONDS,
            ssl=ssl.create_default_context(),
        )
        # Proxies are read from the environment once per endpoint (``_endpoint``): aiohttp's
        # trust_env looks them up again in a thread for every request.
        session = aiohttp.ClientSession(connector=connector)
        _sessions[loop] = session
    return session


def _close_sessions() -> None:
    """Close the kept-alive connections as the process exits, on the loops that own them
    (the process loop runs in a daemon thread, still alive while ``atexit`` handlers run)."""
    for loop, session in list(_sessions.items()):
        if loop.is_running() and not session.closed:
            closing = asyncio.run_coroutine_threadsafe(session.close(), loop)
            with contextlib.suppress(Exception):
                closing.result(timeout=1)


class CompletionStream:
    """One streamed completion's response: its lines, then ``close``."""

    def __init__(self, response: aiohttp.ClientResponse, url: yarl.URL) -> None:
        self._response = response
        self._url = url
        self._done = False

    @property
    def request(self) -> httpx2.Request:
        """The request the SDK's exceptions name, made only when one is raised."""
        return _named(self._url)

    async def lines(self) -> AsyncIterator[str]:
        """The body's lines (``\\n``, ``\\r\\n`` or ``\\r`` ended), decoded as UTF-8.

        A failure to read raises the SDK's connection error, as its own stream would.
        """
        pending = b""
        try:
            async for data in self._response.content.iter_any():
                pending += data
                lines = pending.splitlines(keepends=True)
                # The last piece may be a line still arriving: it waits for the next read.
                pending = lines.pop() if lines and not lines[-1].endswith((b"\n", b"\r")) else b""
                for line in lines:
                    yield line.rstrip(b"\r\n").decode("utf-8", "replace")
            if pending:
                yield pending.decode("utf-8", "replace")
            self._done = True
        except aiohttp.ServerTimeoutError as exc:
            raise openai.APITimeoutError(request=self.request) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise openai.APIConnectionError(request=self.request) from exc

    async def read_to_end(self, lines: AsyncIterator[str]) -> None:
        """Read what follows ``[DONE]`` (the body's last, empty chunk), so the connection
        goes back to the pool for the next call. Bounded: a server that keeps the body open
        after ``[DONE]`` only costs its connection."""
        with contextlib.suppress(TimeoutError, openai.APIError):
            async with asyncio.timeout(DRAIN_AFTER_DONE_SECONDS):
                async for _ in lines:
                    pass

    def close(self) -> None:
        """Give the connection back if the body was read to its end; otherwise drop it (a
        half-read response cannot carry the next request)."""
        if self._done:
            self._response.release()
        else:
            self._response.close()


async def completion_stream(
    client: openai.AsyncOpenAI, body: bytes, *, connect_timeout: float
) -> CompletionStream:
    """POST ``body`` to the client's ``/chat/completions`` with its headers and key, and
    return the streaming response. Failures raise the SDK's exceptions: a refused status as
    the SDK reads it (``APIStatusError`` and its kinds), a network failure as
    ``APIConnectionError``, a connect timeout as ``APITimeoutError``.
    """
    url, headers, proxy = _endpoint(client)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout)
    try:
        response = await _session().post(
            url, data=body, headers=headers, timeout=timeout, proxy=proxy
        )
    except aiohttp.ServerTimeoutError as exc:
        raise openai.APITimeoutError(request=_named(url)) from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise openai.APIConnectionError(request=_named(url)) from exc
    if response.status >= 400:
        request = _named(url)
        try:
            content = await response.read()
        except (aiohttp.ClientError, OSError) as exc:
            response.close()
            raise openai.APIConnectionError(request=request) from exc
        response.release()
        # The body is already decoded: its transfer headers would have httpx decode it again.
        kept = [
            (name, value)
            for name, value in response.headers.items()
            if name.lower() not in ("content-encoding", "transfer-encoding", "content-length")
        ]
        refused = httpx2.Response(
            response.status,
            headers=kept,
            content=content,
            request=request,
        )
        raise client._make_status_error_from_response(refused)
    return CompletionStream(response, url)


@functools.lru_cache(maxsize=32)
def _endpoint(client: openai.AsyncOpenAI) -> tuple[yarl.URL, dict[str, str], str | None]:
    """Where the client's completions go, the headers it sends (its key, its default
    headers) and the proxy they go through: the same for every call, so read from the SDK
    and the environment once per client."""
    url = yarl.URL(f"{str(client.base_url).rstrip('/')}/chat/completions")
    headers = {
        name: value
        for name, value in {**client.default_headers, **client.auth_headers}.items()
        if isinstance(value, str)
    }
    if url.user is not None:
        # Credentials in the base URL sign the request instead of the key, as httpx does.
        headers["Authorization"] = aiohttp.encode_basic_auth(url.user, url.password or "")
        url = url.with_user(None)
    return url, headers, _environment_proxy(url)


def _environment_proxy(url: yarl.URL) -> str | None:
    """The proxy ``HTTPS_PROXY`` / ``HTTP_PROXY`` (or ``ALL_PROXY``) name for ``url``, unless
    ``NO_PROXY`` exempts its host: what httpx and aiohttp read from the environment."""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(url.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(url.host or ""):
        return None
    return proxy


def _named(url: yarl.URL) -> httpx2.Request:
    """The request the SDK's exceptions name (without the headers: they carry the key)."""
    return httpx2.Request("POST", str(url))
