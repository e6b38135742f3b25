"""The network layer under the SDK's HTTP client: asyncio's own streams, not AnyIO's.

``httpcore2`` (under the SDK's ``httpx2`` client) reads a streamed completion one socket read
at a time, and with its default backend every read, write and connect goes through AnyIO: a
cancel scope per read for its timeout, and the transport paused and resumed around each
``receive``. A model client streams a chunk every few tokens for every run a worker drives,
so that is most of what the worker spends per chunk besides its own parsing
(docs/performance.md, issue 18). ``httpcore2`` takes its network layer as a plug-in
(``AsyncNetworkBackend``); this one is a thin adapter over ``asyncio.open_connection`` and
its ``StreamReader``/``StreamWriter``, which buffer what arrives and hand it over without
another round through the event loop. Everything above it is unchanged: the SDK's request,
headers, auth and errors, httpx's connection pool, TLS settings, proxies (proxied URLs keep
httpx's own transport) and the failures it maps to ``httpx2`` exceptions.

Only the event loop this model client runs on (``agents/llm/client.py``) uses it.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from contextlib import contextmanager
from typing import Any

import httpcore2
import httpx2
from httpcore2._backends.base import AsyncNetworkBackend, AsyncNetworkStream
from httpcore2._utils import is_socket_readable

# Each read asks for up to this much; what the server has sent by then comes in one piece.
READ_SIZE = 64 * 1024


@contextmanager
def _raising(timeout_error: type[Exception], os_error: type[Exception]):
    """asyncio's and the socket's failures as the httpcore exceptions httpx maps."""
    try:
        yield
    except TimeoutError as exc:
        raise timeout_error(str(exc) or "timed out") from exc
    except (OSError, EOFError) as exc:  # ssl.SSLError and ConnectionError are OSErrors
        raise os_error(str(exc) or type(exc).__name__) from exc


class AsyncioStream(AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _raising(httpcore2.ReadTimeout, httpcore2.ReadError):
            if timeout is None:
                return await self._reader.read(max_bytes)
            async with asyncio.timeout(timeout):
                return await self._reader.read(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        with _raising(httpcore2.WriteTimeout, httpcore2.WriteError):
            self._writer.write(buffer)
            async with asyncio.timeout(timeout):
                await self._writer.drain()

    async def aclose(self) -> None:
        self._writer.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> AsyncNetworkStream:
        with _raising(httpcore2.ConnectTimeout, httpcore2.ConnectError):
            try:
                async with asyncio.timeout(timeout):
                    await self._writer.start_tls(ssl_context, server_hostname=server_hostname)
            except BaseException:
                self._writer.close()
                raise
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._writer.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._writer.get_extra_info("sockname")
        if info == "server_addr":
            return self._writer.get_extra_info("peername")
        if info == "socket":
            return self._writer.get_extra_info("socket")
        if info == "is_readable":
            # The pool asks before reusing an idle connection: a server that closed it (or
            # sent something unasked) makes it unusable. asyncio reads eagerly, so look at
            # what it has already seen before the socket itself.
            if self._writer.is_closing() or self._reader.at_eof():
                return True
            return is_socket_readable(self._writer.get_extra_info("socket"))
        return None


class AsyncioBackend(AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[tuple[Any, ...]] | None = None,
    ) -> AsyncNetworkStream:
        local = (local_address, 0) if local_address else None
        with _raising(httpcore2.ConnectTimeout, httpcore2.ConnectError):
            async with asyncio.timeout(timeout):
                # asyncio sets TCP_NODELAY on its TCP sockets, as AnyIO does.
                reader, writer = await asyncio.open_connection(
                    host, port, local_addr=local, limit=READ_SIZE
                )
        _apply(writer, socket_options)
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[tuple[Any, ...]] | None = None,
    ) -> AsyncNetworkStream:
        with _raising(httpcore2.ConnectTimeout, httpcore2.ConnectError):
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(path, limit=READ_SIZE)
        _apply(writer, socket_options)
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _apply(writer: asyncio.StreamWriter, socket_options: Iterable[tuple[Any, ...]] | None) -> None:
    sock: socket.socket | None = writer.get_extra_info("socket")
    for option in socket_options or ():
        if sock is not None:
            sock.setsockopt(*option)


def asyncio_transport(*, limits: httpx2.Limits) -> httpx2.AsyncHTTPTransport:
    """httpx's transport with the default TLS settings (certifi, ``SSL_CERT_FILE``) and
    ``limits``, its connection pool on ``AsyncioBackend``."""
    transport = httpx2.AsyncHTTPTransport(limits=limits)
    default_pool = transport._pool
    # httpx's transport builds its pool with no way to name the backend; the pool itself
    # takes one. Same settings as httpx gives it, the TLS context included.
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=default_pool._ssl_context,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=AsyncioBackend(),
    )
    return transport
