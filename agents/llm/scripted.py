"""A scripted OpenAI-compatible chat server on loopback, for tests, benchmarks and the demo.

The real ``openai`` client talks to it over a real socket, so everything between the engine
and the wire is exercised. Replies are queued per model name (``script``), or computed from
the request by a per-model ``policy``; concurrent tests therefore use distinct model names.

    with ScriptedServer() as server:
        server.script("m1", [Reply("Thought: ...\\nFinal Answer: 42"), Fail(500)])
        client = OpenAI(base_url=server.base_url, api_key="x")

A test that needs a run to stay in progress holds a reply on a ``Gate`` instead of delaying
it: ``gate.wait_arrived()`` returns once the request is in, and the reply goes out only when
the test calls ``gate.open()``.

Failure injection: ``Fail`` (any status, optional ``Retry-After``), ``Hang`` (accept, then
send nothing), and on ``Reply`` a ``delay`` before the first token and a slow trickle
(``chunk_size``/``chunk_interval``). Another process can program a running server through
``POST /_control/script`` and ``GET /_control/requests?model=`` (see ``reply_from_dict``).

``POST /v1/embeddings`` answers deterministically: each text's vector is its words (and
each CJK character) hashed into ``EMBEDDING_DIMENSIONS`` buckets (``scripted_embedding``), so
texts that share words are near. A ``Fail`` queued for the model is answered instead.

In a process of its own: ``python -m agents.llm.serve --port 8765 [--demo]``.
"""

from __future__ import annotations

import collections
import itertools
import json
import re
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from agents.llm.tokens import count_message_tokens, count_tokens

JsonDict = dict[str, Any]


# --------------------------------------------------------------------------------------
# What the server can be told to answer
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScriptedToolCall:
    name: str
    arguments: str  # JSON text, sent in fragments when streaming
    id: str = ""


@dataclass(frozen=True, eq=False)
class Pause:
    """Holds a streamed reply once ``after_chars`` characters of its text are sent, until the
    test opens it: the test knows what the client has been sent, and when (``reached``)."""

    after_chars: int
    reached: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)

    def open(self) -> None:
        self.opened.set()


@dataclass(frozen=True)
class Reply:
    """One successful completion.

    ``ignore_stop`` makes the server send the whole text even past a requested stop sequence,
    like servers that ignore ``stop``. ``usage=False`` leaves usage out of the response.
    ``delay`` waits before the first byte of the body; ``chunk_interval`` waits between
    streamed chunks of ``chunk_size`` characters; ``pause`` stops the stream part-way.
    """

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    finish_reason: str | None = None
    usage: bool = True
    ignore_stop: bool = False
    delay: float = 0.0
    chunk_size: int = 8
    chunk_interval: float = 0.0
    pause: Pause | None = None

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")


class ToolCalls(Reply):
    """A completion that asks for tool calls, optionally after some assistant text.

    ``calls`` items are ``ScriptedToolCall``s, ``(name, arguments)`` pairs or dicts with
    ``name``/``arguments``(/``id``); arguments may be a dict (sent as JSON) or raw text.
    """

    def __init__(self, calls: Iterable[Any], text: str = "", **options: Any) -> None:
        super().__init__(text=text, tool_calls=tuple(_tool_call(c) for c in calls), **options)


def _tool_call(spec: Any) -> ScriptedToolCall:
    if isinstance(spec, ScriptedToolCall):
        return spec
    if isinstance(spec, tuple):
        name, arguments = spec
        call_id = ""
    elif isinstance(spec, dict):
        name, arguments, call_id = spec["name"], spec.get("arguments", {}), spec.get("id", "")
    else:
        raise TypeError(f"cannot make a tool call from {spec!r}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ScriptedToolCall(name=name, arguments=arguments, id=call_id)


@dataclass(frozen=True)
class Fail:
    """An HTTP error response. ``body`` defaults to an OpenAI-style error for the status."""

    status: int
    body: JsonDict | str | None = None
    retry_after: float | None = None

    @classmethod
    def insufficient_quota(cls) -> Fail:
        return cls(
            429,
            {
                "error": {
                    "message": "You exceeded your current quota, please check your plan.",
                    "type": "insufficient_quota",
                    "param": None,
                    "code": "insufficient_quota",
                }
            },
        )

    def payload(self) -> bytes:
        body = self.body if self.body is not None else _default_error_body(self.status)
        if isinstance(body, str):
            return body.encode()
        return json.dumps(body).encode()


def _default_error_body(status: int) -> JsonDict:
    kinds = {
        400: ("invalid_request_error", None),
        401: ("invalid_request_error", "invalid_api_key"),
        403: ("invalid_request_error", "forbidden"),
        404: ("invalid_request_error", "model_not_found"),
        429: ("requests", "rate_limit_exceeded"),
    }
    error_type, code = kinds.get(status, ("server_error", None))
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    message = f"Scripted failure: {status} {phrase}"
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


@dataclass(frozen=True)
class Hang:
    """Accept the request, then send nothing for ``seconds`` (or until the server stops).

    With ``after_headers`` the status line, headers and a first empty chunk go out first,
    so the client is stuck reading the body rather than waiting for a response.
    """

    seconds: float = 3600.0
    after_headers: bool = False


Response = Reply | Fail | Hang
Policy = Callable[[JsonDict], Response]


class Gate:
    """A signal between a test and the server, in place of a delay that hopes to be enough.

    ``hold(response)`` is a script entry: a request that reaches it sets ``arrived`` and then
    waits until ``open()`` before it gets ``response``. Past ``timeout`` (a ceiling for a test
    that failed before opening it) the response goes out anyway.
    """

    def __init__(self, *, timeout: float = 120.0) -> None:
        self.timeout = timeout
        self._arrived = threading.Event()
        self._opened = threading.Event()

    def hold(self, response: Response) -> Policy:
        def held(body: JsonDict) -> Response:
            self._arrived.set()
            self._opened.wait(self.timeout)
            return response

        return held

    @property
    def arrived(self) -> bool:
        return self._arrived.is_set()

    def wait_arrived(self, timeout: float = 60.0) -> None:
        """Until a request reached the gate; TimeoutError after ``timeout`` seconds."""
        if not self._arrived.wait(timeout):
            raise TimeoutError(f"no request reached the gate within {timeout:g} s")

    def open(self) -> None:
        self._opened.set()


def reply_from_dict(data: JsonDict) -> Response:
    """Build a response from JSON (the control API): ``{"type": "reply"|"tool_calls"|"fail"|
    "hang", ...fields}``."""
    data = dict(data)
    kind = data.pop("type", "reply")
    if kind == "reply":
        return Reply(**data)
    if kind == "tool_calls":
        return ToolCalls(data.pop("calls"), **data)
    if kind == "fail":
        if data.pop("insufficient_quota", False):
            return Fail.insufficient_quota()
        return Fail(**data)
    if kind == "hang":
        return Hang(**data)
    raise ValueError(f"unknown response type {kind!r}")


EMBEDDING_DIMENSIONS = 64
_EMBEDDING_TOKEN = re.compile(r"[\u3400-\u9fff]|[^\W\u3400-\u9fff]+", re.UNICODE)


def scripted_embedding(text: str) -> list[float]:
    """A deterministic unit vector for ``text``: its lowercased words, and each CJK
    character, counted into buckets by CRC-32 (stable across processes, unlike ``hash``)."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for token in _EMBEDDING_TOKEN.findall(text.lower()):
        vector[zlib.crc32(token.encode()) % EMBEDDING_DIMENSIONS] += 1.0
    length = sum(value * value for value in vector) ** 0.5
    return [value / length for value in vector] if length else vector


# --------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------


@dataclass
class _ModelState:
    queue: collections.deque[Response | Policy] = field(default_factory=collections.deque)
    policy: Policy | None = None
    requests: list[JsonDict] = field(default_factory=list)


class ScriptedServer:
    """A threaded OpenAI-compatible server on 127.0.0.1 (port 0 unless given).

    ``reject_stream_options`` answers 400 to any request carrying ``stream_options``, like
    older servers do, so clients can be tested for falling back without it. With
    ``api_key``, a chat request without ``Authorization: Bearer <api_key>`` gets OpenAI's 401.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        reject_stream_options: bool = False,
        api_key: str | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._models: dict[str, _ModelState] = {}
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self.reject_stream_options = reject_stream_options
        self.api_key = api_key
        self._httpd = _QuietHTTPServer((host, port), _handler_for(self))
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> ScriptedServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.1},
                name="scripted-openai-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def serve_forever(self) -> None:
        self._httpd.serve_forever(poll_interval=0.1)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- programming it ------------------------------------------------------------
    def script(self, model: str, responses: Iterable[Response | Policy]) -> None:
        """Queue replies for ``model``, answered in order, one per request.

        An entry may also be a callable taking the request body and returning a response.
        """
        with self._lock:
            self._state(model).queue.extend(responses)

    def policy(self, model: str, policy: Policy | None) -> None:
        """Answer ``model``'s requests with ``policy(request_body)`` once its queue is empty."""
        with self._lock:
            self._state(model).policy = policy

    def requests(self, model: str) -> list[JsonDict]:
        """The request bodies ``model`` received, oldest first."""
        with self._lock:
            return list(self._state(model).requests)

    def pending(self, model: str) -> int:
        """How many scripted replies for ``model`` have not been used yet."""
        with self._lock:
            return len(self._state(model).queue)

    def models(self) -> list[str]:
        with self._lock:
            return sorted(self._models)

    def _state(self, model: str) -> _ModelState:
        return self._models.setdefault(model, _ModelState())

    def _next_response(self, body: JsonDict) -> Response:
        model = str(body.get("model", ""))
        with self._lock:
            state = self._state(model)
            state.requests.append(body)
            entry = state.queue.popleft() if state.queue else state.policy
        if entry is None:
            return Fail(
                404,
                {
                    "error": {
                        "message": f"The scripted server has no reply for model {model!r}.",
                        "type": "invalid_request_error",
                        "param": "model",
                        "code": "model_not_found",
                    }
                },
            )
        if callable(entry):
            return entry(body)
        return entry

    def _next_embedding_failure(self, body: JsonDict) -> Fail | None:
        """Records the embeddings request; a ``Fail`` queued for its model, if one is next."""
        model = str(body.get("model", ""))
        with self._lock:
            state = self._state(model)
            state.requests.append(body)
            if state.queue and isinstance(state.queue[0], Fail):
                failure = state.queue.popleft()
                assert isinstance(failure, Fail)
                return failure
        return None

    def _completion_id(self) -> str:
        return f"chatcmpl-scripted-{next(self._ids)}"

    def _wait(self, seconds: float) -> bool:
        """Sleep unless the server is stopping; True if it is."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()


# --------------------------------------------------------------------------------------
# Rendering a reply the way OpenAI does
# --------------------------------------------------------------------------------------


def _cut_at_stop(text: str, stop: Any) -> tuple[str, bool]:
    stops = [stop] if isinstance(stop, str) else [s for s in stop or () if s]
    cuts = [text.find(s) for s in stops if s and s in text]
    if not cuts:
        return text, False
    return text[: min(cuts)], True


def _finish_reason(reply: Reply, stopped: bool) -> str:
    if reply.finish_reason:
        return reply.finish_reason
    if reply.tool_calls:
        return "tool_calls"
    return "stop"


def _usage(body: JsonDict, text: str, calls: tuple[ScriptedToolCall, ...]) -> JsonDict:
    model = str(body.get("model", ""))
    prompt = count_message_tokens(list(body.get("messages") or []), model)
    completion = count_tokens(text, model) + sum(
        count_tokens(c.name, model) + count_tokens(c.arguments, model) for c in calls
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _call_id(call: ScriptedToolCall, index: int, completion_id: str) -> str:
    return call.id or f"call_{completion_id.rsplit('-', 1)[-1]}_{index}"


def _pieces(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def _stream_chunks(
    reply: Reply, body: JsonDict, text: str, finish_reason: str, completion_id: str
) -> Iterator[JsonDict]:
    model = body.get("model", "")
    created = int(time.time())

    def chunk(delta: JsonDict, finish: str | None = None) -> JsonDict:
        return {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    # A pause falls between two chunks, so the client has exactly the text before it.
    cut = min(reply.pause.after_chars, len(text)) if reply.pause is not None else len(text)
    for piece in [*_pieces(text[:cut], reply.chunk_size), *_pieces(text[cut:], reply.chunk_size)]:
        yield chunk({"content": piece})
    for index, call in enumerate(reply.tool_calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": _call_id(call, index, completion_id),
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in _pieces(call.arguments, reply.chunk_size):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, finish_reason)
    wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    if reply.usage and wants_usage:
        yield {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(body, text, reply.tool_calls),
        }


def _completion_json(
    reply: Reply, body: JsonDict, text: str, finish_reason: str, completion_id: str
) -> JsonDict:
    message: JsonDict = {
        "role": "assistant",
        "content": text if text or not reply.tool_calls else None,
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": _call_id(call, index, completion_id),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for index, call in enumerate(reply.tool_calls)
        ]
    result: JsonDict = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if reply.usage:
        result["usage"] = _usage(body, text, reply.tool_calls)
    return result


# --------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------


class _QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default listen backlog is 5: when hundreds of runs call the model at
    # once (bench/run_concurrency.py), the connections past it were dropped by the kernel
    # and retried a second later, so a run waited a second that no real endpoint makes it
    # wait (uvicorn, which serves vLLM, listens with 2048). The kernel caps it at somaxconn.
    request_queue_size = 2048

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up (a deadline, a cancelled run) are routine here, not errors.
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        scripted = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    scripted: ScriptedServer
    protocol_version = "HTTP/1.1"  # keep-alive, like real endpoints; bodies are chunked
    server_version = "chatsite-scripted/1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests and benchmarks do not want a line per request."""

    # -- routing -------------------------------------------------------------------
    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path.rstrip("/") == "/v1/models":
            data = [
                {"id": name, "object": "model", "created": 0, "owned_by": "chatsite-scripted"}
                for name in self.scripted.models()
            ]
            self._send_json(200, {"object": "list", "data": data})
        elif url.path == "/_control/requests":
            model = parse_qs(url.query).get("model", [""])[0]
            self._send_json(200, self.scripted.requests(model))
        else:
            self._send_json(404, _not_found(url.path))

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        try:
            body = self._read_json()
        except ValueError as exc:
            self._send_json(400, _invalid_request(f"Invalid JSON body: {exc}"))
            return
        if url.path.rstrip("/") == "/v1/chat/completions":
            self._chat_completions(body)
        elif url.path.rstrip("/") == "/v1/embeddings":
            self._embeddings(body)
        elif url.path == "/_control/script":
            try:
                responses = [reply_from_dict(item) for item in body.get("responses", [])]
            except (TypeError, ValueError, KeyError) as exc:
                self._send_json(400, _invalid_request(f"Bad script: {exc}"))
                return
            self.scripted.script(str(body.get("model", "")), responses)
            self._send_json(200, {"queued": len(responses)})
        else:
            self._send_json(404, _not_found(url.path))

    # -- chat completions ----------------------------------------------------------
    def _chat_completions(self, body: JsonDict) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            self._send_json(400, _invalid_request("'messages' must be a list"))
            return
        key = self.scripted.api_key
        if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
            self._send_json(401, _invalid_api_key())
            return
        if self.scripted.reject_stream_options and "stream_options" in body:
            self._send_json(400, _invalid_request("Unrecognized request argument: stream_options"))
            return
        response = self.scripted._next_response(body)
        if isinstance(response, Fail):
            self._send_fail(response)
        elif isinstance(response, Hang):
            self._hang(response, streaming=bool(body.get("stream")))
        else:
            self._send_reply(response, body)

    # -- embeddings ----------------------------------------------------------------
    def _embeddings(self, body: JsonDict) -> None:
        texts = body.get("input") if isinstance(body, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            self._send_json(400, _invalid_request("'input' must be a string or a list of strings"))
            return
        key = self.scripted.api_key
        if key is not None and self.headers.get("Authorization") != f"Bearer {key}":
            self._send_json(401, _invalid_api_key())
            return
        failure = self.scripted._next_embedding_failure(body)
        if failure is not None:
            self._send_fail(failure)
            return
        data = [
            {"object": "embedding", "index": index, "embedding": scripted_embedding(text)}
            for index, text in enumerate(texts)
        ]
        tokens = sum(count_tokens(text) for text in texts)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": str(body.get("model", "")),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _send_reply(self, reply: Reply, body: JsonDict) -> None:
        text, stopped = reply.text, False
        if not reply.ignore_stop:
            text, stopped = _cut_at_stop(reply.text, body.get("stop"))
        finish_reason = _finish_reason(reply, stopped)
        completion_id = self.scripted._completion_id()
        if not body.get("stream"):
            if self.scripted._wait(reply.delay):
                return
            self._send_json(200, _completion_json(reply, body, text, finish_reason, completion_id))
            return
        self._start_chunked(200, "text/event-stream")
        if self.scripted._wait(reply.delay):
            return
        sent_chars = 0
        try:
            for number, chunk in enumerate(
                _stream_chunks(reply, body, text, finish_reason, completion_id)
            ):
                if number and self.scripted._wait(reply.chunk_interval):
                    return
                pause = reply.pause
                if (
                    pause is not None
                    and sent_chars >= pause.after_chars
                    and not pause.opened.is_set()
                ):
                    pause.reached.set()
                    while not pause.opened.wait(0.05):
                        if self.scripted._wait(0):
                            return
                self._write_chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                for choice in chunk.get("choices") or ():
                    sent_chars += len((choice.get("delta") or {}).get("content") or "")
            self._write_chunk(b"data: [DONE]\n\n")
            self._write_chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (deadline, cancellation); nothing more to send.
            self.close_connection = True

    def _send_fail(self, fail: Fail) -> None:
        headers = {}
        if fail.retry_after is not None:
            headers["Retry-After"] = f"{fail.retry_after:g}"
        self._send_bytes(fail.status, fail.payload(), "application/json", headers)

    def _hang(self, hang: Hang, *, streaming: bool) -> None:
        if hang.after_headers:
            self._start_chunked(200, "text/event-stream" if streaming else "application/json")
        self.scripted._wait(hang.seconds)
        self.close_connection = True

    # -- plumbing ------------------------------------------------------------------
    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        return json.loads(raw)

    def _send_json(self, status: int, payload: Any) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), "application/json")

    def _send_bytes(
        self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _start_chunked(self, status: int, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _invalid_request(message: str) -> JsonDict:
    return {"error": {"message": message, "type": "invalid_request_error", "code": None}}


def _invalid_api_key() -> JsonDict:
    return {
        "error": {
            "message": "Incorrect API key provided.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }


def _not_found(path: str) -> JsonDict:
    return {"error": {"message": f"No route {path}", "type": "invalid_request_error"}}
