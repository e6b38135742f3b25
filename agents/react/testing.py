"""A scripted ``ChatModel`` for tests of the engine: canned replies, no network.

It behaves like a server that honours ``stop`` (the reply is cut before the first stop
sequence, unless ``honour_stop=False`` imitates one that ignores it), streams replies in
chunks to ``on_text``, and records every call. Tests of the whole stack use the HTTP
``agents.llm.scripted.ScriptedServer`` instead.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from agents.react.errors import ModelBadResponse
from agents.react.types import ChatMessage, Completion, JsonDict, ToolCall

Reply = Completion | str | Exception | Callable[["ScriptedCall"], "Completion | str"]


@dataclass
class ScriptedCall:
    messages: list[ChatMessage]
    stop: list[str] | None
    tools: list[JsonDict] | None
    temperature: float | None
    streamed: bool
    interrupted: bool = False  # on_text raised part-way through the reply

    @property
    def last_content(self) -> str:
        return str(self.messages[-1].get("content") or "")


def tool_calls(*calls: tuple[str, str], text: str = "") -> Completion:
    """A native tool-call reply: ``tool_calls(("calculator", '{"expression": "1+1"}'))``."""
    return Completion(
        text=text,
        tool_calls=tuple(
            ToolCall(id=f"call_{index}", name=name, arguments=arguments)
            for index, (name, arguments) in enumerate(calls, start=1)
        ),
        finish_reason="tool_calls",
    )


class ScriptedChatModel:
    """Replies from a script, in order. A reply is a ``Completion``, a text, an exception to
    raise, or a callable taking the ``ScriptedCall`` and returning one of the first two."""

    def __init__(
        self,
        replies: Iterable[Reply],
        *,
        model_name: str = "scripted",
        chunk_size: int = 4,
        honour_stop: bool = True,
        delay_seconds: float = 0.0,
    ) -> None:
        self.model_name = model_name
        self.replies = list(replies)
        self.chunk_size = chunk_size
        self.honour_stop = honour_stop
        self.delay_seconds = delay_seconds
        self.calls: list[ScriptedCall] = []

    @property
    def remaining(self) -> int:
        return len(self.replies)

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        stop: list[str] | None = None,
        tools: list[JsonDict] | None = None,
        temperature: float | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> Completion:
        call = ScriptedCall(
            messages=copy.deepcopy(messages),
            stop=list(stop) if stop else None,
            tools=copy.deepcopy(tools),
            temperature=temperature,
            streamed=on_text is not None,
        )
        self.calls.append(call)
        if not self.replies:
            raise ModelBadResponse(f"the script of {self.model_name!r} has no reply left")
        reply = self.replies.pop(0)
        if callable(reply) and not isinstance(reply, Exception):
            reply = reply(call)
        if isinstance(reply, Exception):
            raise reply
        completion = Completion(text=reply) if isinstance(reply, str) else reply
        if self.delay_seconds:
            time.sleep(self.delay_seconds)
        text = self._apply_stop(completion.text, stop)
        if on_text is not None:
            try:
                for start in range(0, len(text), self.chunk_size):
                    on_text(text[start : start + self.chunk_size])
            except BaseException:
                call.interrupted = True
                raise
        return replace(
            completion,
            text=text,
            prompt_tokens=completion.prompt_tokens or _estimate_tokens(messages),
            completion_tokens=completion.completion_tokens or max(1, len(text) // 4),
            finish_reason=completion.finish_reason or "stop",
        )

    def _apply_stop(self, text: str, stop: list[str] | None) -> str:
        if not stop or not self.honour_stop:
            return text
        cut = min((index for index in (text.find(s) for s in stop) if index != -1), default=-1)
        return text if cut == -1 else text[:cut]


def _estimate_tokens(messages: list[ChatMessage]) -> int:
    characters = sum(len(str(message.get("content") or "")) for message in messages)
    return max(1, characters // 4)
