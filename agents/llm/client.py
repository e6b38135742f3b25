"""The chat model the engine calls: any OpenAI-compatible endpoint, through the openai SDK.

Every call streams, and every call of the process runs on its one event loop
(``chatsite/server/loop.py``): a worker's run driver awaits ``acomplete`` there, and a thread
that calls ``complete`` hands the call over and waits. A call is stoppable at any moment,
before the first byte too: cancelling its task closes the HTTP stream at once (the engine's
``arun`` does so when its run is interrupted). What this module adds over the SDK:

- An overall deadline per call. The SDK's timeout bounds each socket read, so a server that
  trickles a byte every few seconds would never time out; here the whole call runs under
  ``asyncio.timeout`` and raises ``ModelTimeout`` at the deadline.
- Its own bounded retries with backoff (honouring ``Retry-After``) on 429, 5xx, connection
  errors and timeouts, inside that deadline. The SDK's retries are off because they know
  nothing of the deadline. A stream that fails after text was already handed to ``on_text``
  is not retried: the caller has shown that text and a second attempt could differ.
- A fast, clear failure on a rejected key and on ``insufficient_quota``.
- Error messages without the API key or the base URL's credentials, even when the server
  echoes them (``agents/llm/errors.py``).
- Usage from the stream's last chunk, or counted with tiktoken when the server sends none.

``on_text`` runs on the process's loop (``chatsite/server/loop.py``), where a worker drives
all its runs: it must not block (the engine's filters and ``agents/events.py`` only hand
text on).
Failures leave as the ``ModelError`` family of ``agents/react/errors.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any

import openai

from agents.llm.errors import endpoint_secrets, redacted_model_error
from agents.llm.http import CompletionStream, completion_stream
from agents.llm.tokens import count_message_tokens, count_tokens
from agents.react.errors import (
    ModelAuthError,
    ModelBadResponse,
    ModelError,
    ModelQuotaError,
    ModelRateLimited,
    ModelServerError,
    ModelTimeout,
    ModelUnavailable,
)
from agents.react.types import ChatMessage, Completion, JsonDict, ToolCall
from agents.redaction import Redactor
from chatsite.server.loop import run_on_process_loop

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 10.0
BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 20.0
RETRYABLE_STATUSES = frozenset({408, 409, 429})
# Endpoints that answered 400 to ``stream_options`` (older vLLM, llama.cpp): not sent again.
_REFUSE_STREAM_OPTIONS: set[str] = set()
# An API key is required by the SDK; local servers (Ollama, llama.cpp) ignore it.
PLACEHOLDER_API_KEY = "not-needed"


class OpenAIChatModel:
    """``ChatModel`` over an OpenAI-compatible ``base_url`` (OpenAI, Ollama, vLLM, llama.cpp)."""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        deadline_seconds: float = 120.0,
        max_retries: int = 3,
        default_temperature: float | None = None,
    ) -> None:
        if deadline_seconds <= 0:
            raise ValueError("deadline_seconds must be positive")
        if max_retries < 0:
            raise ValueError("max_retries cannot be negative")
        self.model_name = model
        self.base_url = base_url
        self.deadline_seconds = deadline_seconds
        self.max_retries = max_retries
        self.default_temperature = default_temperature
        self._api_key = api_key or PLACEHOLDER_API_KEY
        self._redact = Redactor(endpoint_secrets(base_url=base_url, api_key=api_key))

    def __repr__(self) -> str:
        shown_url = self._redact(self.base_url)
        return f"OpenAIChatModel(model={self.model_name!r}, base_url={shown_url!r})"

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        stop: list[str] | None = None,
        tools: list[JsonDict] | None = None,
        temperature: float | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """Call the model on the process's loop (``chatsite/server/loop.py``) and wait for the
        whole reply."""
        return run_on_process_loop(
            self.acomplete(
                messages, stop=stop, tools=tools, temperature=temperature, on_text=on_text
            )
        )

    async def acomplete(
        self,
        messages: list[ChatMessage],
        *,
        stop: list[str] | None = None,
        tools: list[JsonDict] | None = None,
        temperature: float | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        """Call the model and read the whole reply, on ``process_loop()``: the HTTP client's
        connections belong to it."""
        request: JsonDict = {"model": self.model_name, "messages": messages, "stream": True}
        if stop:
            request["stop"] = list(stop)
        if tools:
            request["tools"] = tools
        if temperature is None:
            temperature = self.default_temperature
        if temperature is not None:
            request["temperature"] = temperature
        try:
            return await self._with_retries(request, on_text)
        except ModelError as error:
            # The messages quote the base URL and the server's words, which may echo the key.
            redacted = redacted_model_error(error, self._redact)
        # Raised outside the except block, so the unredacted error is not kept as __context__.
        raise redacted

    async def _with_retries(
        self, request: JsonDict, on_text: Callable[[str], None] | None
    ) -> Completion:
        started = time.monotonic()
        deadline = started + self.deadline_seconds
        messages = request["messages"]
        retries = 0
        while True:
            outcome = _Attempt(on_text)
            try:
                await self._attempt(request, outcome, deadline)
            except _Retryable as failure:
                if outcome.delivered_text or retries >= self.max_retries:
                    raise failure.error from failure.__cause__
                retries += 1
                wait = _backoff(retries, failure.retry_after)
                if time.monotonic() + wait >= deadline:
                    raise failure.error from failure.__cause__
                logger.info(
                    "model call to %s failed (%s); retry %d/%d in %.1fs",
                    self._redact(self.base_url),
                    failure.error.code,
                    retries,
                    self.max_retries,
                    wait,
                )
                await asyncio.sleep(wait)
                continue
            except _StreamOptionsRefused:
                _REFUSE_STREAM_OPTIONS.add(self.base_url)
                continue
            return self._completion(messages, outcome, started)

    # -- one HTTP request ----------------------------------------------------------
    async def _attempt(self, request: JsonDict, outcome: _Attempt, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ModelTimeout(self._timeout_message())
        options = dict(request)
        sends_stream_options = self.base_url not in _REFUSE_STREAM_OPTIONS
        if sends_stream_options:
            options["stream_options"] = {"include_usage": True}
        try:
            # The deadline covers the whole call, however slowly the bytes trickle in.
            async with asyncio.timeout(remaining):
                stream = await completion_stream(
                    self._client,
                    json.dumps(options).encode(),
                    connect_timeout=min(CONNECT_TIMEOUT_SECONDS, remaining),
                )
                try:
                    async for chunk in _sse_chunks(stream):
                        # on_text runs here: whatever it raises (cancellation) propagates
                        # unchanged.
                        outcome.add(chunk)
                finally:
                    stream.close()
        except TimeoutError as exc:
            raise ModelTimeout(self._timeout_message()) from exc
        except openai.APIError as exc:
            if sends_stream_options and _refuses_stream_options(exc):
                raise _StreamOptionsRefused from exc
            raise self._translate(exc, deadline) from exc
        except json.JSONDecodeError as exc:  # a data line that is not JSON
            raise ModelBadResponse(f"{self.base_url} sent a malformed stream chunk: {exc}") from exc
        if not outcome.chunks:
            raise ModelBadResponse(f"{self.base_url} returned an empty stream")

    @property
    def _client(self) -> openai.AsyncOpenAI:
        return _sdk_client(self.base_url, self._api_key, os.getpid())

    def _completion(
        self, messages: list[ChatMessage], outcome: _Attempt, started: float
    ) -> Completion:
        text = "".join(outcome.text_parts)
        calls = outcome.tool_calls()
        # Some servers send a usage object of zeros: count then, too.
        if outcome.usage is not None and any(outcome.usage.values()):
            prompt_tokens = outcome.usage.get("prompt_tokens") or 0
            completion_tokens = outcome.usage.get("completion_tokens") or 0
        else:
            prompt_tokens = count_message_tokens(messages, self.model_name)
            completion_tokens = count_tokens(text, self.model_name) + sum(
                count_tokens(call.name, self.model_name)
                + count_tokens(call.arguments, self.model_name)
                for call in calls
            )
        return Completion(
            text=text,
            tool_calls=calls,
            prompt_tokens=int(prompt_tokens),
            completion_tokens=int(completion_tokens),
            finish_reason=outcome.finish_reason,
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    # -- errors --------------------------------------------------------------------
    def _timeout_message(self) -> str:
        return (
            f"{self.model_name} at {self.base_url} did not finish within {self.deadline_seconds:g}s"
        )

    def _translate(self, exc: openai.APIError, deadline: float) -> Exception:
        """The ModelError for an SDK error; wrapped in ``_Retryable`` when worth retrying."""
        where = f"{self.model_name} at {self.base_url}"
        if isinstance(exc, openai.APITimeoutError):
            error = ModelTimeout(self._timeout_message())
            if time.monotonic() >= deadline:
                return error
            return _Retryable(error)
        if isinstance(exc, openai.APIConnectionError):
            return _Retryable(ModelUnavailable(f"cannot reach {self.base_url}: {_cause(exc)}"))
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = _server_message(exc)
            if status in (401, 403):
                return ModelAuthError(
                    f"{self.base_url} rejected the API key ({status}): {detail}",
                    status_code=status,
                )
            if status == 429 and _is_quota_error(exc):
                return ModelQuotaError(
                    f"the account behind the API key for {self.base_url} has no quota left: "
                    f"{detail}",
                    status_code=status,
                )
            if status == 429:
                return _Retryable(
                    ModelRateLimited(f"{where} is rate limiting: {detail}", status_code=status),
                    retry_after=_retry_after(exc.response.headers),
                )
            if status >= 500 or status in RETRYABLE_STATUSES:
                return _Retryable(
                    ModelServerError(f"{where} failed ({status}): {detail}", status_code=status),
                    retry_after=_retry_after(exc.response.headers),
                )
            if status == 404:
                return ModelUnavailable(
                    f"{where} was not found ({status}): {detail}", status_code=status
                )
            return ModelBadResponse(
                f"{where} refused the request ({status}): {detail}", status_code=status
            )
        # An error object inside the stream (the server broke off mid-answer).
        return _Retryable(ModelServerError(f"{where} failed mid-stream: {exc.message}"))


# --------------------------------------------------------------------------------------
# Accumulating one streamed answer
# --------------------------------------------------------------------------------------


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _Attempt:
    """The pieces of one streamed completion as they arrive."""

    def __init__(self, on_text: Callable[[str], None] | None) -> None:
        self.on_text = on_text
        self.text_parts: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.chunks = 0
        self.delivered_text = False

    def add(self, chunk: Any) -> None:
        """One ``chat.completion.chunk`` as decoded JSON."""
        if not isinstance(chunk, dict):
            raise ModelBadResponse(f"a stream chunk is not a JSON object: {chunk!r:.100}")
        self.chunks += 1
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = {
                "prompt_tokens": usage.get("prompt_tokens") or 0,
                "completion_tokens": usage.get("completion_tokens") or 0,
            }
        for choice in _dicts(chunk.get("choices")):
            if choice.get("index") not in (0, None):
                continue  # we never ask for n > 1
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            for call_delta in _dicts(delta.get("tool_calls")):
                self._add_call_delta(call_delta)
            content = delta.get("content")
            if content and isinstance(content, str):
                self.text_parts.append(content)
                if self.on_text is not None:
                    self.delivered_text = True
                    self.on_text(content)

    def _add_call_delta(self, call_delta: dict[str, Any]) -> None:
        index = call_delta.get("index")
        call_id = call_delta.get("id")
        if not isinstance(index, int):
            # Some servers leave out the index: a new id starts a new call.
            is_new = call_id and all(c.id != call_id for c in self.calls.values())
            index = len(self.calls) if is_new or not self.calls else max(self.calls)
        call = self.calls.setdefault(index, _PartialCall())
        if call_id:
            call.id = str(call_id)
        function = call_delta.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        # OpenAI sends the name once; some servers repeat it in every delta.
        if name and name != call.name:
            call.name += str(name)
        arguments = function.get("arguments")
        if arguments:
            call.arguments.append(str(arguments))

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(
                id=call.id or f"call_{index}",
                name=call.name,
                arguments="".join(call.arguments),
            )
            for index, call in sorted(self.calls.items())
        )


async def _sse_chunks(stream: CompletionStream) -> AsyncIterator[Any]:
    """The decoded ``data:`` lines of a streamed completion, up to ``[DONE]``.

    The SDK's ``AsyncStream`` does the same through a general server-sent-events decoder and
    a cast per chunk; completions need neither (one event per ``data:`` line, no ``event:``
    names), and reading lines straight from the response costs a fraction of it per chunk.
    Transport failures and an error object in the stream raise the SDK's own exceptions,
    as its ``AsyncStream`` would.
    """
    lines = stream.lines()
    async for line in lines:
        if not line.startswith("data:"):
            continue  # blank separators, comments, event names
        data = line[5:].lstrip()
        if data.startswith("[DONE]"):
            await stream.read_to_end(lines)
            return
        chunk = json.loads(data)
        if isinstance(chunk, dict) and chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else None
            if not isinstance(message, str) or not message:
                message = "An error occurred during streaming"
            raise openai.APIError(message=message, request=stream.request, body=error)
        yield chunk


def _dicts(items: Any) -> list[dict[str, Any]]:
    """The JSON objects of a list that may be missing or null in a server's chunk."""
    if not isinstance(items, list):
        return []
    return [item for item in items if isinstance(item, dict)]


# --------------------------------------------------------------------------------------
# Retries and the deadline
# --------------------------------------------------------------------------------------


class _Retryable(Exception):
    def __init__(self, error: ModelError, *, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


class _StreamOptionsRefused(Exception):
    pass


def _backoff(retry: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return max(0.0, retry_after)
    ceiling = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (retry - 1))
    return ceiling / 2 + random.uniform(0, ceiling / 2)  # noqa: S311 - jitter, not security


def _retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    value = headers.get("retry-after-ms")
    if value:
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------------------
# Reading SDK errors
# --------------------------------------------------------------------------------------


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("detail") or body.get("error")
        if isinstance(message, str) and message:
            return message
        return json.dumps(body)[:300]
    if isinstance(body, str) and body.strip():
        return body.strip()[:300]
    return exc.response.reason_phrase or "no details"


def _is_quota_error(exc: openai.APIStatusError) -> bool:
    body = exc.body if isinstance(exc.body, dict) else {}
    return "insufficient_quota" in (exc.code, body.get("type"), body.get("code"))


def _refuses_stream_options(exc: openai.APIError) -> bool:
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return False
    return "stream_options" in f"{exc.message} {exc.body}"


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return str(cause) if cause is not None and str(cause) else str(exc)


@lru_cache(maxsize=32)
def _sdk_client(base_url: str, api_key: str, pid: int) -> openai.AsyncOpenAI:
    """The SDK's view of an endpoint (URL, key, headers, errors), per process; its own HTTP
    client sends nothing here (agents/llm/http.py sends the requests)."""
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
